// The Jinja engine on hostile chat templates. The input is the template source, then optionally a NUL
// byte and a JSON object to render it with; when there is none, or it does not parse as an object, the
// template is rendered with a fixed conversation. Limits are the defaults with a smaller step and size
// budget, so each input ends in well under a second.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "tandem/error.h"
#include "text/jinja/template.h"

namespace {

const nlohmann::ordered_json& fixedContext() {
    static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
  "messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello!", "reasoning_content": "greet"},
    {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
    {"role": "tool", "content": "4"}
  ],
  "tools": [{"type": "function", "function": {"name": "add", "description": "adds",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}],
  "add_generation_prompt": true,
  "bos_token": "<s>",
  "eos_token": "</s>",
  "enable_thinking": false
})");
    return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = input.find('\0');
    const std::string_view source = input.substr(0, nul);

    nlohmann::ordered_json parsed;
    const nlohmann::ordered_json* context = &fixedContext();
    if (nul != std::string_view::npos) {
        parsed = nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
        if (parsed.is_object()) context = &parsed;
    }

    tandem::text::jinja::RenderOptions options;
    options.now = [] { return std::tm{.tm_mday = 2, .tm_mon = 11, .tm_year = 126}; };
    options.limits.steps = 200'000;
    options.limits.stringBytes = std::size_t(8) << 20;
    options.limits.builtBytes = std::uint64_t(32) << 20;
    options.limits.listItems = std::size_t(1) << 16;
    try {
        const tandem::text::jinja::Template tmpl(source, "fuzz");
        (void)tmpl.render(*context, options);
    } catch (const tandem::Error&) {
    }
    return 0;
}
