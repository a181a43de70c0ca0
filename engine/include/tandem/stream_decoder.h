#pragma once
// Turns generated token ids, fed one at a time, into text that can be shown as it comes:
//  - only whole UTF-8 characters are emitted; a character whose bytes span several tokens is held back
//    until its last byte arrives;
//  - special tokens (EOS, <|im_end|>, ...) are never shown as text;
//  - text between <think> and </think> is reported as reasoning, apart from the answer;
//  - with gpt-oss's harmony tokens in the vocabulary (<|start|> <|channel|> <|message|> <|end|>), each
//    message's header is read instead: the analysis channel is reasoning, final (and commentary meant
//    for the user) is answer, and the headers are not shown. A message to a tool (a header with
//    "to=functions.NAME") comes out as answer text in harmony's own markup, whole header included,
//    "<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}",
//    for a server's tool-call parser to take apart;
//  - the emitted pieces add up to what Tokenizer::decode(all ids, skipSpecialTokens = true) gives, less
//    the think tags, including SentencePiece's rule that the text's first "▁" is not a space.
//
//   tandem::text::StreamDecoder stream(tokenizer, {.startsInReasoning = promptEndsWithThink});
//   for (int id : generated)
//       for (const auto& piece : stream.push(id)) show(piece.kind, piece.text);
//   for (const auto& piece : stream.finish()) show(piece.kind, piece.text);
#include <optional>
#include <string>
#include <vector>

#include "tandem/tokenizer.h"

namespace tandem::text {

struct StreamText {
    enum class Kind { Answer, Reasoning };
    Kind kind;
    std::string text;
};

class StreamDecoder {
public:
    struct Options {
        // The prompt already opened the reasoning (DeepSeek-R1 and Qwen3 templates end the generation
        // prompt with "<think>\n"), so output is reasoning until </think>.
        bool startsInReasoning = false;
        // Special tokens shown as their text all the same: the tool-call markers of a model whose
        // tokenizer marks them special (GLM's <tool_call>, DeepSeek's <｜tool▁calls▁begin｜>), which a
        // server parses out of the answer.
        std::vector<int> shownSpecialTokens;
        // Reads harmony's channels when the vocabulary has its tokens. A completion, which is the model's
        // text as it is, turns this off: the headers' words then show and the markers do not.
        bool harmonyChannels = true;
    };

    explicit StreamDecoder(Tokenizer tokenizer) : StreamDecoder(std::move(tokenizer), Options{}) {}
    StreamDecoder(Tokenizer tokenizer, Options options);

    // Feeds one generated id and returns the text it completed: usually zero or one piece, two when a
    // think tag written as text falls inside it. Throws tandem::Error for an id outside the vocabulary.
    std::vector<StreamText> push(int id);

    // End of the generation: returns what was held back (an unfinished character becomes U+FFFD) and
    // makes the decoder ready for a new generation that starts as the Options say.
    std::vector<StreamText> finish();

    bool inReasoning() const { return kind_ == StreamText::Kind::Reasoning; }
    // Whether the harmony channels are read (Options::harmonyChannels and a vocabulary that has them).
    bool readsHarmony() const { return harmony_.has_value(); }

private:
    // Text from the ids not yet emitted; empty while a character is unfinished, unless `force`.
    std::string takeNewText(bool force);
    // Routes decoded text to the answer or the reasoning, watching for think tags written as text.
    void route(std::string text, std::vector<StreamText>& out);
    void flushTagHoldback(std::vector<StreamText>& out);
    void append(std::vector<StreamText>& out, std::string text) const;
    void switchKind();
    // Harmony: one id while channels are read (returns false for an id that is neither a marker nor in a
    // header, which then decodes as text).
    bool pushHarmony(int id, std::vector<StreamText>& out);
    void endHarmonyMessage(std::string_view terminator, std::vector<StreamText>& out);
    void openHarmonyBody(std::vector<StreamText>& out);
    void giveUpHeader(std::vector<StreamText>& out);
    void resetWindow();

    Tokenizer tokenizer_;
    Options options_;
    StreamText::Kind kind_;
    std::optional<int> thinkOpenId_;
    std::optional<int> thinkCloseId_;
    std::vector<int> shownSpecial_;  // Options::shownSpecialTokens
    // The ids decoded together: the last emitted ones (context, so that spacing rules see what came
    // before) followed by the pending ones.
    std::vector<int> window_;
    std::size_t contextCount_ = 0;
    std::string contextText_;
    // Text that may be the start of a think tag written as text, held until it is clear.
    std::string tagHoldback_;

    struct HarmonyTokens {
        int start, end, message, channel;
        std::optional<int> constrain, returns, call;
    };
    std::optional<HarmonyTokens> harmony_;
    bool inHeader_ = false;          // between a message's <|start|> (or the prompt's) and its <|message|>
    bool headerAfterStart_ = false;  // the header began with a generated <|start|>, not the prompt's
    std::vector<int> headerIds_;
    bool toTool_ = false;            // the message being read is addressed to a tool: shown as markup
};

// gpt-oss: the ids that end the assistant's turn in the harmony format, <|return|> and <|call|>, when
// the vocabulary has the harmony tokens; empty otherwise. <|end|> ends a message but not the turn.
std::vector<int> harmonyEndOfTurnTokens(const Tokenizer& tokenizer);

}  // namespace tandem::text
