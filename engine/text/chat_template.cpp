#include "text/chat_template.h"

#include <optional>

#include "io/text_file.h"
#include "tandem/error.h"

namespace tandem::text {
namespace {

using Json = nlohmann::ordered_json;

// The special-token attributes transformers passes to every chat template (its special_tokens_map).
constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

Json readJson(const std::filesystem::path& path) {
    try {
        return io::parseJson<Json>(io::readRegularFile(path), path.string());
    } catch (const Json::exception& e) {
        throw Error(path.string() + " is not valid JSON: " + e.what());
    }
}

// A token is written either as its text or as an AddedToken object {"content": ...}.
std::optional<std::string> tokenText(const Json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
}

Json specialTokensOf(const Json& config) {
    Json tokens = Json::object();
    for (const char* name : kSpecialTokens)
        if (config.contains(name))
            if (const auto text = tokenText(config[name]); text && !text->empty()) tokens[name] = *text;
    if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
        Json extra = Json::array();
        for (const auto& t : config["additional_special_tokens"])
            if (const auto text = tokenText(t)) extra.push_back(*text);
        if (!extra.empty()) tokens["additional_special_tokens"] = extra;
    }
    return tokens;
}

// A fallback format still needs the family's special tokens when tokenizer_config.json is missing.
Json defaultSpecialTokens(std::string_view modelType) {
    Json tokens = Json::object();
    if (modelType.substr(0, 8) == "deepseek") {
        tokens["bos_token"] = "<｜begin▁of▁sentence｜>";
        tokens["eos_token"] = "<｜end▁of▁sentence｜>";
    } else if (modelType == "mixtral" || modelType == "mistral") {
        tokens["bos_token"] = "<s>";
        tokens["eos_token"] = "</s>";
    } else {
        tokens["eos_token"] = "<|im_end|>";
    }
    return tokens;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source, nlohmann::ordered_json specialTokens, std::string origin)
    : specialTokens_(std::move(specialTokens)) {
    templates_.emplace("default", jinja::Template(source, std::move(origin)));
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& modelDir) {
    std::string modelType;
    const auto configPath = modelDir / "config.json";
    if (std::filesystem::exists(configPath)) {
        const Json config = readJson(configPath);
        if (config.contains("model_type") && config["model_type"].is_string()) modelType = config["model_type"].get<std::string>();
    }
    return load(modelDir, modelType);
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& modelDir, std::string_view modelTypeForFallback) {
    ChatTemplate chat;
    const auto configPath = modelDir / "tokenizer_config.json";
    Json config = Json::object();
    if (std::filesystem::exists(configPath)) {
        config = readJson(configPath);
        if (!config.is_object()) throw Error(configPath.string() + " must hold a JSON object");
        chat.specialTokens_ = specialTokensOf(config);
    }
    // Older models keep their special tokens in special_tokens_map.json; transformers uses it for
    // the ones tokenizer_config.json does not set.
    const auto mapPath = modelDir / "special_tokens_map.json";
    if (std::filesystem::exists(mapPath)) {
        const Json map = readJson(mapPath);
        if (!map.is_object()) throw Error(mapPath.string() + " must hold a JSON object");
        const Json fromMap = specialTokensOf(map);
        for (const auto& [name, token] : fromMap.items())
            if (!chat.specialTokens_.contains(name)) chat.specialTokens_[name] = token;
    }

    const auto jinjaPath = modelDir / "chat_template.jinja";
    const auto jsonPath = modelDir / "chat_template.json";
    const std::string where = "the chat template in ";
    if (std::filesystem::exists(jinjaPath)) {
        // transformers lets this file replace the template in tokenizer_config.json.
        chat.templates_.emplace("default", jinja::Template(io::readRegularFile(jinjaPath), where + jinjaPath.string()));
    } else if (config.contains("chat_template") && !config["chat_template"].is_null()) {
        const Json& t = config["chat_template"];
        const std::string origin = where + configPath.string();
        if (t.is_string()) {
            chat.templates_.emplace("default", jinja::Template(t.get<std::string>(), origin));
        } else if (t.is_array()) {
            for (const auto& entry : t) {
                if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
                    !entry["template"].is_string())
                    throw Error(configPath.string() + ": each entry of the chat_template list needs a \"name\" and a \"template\" string");
                const std::string name = entry["name"].get<std::string>();
                chat.templates_.emplace(name, jinja::Template(entry["template"].get<std::string>(), origin + " (template '" + name + "')"));
            }
        } else {
            throw Error(configPath.string() + ": chat_template must be a string or a list of {name, template}");
        }
    } else if (std::filesystem::exists(jsonPath)) {
        const Json j = readJson(jsonPath);
        if (!j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
            throw Error(jsonPath.string() + " must hold {\"chat_template\": \"...\"}");
        chat.templates_.emplace("default", jinja::Template(j["chat_template"].get<std::string>(), where + jsonPath.string()));
    } else {
        const std::string_view fallback = fallbackChatTemplate(modelTypeForFallback);
        if (fallback.empty())
            throw Error(modelDir.string() + " has no chat template (tokenizer_config.json \"chat_template\" or chat_template.jinja) and " +
                        "tandem knows no standard format for model type '" + std::string(modelTypeForFallback) +
                        "'; add the model's chat_template.jinja to the folder");
        chat.templates_.emplace("default", jinja::Template(fallback, "the built-in " + std::string(modelTypeForFallback) + " chat format"));
        const Json defaults = defaultSpecialTokens(modelTypeForFallback);
        for (const auto& [name, token] : defaults.items())
            if (!chat.specialTokens_.contains(name)) chat.specialTokens_[name] = token;
        chat.warning_ = modelDir.string() + " has no chat template; using the standard " + std::string(modelTypeForFallback) +
                        " format instead, which may differ from what this model was tuned on";
    }
    return chat;
}

const jinja::Template& ChatTemplate::select(const nlohmann::ordered_json& extraVariables) const {
    // transformers prefers a template named "tool_use" when tools are given, else "default".
    const bool tools = extraVariables.contains("tools") && !extraVariables["tools"].is_null();
    if (tools)
        if (const auto it = templates_.find("tool_use"); it != templates_.end()) return it->second;
    if (const auto it = templates_.find("default"); it != templates_.end()) return it->second;
    if (templates_.size() == 1) return templates_.begin()->second;
    throw Error("this model has several chat templates and none is named 'default'");
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool addGenerationPrompt,
                                 const nlohmann::ordered_json& extraVariables) const {
    if (!messages.is_array()) throw Error("the conversation must be a JSON array of {\"role\": ..., \"content\": ...} messages");
    if (!extraVariables.is_object() && !extraVariables.is_null()) throw Error("extra chat template variables must be a JSON object");
    Json variables = specialTokens_;
    if (extraVariables.is_object())
        for (const auto& [name, value] : extraVariables.items()) variables[name] = value;
    variables["messages"] = messages;
    if (!variables.contains("tools")) variables["tools"] = nullptr;
    if (!variables.contains("documents")) variables["documents"] = nullptr;
    variables["add_generation_prompt"] = addGenerationPrompt;
    return select(extraVariables.is_object() ? extraVariables : Json::object()).render(variables, options_);
}

}  // namespace tandem::text
