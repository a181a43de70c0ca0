#pragma once
// Tool calls parsed back out of a chat's generated text, in the format of the model's family, so that a
// request with `tools` gets OpenAI's `tool_calls` rather than the model's markup as content:
//   Hermes (Qwen3):  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   GLM-4.5/4.6:     <tool_call>f\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
//   DeepSeek-V3/R1:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//   DeepSeek-V3.1:   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
// A call that does not parse (no closing tag by the end, arguments that are not JSON) stays content.
#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

enum class ToolCallFormat { None, Hermes, Glm, DeepSeek };

// By what the chat template renders for a past call (`renderedCall`, empty if unknown), else by the
// config.json model_type.
ToolCallFormat toolCallFormat(std::string_view renderedCall, std::string_view modelType);

// The tags of a format's calls, which a tokenizer may hold as special tokens (and a stream decoder then
// hides unless told to show them).
std::vector<std::string_view> toolCallMarkers(ToolCallFormat format);

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

    ToolCallFormat format_;
    std::string held_;       // text not yet given out
    std::string raw_;        // inside a DeepSeek block: its text so far, given as content if it breaks
    bool inBlock_ = false;   // after an opening tag (Hermes, GLM: of the call; DeepSeek: of the block)
    int callCount_ = 0;
    std::string space_;      // whitespace after a call, dropped unless more text follows
};

}  // namespace tandem::server
