#include "server/tool_calls.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "tandem/json_input.h"

namespace tandem::server {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kTag = "<tool_call>";
constexpr std::string_view kTagEnd = "</tool_call>";
constexpr std::string_view kArgKey = "<arg_key>";
constexpr std::string_view kArgKeyEnd = "</arg_key>";
constexpr std::string_view kArgValue = "<arg_value>";
constexpr std::string_view kArgValueEnd = "</arg_value>";
constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kFunctions = "functions.";
// Longer than any harmony header the decoder writes ("<|start|>assistant<|channel|>commentary
// to=functions.NAME <|constrain|>json"): past this without <|message|>, "<|start|>" was only text.
constexpr std::size_t kLongestHeader = 512;

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
    const auto first = s.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

bool blank(std::string_view s) { return s.find_first_not_of(kSpace) == std::string_view::npos; }

std::optional<Json> json(std::string_view text) {
    try {
        return parseJson<Json>(text, "a tool call");
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// Arguments are a JSON object; re-written compactly, so the client gets valid JSON whatever the spacing.
bool arguments(std::string_view text, std::string& out) {
    const auto j = json(trim(text));
    if (!j || !j->is_object()) return false;
    out = j->dump(-1, ' ', false, Json::error_handler_t::replace);
    return true;
}

// The recipient of a harmony header: "functions.f" in "assistant to=functions.f<|channel|>commentary json"
// or "assistant<|channel|>commentary to=functions.f <|constrain|>json".
std::string_view recipient(std::string_view header) {
    constexpr std::string_view key = "to=";
    for (std::size_t at = header.find(key); at != std::string_view::npos; at = header.find(key, at + 1)) {
        if (at > 0 && header[at - 1] != ' ' && header[at - 1] != '>') continue;
        const std::string_view rest = header.substr(at + key.size());
        return rest.substr(0, std::min(rest.find(' '), rest.find('<')));
    }
    return {};
}

bool validName(std::string_view name) { return !name.empty() && name.find_first_of(" \t\r\n<>") == std::string_view::npos; }

// How many bytes at the end of `text` may begin `tag`.
std::size_t partialTag(std::string_view text, std::string_view tag) {
    for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
        if (tag.starts_with(text.substr(text.size() - n))) return n;
    return 0;
}

}  // namespace

std::vector<std::string_view> toolCallMarkers(ToolCallFormat format) {
    switch (format) {
    case ToolCallFormat::Hermes: return {kTag, kTagEnd};
    case ToolCallFormat::Glm: return {kTag, kTagEnd, kArgKey, kArgKeyEnd, kArgValue, kArgValueEnd};
    case ToolCallFormat::DeepSeek: return {kCallsBegin, kCallsEnd, kCallBegin, kCallEnd, kSep};
    case ToolCallFormat::Harmony:
    case ToolCallFormat::None: break;
    }
    return {};
}

ToolCallFormat toolCallFormat(std::string_view renderedCall, std::string_view modelType) {
    if (renderedCall.find(kCall) != std::string_view::npos && renderedCall.find("to=functions.") != std::string_view::npos)
        return ToolCallFormat::Harmony;
    if (renderedCall.find(kCallBegin) != std::string_view::npos) return ToolCallFormat::DeepSeek;
    if (renderedCall.find(kArgKey) != std::string_view::npos) return ToolCallFormat::Glm;
    if (renderedCall.find(kTag) != std::string_view::npos) return ToolCallFormat::Hermes;
    if (modelType.starts_with("deepseek_v3")) return ToolCallFormat::DeepSeek;
    if (modelType.starts_with("glm4")) return ToolCallFormat::Glm;
    if (modelType.starts_with("qwen")) return ToolCallFormat::Hermes;
    if (modelType == "gpt_oss") return ToolCallFormat::Harmony;
    return ToolCallFormat::None;
}

nlohmann::ordered_json messagesForTemplate(ToolCallFormat format, const nlohmann::ordered_json& messages) {
    if (format != ToolCallFormat::Harmony || !messages.is_array()) return messages;
    Json out = messages;
    for (Json& m : out) {
        if (!m.is_object() || m.value("role", "") != "assistant") continue;
        const bool hasCalls = m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty();
        if (m.contains("reasoning_content") && m["reasoning_content"].is_string() && !m.contains("thinking")) {
            m["thinking"] = m["reasoning_content"];
            const bool content = m.contains("content") && m["content"].is_string() && !m["content"].get_ref<const std::string&>().empty();
            if (hasCalls && content && !m["thinking"].get_ref<const std::string&>().empty()) m.erase("content");
        }
        if (!hasCalls) continue;
        for (Json& call : m["tool_calls"]) {
            Json* function = call.is_object() && call.contains("function") && call["function"].is_object() ? &call["function"] : nullptr;
            if (!function || !function->contains("arguments") || !(*function)["arguments"].is_string()) continue;
            if (auto parsed = json(trim((*function)["arguments"].get_ref<const std::string&>())); parsed && parsed->is_object())
                (*function)["arguments"] = std::move(*parsed);
        }
    }
    return out;
}

bool ToolCallParser::parseCall(std::string_view body, ToolCall& call) const {
    if (format_ == ToolCallFormat::Hermes) {
        const auto j = json(trim(body));
        if (!j || !j->is_object() || !j->contains("name") || !(*j)["name"].is_string()) return false;
        call.name = (*j)["name"].get<std::string>();
        const Json* args = j->contains("arguments") ? &(*j)["arguments"] : j->contains("parameters") ? &(*j)["parameters"] : nullptr;
        if (!args) {
            call.arguments = "{}";
        } else if (args->is_string()) {  // some models write the arguments as a JSON string
            if (!arguments(args->get_ref<const std::string&>(), call.arguments)) return false;
        } else if (args->is_object()) {
            call.arguments = args->dump(-1, ' ', false, Json::error_handler_t::replace);
        } else {
            return false;
        }
        return validName(call.name);
    }
    if (format_ == ToolCallFormat::Glm) {
        // NAME, then <arg_key>K</arg_key><arg_value>V</arg_value> pairs; V is JSON when it parses as JSON.
        const auto nameEnd = std::min(body.find('\n'), body.find(kArgKey));
        call.name = std::string(trim(body.substr(0, nameEnd)));
        Json args = Json::object();
        std::string_view rest = nameEnd == std::string_view::npos ? std::string_view() : body.substr(nameEnd);
        while (!blank(rest)) {
            rest = rest.substr(rest.find_first_not_of(kSpace));
            if (!rest.starts_with(kArgKey)) return false;
            const auto keyEnd = rest.find(kArgKeyEnd);
            if (keyEnd == std::string_view::npos) return false;
            const std::string key(trim(rest.substr(kArgKey.size(), keyEnd - kArgKey.size())));
            rest = rest.substr(keyEnd + kArgKeyEnd.size());
            rest = rest.substr(std::min(rest.size(), rest.find_first_not_of(kSpace)));
            if (!rest.starts_with(kArgValue)) return false;
            const auto valueEnd = rest.find(kArgValueEnd);
            if (valueEnd == std::string_view::npos) return false;
            const std::string_view value = rest.substr(kArgValue.size(), valueEnd - kArgValue.size());
            rest = rest.substr(valueEnd + kArgValueEnd.size());
            if (key.empty()) return false;
            const auto parsed = json(trim(value));
            args[key] = parsed ? *parsed : Json(std::string(value));
        }
        call.arguments = args.dump(-1, ' ', false, Json::error_handler_t::replace);
        return validName(call.name);
    }
    // DeepSeek: "function<｜tool▁sep｜>NAME\n```json\n{...}\n```" (V3, R1) or "NAME<｜tool▁sep｜>{...}" (V3.1).
    const auto sep = body.find(kSep);
    if (sep == std::string_view::npos) return false;
    const std::string_view left = trim(body.substr(0, sep));
    std::string_view right = body.substr(sep + kSep.size());
    const auto fence = right.find("```json");
    if (left == "function" && fence != std::string_view::npos) {
        call.name = std::string(trim(right.substr(0, fence)));
        right = right.substr(fence + 7);
        const auto close = right.rfind("```");
        if (close == std::string_view::npos || !blank(right.substr(close + 3))) return false;
        right = right.substr(0, close);
    } else {
        call.name = std::string(left);
    }
    return validName(call.name) && arguments(right, call.arguments);
}

void ToolCallParser::emitText(std::string text, std::string& content) {
    // Whitespace between calls (and after the last) is no content of its own.
    if (callCount_ > 0 && blank(text)) {
        space_ += text;
        return;
    }
    content += space_;
    space_.clear();
    content += text;
}

void ToolCallParser::pushHarmony(std::string& content, std::vector<ToolCall>& calls) {
    while (!held_.empty()) {
        if (!inBlock_) {
            const auto at = held_.find(kStart);
            if (at == std::string::npos) {
                const std::size_t keep = partialTag(held_, kStart);
                emitText(held_.substr(0, held_.size() - keep), content);
                held_.erase(0, held_.size() - keep);
                return;
            }
            emitText(held_.substr(0, at), content);
            held_.erase(0, at + kStart.size());
            raw_ = kStart;
            inBlock_ = true;
            continue;
        }
        if (!inBody_) {
            // The header, up to <|message|>: it must name a function.
            const auto at = held_.find(kMessage);
            if (at == std::string::npos) {
                if (held_.size() <= kLongestHeader) return;
                emitText(raw_ + held_, content);
                held_.clear();
                raw_.clear();
                inBlock_ = false;
                return;
            }
            const std::string to(recipient(std::string_view(held_).substr(0, at)));
            raw_ += held_.substr(0, at + kMessage.size());
            held_.erase(0, at + kMessage.size());
            if (to.empty()) {  // a message to no one is no call: its text is content
                emitText(std::move(raw_), content);
                raw_.clear();
                inBlock_ = false;
                continue;
            }
            callName_ = to.starts_with(kFunctions) ? to.substr(kFunctions.size()) : to;
            inBody_ = true;
            continue;
        }
        // The arguments, up to <|call|> (or <|end|>, which some calls end with).
        const auto call = held_.find(kCall);
        const auto end = held_.find(kEnd);
        if (call == std::string::npos && end == std::string::npos) return;
        if (call < end) closeHarmonyCall(call, kCall.size(), content, calls);
        else closeHarmonyCall(end, kEnd.size(), content, calls);
    }
}

void ToolCallParser::closeHarmonyCall(std::size_t end, std::size_t tagSize, std::string& content, std::vector<ToolCall>& calls) {
    ToolCall call;
    call.name = callName_;
    if (validName(call.name) && arguments(std::string_view(held_).substr(0, end), call.arguments)) {
        calls.push_back(std::move(call));
        ++callCount_;
    } else {
        emitText(raw_ + held_.substr(0, std::min(held_.size(), end + tagSize)), content);
    }
    held_.erase(0, std::min(held_.size(), end + tagSize));
    raw_.clear();
    callName_.clear();
    inBlock_ = false;
    inBody_ = false;
}

void ToolCallParser::push(std::string_view text, std::string& content, std::vector<ToolCall>& calls) {
    held_ += text;
    if (format_ == ToolCallFormat::None) {
        emitText(std::move(held_), content);
        held_.clear();
        return;
    }
    if (format_ == ToolCallFormat::Harmony) {
        pushHarmony(content, calls);
        return;
    }
    const bool deepSeek = format_ == ToolCallFormat::DeepSeek;
    while (!held_.empty()) {
        if (!inBlock_) {
            const std::string_view open = deepSeek ? kCallsBegin : kTag;
            const auto at = held_.find(open);
            if (at == std::string::npos) {
                // Text that may begin the opening tag waits for the next piece.
                const std::size_t keep = partialTag(held_, open);
                emitText(held_.substr(0, held_.size() - keep), content);
                held_.erase(0, held_.size() - keep);
                return;
            }
            emitText(held_.substr(0, at), content);
            held_.erase(0, at + open.size());
            raw_ = open;
            inBlock_ = true;
            continue;
        }
        if (!deepSeek) {
            const auto end = held_.find(kTagEnd);
            if (end == std::string::npos) return;
            ToolCall call;
            if (parseCall(std::string_view(held_).substr(0, end), call)) {
                calls.push_back(std::move(call));
                ++callCount_;
            } else {
                emitText(std::string(kTag) + held_.substr(0, end + kTagEnd.size()), content);
            }
            held_.erase(0, end + kTagEnd.size());
            inBlock_ = false;
            continue;
        }
        // In a DeepSeek block: calls, whitespace between them, then the block's end.
        const auto first = held_.find_first_not_of(kSpace);
        raw_ += held_.substr(0, first);
        held_.erase(0, first);
        if (held_.empty()) return;
        if (held_.starts_with(kCallsEnd)) {
            held_.erase(0, kCallsEnd.size());
            raw_.clear();
            inBlock_ = false;
            continue;
        }
        if (held_.starts_with(kCallBegin)) {
            const auto end = held_.find(kCallEnd);
            if (end == std::string::npos) return;
            ToolCall call;
            const std::size_t whole = end + kCallEnd.size();
            if (parseCall(std::string_view(held_).substr(kCallBegin.size(), end - kCallBegin.size()), call)) {
                calls.push_back(std::move(call));
                ++callCount_;
            } else {
                emitText(raw_ + held_.substr(0, whole), content);
            }
            raw_.clear();
            held_.erase(0, whole);
            continue;
        }
        if (kCallsEnd.starts_with(held_) || kCallBegin.starts_with(held_)) return;
        // Something else inside the block: it was no block of calls after all.
        emitText(raw_ + held_, content);
        raw_.clear();
        held_.clear();
        inBlock_ = false;
    }
}

void ToolCallParser::finish(std::string& content, std::vector<ToolCall>& calls) {
    push({}, content, calls);
    // A harmony call's text ends where the model stopped on <|call|>.
    if (format_ == ToolCallFormat::Harmony && inBody_) closeHarmonyCall(held_.size(), 0, content, calls);
    if (inBlock_) emitText((format_ == ToolCallFormat::Hermes || format_ == ToolCallFormat::Glm ? std::string(kTag) : raw_) + held_, content);
    else emitText(held_, content);
    held_.clear();
    raw_.clear();
    space_.clear();
    inBlock_ = false;
    inBody_ = false;
    callName_.clear();
}

std::vector<ToolCall> ToolCallParser::parse(ToolCallFormat format, std::string_view text, std::string& content) {
    ToolCallParser parser(format);
    std::vector<ToolCall> calls;
    parser.push(text, content, calls);
    parser.finish(content, calls);
    return calls;
}

}  // namespace tandem::server
