#pragma once
// A model's chat template: the Jinja program in its tokenizer files that turns a conversation into the
// prompt text the model was trained on. Rendering matches transformers' apply_chat_template.
#include <atomic>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "text/jinja/template.h"

namespace tandem::text {

class ChatTemplate {
public:
    // Reads the template of the model in `modelDir` the way transformers does: chat_template.jinja if
    // present, else tokenizer_config.json's "chat_template" (a string, or a list of {name, template}),
    // else chat_template.json. The special tokens (bos_token, eos_token, ...) come from
    // tokenizer_config.json, then special_tokens_map.json. Without a template, the known format of `modelTypeForFallback` (config.json's
    // model_type: qwen3_moe, deepseek_v3, deepseek_v2, mixtral, ...) is used and warning() says so.
    static ChatTemplate load(const std::filesystem::path& modelDir, std::string_view modelTypeForFallback);
    // As above, taking the model type from the folder's config.json.
    static ChatTemplate load(const std::filesystem::path& modelDir);

    // A template given as text; `specialTokens` is a JSON object such as {"bos_token": "<s>"}.
    ChatTemplate(std::string_view source, nlohmann::ordered_json specialTokens, std::string origin = "chat template");

    // `messages` is a JSON array of {"role", "content", ...} objects. `extraVariables` (a JSON object)
    // adds template variables such as enable_thinking, tools, documents, reasoning_effort; tools and
    // documents default to null, as in transformers.
    std::string render(const nlohmann::ordered_json& messages, bool addGenerationPrompt,
                       const nlohmann::ordered_json& extraVariables = nlohmann::ordered_json::object()) const;

    // A special token's text from the tokenizer files ("eos_token" -> "<|im_end|>"), if set.
    std::optional<std::string> specialToken(const std::string& name) const {
        const auto it = specialTokens_.find(name);
        if (it == specialTokens_.end() || !it->is_string()) return std::nullopt;
        return it->get<std::string>();
    }

    bool isFallback() const { return !warning_.empty(); }
    // Why the fallback format is in use; empty when the model's own template is.
    const std::string& warning() const { return warning_; }

    // The local time strftime_now() reports (gpt-oss prints today's date); the system clock by default.
    void setClock(std::function<std::tm()> now) { options_.now = std::move(now); }
    // Once *cancel is true (set from any thread), a render in progress ends with an Error soon after.
    // A template that never ends on its own also stops at the limits of jinja::RenderLimits.
    void setCancelFlag(const std::atomic<bool>* cancel) { options_.cancel = cancel; }

private:
    ChatTemplate() = default;
    const jinja::Template& select(const nlohmann::ordered_json& extraVariables) const;

    std::map<std::string, jinja::Template> templates_;  // by name; a single template is "default"
    nlohmann::ordered_json specialTokens_ = nlohmann::ordered_json::object();
    std::string warning_;
    jinja::RenderOptions options_;
};

// The built-in prompt format of a model type, for models that ship no template; empty if unknown.
std::string_view fallbackChatTemplate(std::string_view modelType);

}  // namespace tandem::text
