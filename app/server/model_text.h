#pragma once
// The text side of the served model: its chat template and tokenizer turn requests into prompt tokens,
// and a TextStream turns generated ids back into text deltas. This is Chat::reply's work (tandem/chat.h)
// with what an API request brings besides a list of messages: tools, tool calls and tool results, and
// template variables; prompts are made on the HTTP threads, the deltas on the engine thread.
#include <filesystem>
#include <string>
#include <vector>

#include "server/openai_request.h"
#include "server/tool_calls.h"
#include "tandem/engine.h"
#include "tandem/stream_decoder.h"
#include "tandem/tokenizer.h"
#include "tandem/chat_template.h"
#include "tandem/stop_strings.h"

namespace tandem::server {

struct Delta {
    enum class Kind { Content, Reasoning, ToolCall };
    Kind kind;
    std::string text;       // a tool call: its name
    std::string arguments;  // a tool call: its arguments, a JSON object as text
};

struct Prompt {
    std::vector<int> tokens;
    bool opensThinking = false;  // the template ended the prompt with <think>: output starts as reasoning
};

class ModelText {
public:
    ModelText(const std::filesystem::path& modelDir, const std::string& modelType);

    // ApiError 400 when the template refuses the conversation (its own raise_exception, its limits), or
    // when the request has tools and the template does not use them.
    Prompt chatPrompt(const ChatRequest& request) const;
    // ApiError 400 for an empty prompt or ids outside the vocabulary.
    Prompt completionPrompt(const CompletionRequest& request) const;

    // Ids past the tokenizer's vocabulary are never chosen; a chat also ends at the template's end-of-turn.
    GenerateOptions chatOptions(GenerateOptions options) const;
    GenerateOptions completionOptions(GenerateOptions options) const;

    const text::Tokenizer& tokenizer() const { return tokenizer_; }
    const std::string& templateWarning() const { return template_.warning(); }
    // How the model writes tool calls (by what its template renders for one, else by its model_type).
    ToolCallFormat toolCallFormat() const { return toolCallFormat_; }

private:
    text::Tokenizer tokenizer_;
    ModelChatTemplate template_;
    std::vector<int> endOfTurn_;
    ToolCallFormat toolCallFormat_ = ToolCallFormat::None;
};

// Generated ids to text deltas, in order. A chat's reasoning (<think>...</think>) comes apart from the
// content; a completion's text keeps its think tags. Stop strings end the content (the text before the
// first one is the last delta) and never reach the client, even in part. With a tool-call format, calls
// in the content come as ToolCall deltas (each whole, once it closes).
class TextStream {
public:
    TextStream(const text::Tokenizer& tokenizer, bool startsInReasoning, bool separateReasoning,
               std::vector<std::string> stops, ToolCallFormat toolCalls = ToolCallFormat::None);

    void push(int id, std::vector<Delta>& out);
    // What was held back, at the end.
    void finish(std::vector<Delta>& out);
    bool stopped() const { return stops_.stopped(); }
    bool sawToolCalls() const { return toolCalls_.sawCalls(); }

private:
    void route(const std::vector<text::StreamText>& pieces, std::vector<Delta>& out);
    void content(std::string text, std::vector<Delta>& out);
    void parsed(std::string text, std::vector<ToolCall>& calls, std::vector<Delta>& out);

    text::StreamDecoder decoder_;
    StopStringFilter stops_;
    ToolCallParser toolCalls_;
    bool separateReasoning_;
    bool inReasoning_;
};

}  // namespace tandem::server
