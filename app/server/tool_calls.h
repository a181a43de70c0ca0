#pragma once
// Tool calls parsed back out of a chat's generated text, in the format of the model's family, so that a
// request with `tools` gets OpenAI's `tool_calls` rather than the model's markup as content:
//   Hermes (Qwen3):  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   GLM-4.5/4.6:     <tool_call>f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
//   DeepSeek-V3/R1:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//   DeepSeek-V3.1:   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//   gpt-oss (harmony): <|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
//                    (as the model writes it; its template renders past calls with the recipient in the
//                    role header, <|start|>assistant to=functions.f<|channel|>commentary json<|message|>...).
//                    The stream decoder hides harmony's markers but writes a message to a tool out whole in
//                    this form; <|call|> is a stop token, so the text may end without it.
// A call that does not parse (no closing tag by the end, arguments that are not JSON) stays content.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::server {

enum class ToolCallFormat { None, Hermes, Glm, DeepSeek, Harmony };

// By what the chat template renders for a past call (`renderedCall`, empty if unknown), else by the
// config.json model_type.
ToolCallFormat toolCallFormat(std::string_view renderedCall, std::string_view modelType);

// The tags of a format's calls, which a tokenizer may hold as special tokens (and a stream decoder then
// hides unless told to show them). None for Harmony, whose calls the stream decoder writes out itself.
std::vector<std::string_view> toolCallMarkers(ToolCallFormat format);

// An OpenAI request's messages the way the format's chat template reads them. Harmony (gpt-oss): an
// assistant's reasoning_content becomes its `thinking` (the template's name; beside calls it replaces the
// content, which the template refuses to take with it), and a call's arguments given as JSON text become
// the object they hold (the template writes them with tojson, which would quote the text again). Other
// formats: the messages as they are.
nlohmann::ordered_json messagesForTemplate(ToolCallFormat format, const nlohmann::ordered_json& messages);

struct ToolCall {
    std::string name;
    std::string arguments;  // a JSON object, as text
};

// Fed the content as it comes. Text that may be the start of a call is held back until the call closes
// (or turns out not to be one); each call is given whole, never in parts.
class ToolCallParser {
public:
    explicit ToolCallParser(ToolCallFormat format) : format_(format) {}

    // Appends what can be shown now to `content` and the calls that closed to `calls`.
    void push(std::string_view text, std::string& content, std::vector<ToolCall>& calls);
    // What was held back, at the end: an unclosed call is content.
    void finish(std::string& content, std::vector<ToolCall>& calls);
    bool sawCalls() const { return callCount_ > 0; }

    // Parses a whole text at once.
    static std::vector<ToolCall> parse(ToolCallFormat format, std::string_view text, std::string& content);

private:
    void emitText(std::string text, std::string& content);
    bool parseCall(std::string_view body, ToolCall& call) const;
    void pushHarmony(std::string& content, std::vector<ToolCall>& calls);
    // The end of a harmony call's arguments (the text ended, or <|call|>/<|end|> at `end`, `tagSize` long).
    void closeHarmonyCall(std::size_t end, std::size_t tagSize, std::string& content, std::vector<ToolCall>& calls);

    ToolCallFormat format_;
    std::string held_;       // text not yet given out
    std::string raw_;        // inside a DeepSeek block: its text so far, given as content if it breaks
    bool inBlock_ = false;   // after an opening tag (Hermes, GLM: of the call; DeepSeek: of the block; Harmony: <|start|>)
    bool inBody_ = false;    // Harmony: past the call's <|message|>
    std::string callName_;   // Harmony: the function the call's header names
    int callCount_ = 0;
    std::string space_;      // whitespace after a call, dropped unless more text follows
};

}  // namespace tandem::server
