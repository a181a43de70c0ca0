#pragma once
// A model's chat template for callers outside the engine (tandem-cli serve): the template transformers
// would use for the model folder (text/chat_template.h: chat_template.jinja, tokenizer_config.json,
// chat_template.json, else the family's built-in format), rendered on Tandem's Jinja interpreter with
// any template variables (tools, enable_thinking, ...). tandem::Chat renders through the same.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem::text {
class ChatTemplate;
}

namespace tandem {

class ModelChatTemplate {
public:
    // Throws tandem::Error for a broken template file.
    static ModelChatTemplate load(const std::filesystem::path& modelDir, std::string_view modelTypeForFallback);

    // `messages`: a JSON array of {"role", "content", ...}; `variables`: a JSON object of template variables.
    // Throws tandem::Error when the template refuses (its raise_exception, its limits).
    std::string render(const nlohmann::ordered_json& messages, bool addGenerationPrompt,
                       const nlohmann::ordered_json& variables) const;
    // A special token's text from the tokenizer files ("eos_token" -> "<|im_end|>"), if set.
    std::optional<std::string> specialToken(const std::string& name) const;
    // Why the built-in format is in use; empty when the model's own template is.
    const std::string& warning() const;

private:
    std::shared_ptr<const text::ChatTemplate> impl_;
};

}  // namespace tandem
