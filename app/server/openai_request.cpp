#include "server/openai_request.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "tandem/json_input.h"
#include "server/api_error.h"

namespace tandem::server {
namespace {

using Json = nlohmann::ordered_json;

Json parseBody(std::string_view body) {
    if (body.empty()) throw ApiError(400, "the request has no body: send a JSON object");
    Json j;
    try {
        j = parseJson<Json>(body, "the request body");
    } catch (const Json::exception& e) {
        throw ApiError(400, "the request body is not valid JSON: " + std::string(e.what()));
    } catch (const tandem::Error& e) {
        throw ApiError(400, e.what());
    }
    if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
    return j;
}

std::string number(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
}

// The fields of one JSON object, read with their types checked; a field that is null counts as absent.
class Fields {
public:
    Fields(const Json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

    const Json* find(const std::string& name) const {
        const auto it = object_.find(name);
        return it == object_.end() || it->is_null() ? nullptr : &*it;
    }
    std::string param(const std::string& name) const { return prefix_ + name; }
    [[noreturn]] void fail(const std::string& name, const std::string& what) const {
        throw ApiError(400, param(name) + " " + what, param(name));
    }

    std::optional<bool> boolean(const std::string& name) const {
        const Json* v = find(name);
        if (!v) return std::nullopt;
        if (!v->is_boolean()) fail(name, "must be true or false");
        return v->get<bool>();
    }
    std::optional<std::string> string(const std::string& name) const {
        const Json* v = find(name);
        if (!v) return std::nullopt;
        if (!v->is_string()) fail(name, "must be a string");
        return v->get<std::string>();
    }
    std::optional<double> real(const std::string& name, double lo, double hi) const {
        const Json* v = find(name);
        if (!v) return std::nullopt;
        const double x = v->is_number() ? v->get<double>() : std::nan("");
        if (!(x >= lo && x <= hi)) fail(name, "must be a number from " + number(lo) + " to " + number(hi));
        return x;
    }
    // Whole numbers; 5.0 counts as 5.
    std::optional<std::int64_t> integer(const std::string& name, std::int64_t lo, std::int64_t hi) const {
        const Json* v = find(name);
        if (!v) return std::nullopt;
        const auto range = "must be a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
        if (v->is_number_unsigned()) {
            const auto x = v->get<std::uint64_t>();
            if (x > static_cast<std::uint64_t>(hi) || static_cast<std::int64_t>(x) < lo) fail(name, range);
            return static_cast<std::int64_t>(x);
        }
        if (v->is_number_integer()) {
            const auto x = v->get<std::int64_t>();
            if (x < lo || x > hi) fail(name, range);
            return x;
        }
        if (v->is_number_float()) {
            const double x = v->get<double>();
            if (x == std::floor(x) && x >= static_cast<double>(lo) && x <= static_cast<double>(hi))
                return static_cast<std::int64_t>(x);
        }
        fail(name, range);
    }

private:
    const Json& object_;
    std::string prefix_;
};

CommonRequest parseCommon(const Fields& f, int maxTokensLimit) {
    CommonRequest r;
    const auto model = f.string("model");
    if (!model || model->empty()) throw ApiError(400, "missing model: name the model to use (GET /v1/models lists it)", "model");
    r.model = *model;
    r.stream = f.boolean("stream").value_or(false);
    if (const Json* options = f.find("stream_options")) {
        if (!options->is_object()) f.fail("stream_options", "must be an object");
        r.includeUsage = Fields(*options, "stream_options.").boolean("include_usage").value_or(false);
    }
    // max_completion_tokens is the newer name of max_tokens.
    const auto maxTokens = f.integer("max_tokens", 1, maxTokensLimit);
    const auto maxCompletion = f.integer("max_completion_tokens", 1, maxTokensLimit);
    if (maxCompletion)
        r.maxTokens = static_cast<int>(*maxCompletion);
    else if (maxTokens)
        r.maxTokens = static_cast<int>(*maxTokens);
    if (const auto n = f.integer("n", 1, std::numeric_limits<std::int64_t>::max()); n && *n != 1)
        f.fail("n", "must be 1: one answer per request");

    auto& s = r.sampling;
    s.temperature = f.real("temperature", 0, 2);
    s.topP = f.real("top_p", 0, 1);
    if (s.topP && *s.topP <= 0) f.fail("top_p", "must be above 0 and at most 1");
    // top_k, min_p and repetition_penalty are not OpenAI's but are commonly sent (vLLM, llama.cpp); -1 is
    // vLLM's "no limit".
    if (const auto k = f.integer("top_k", -1, std::numeric_limits<int>::max())) s.topK = *k < 0 ? 0 : static_cast<int>(*k);
    s.minP = f.real("min_p", 0, 1);
    s.presencePenalty = f.real("presence_penalty", -2, 2);
    s.frequencyPenalty = f.real("frequency_penalty", -2, 2);
    s.repetitionPenalty = f.real("repetition_penalty", 0, 10);
    if (s.repetitionPenalty && *s.repetitionPenalty <= 0) f.fail("repetition_penalty", "must be above 0");
    s.seed = f.integer("seed", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());

    if (const Json* stop = f.find("stop")) {
        const auto add = [&](const Json& v) {
            if (!v.is_string()) f.fail("stop", "must be a string or a list of strings");
            if (!v.get<std::string>().empty()) r.stop.push_back(v.get<std::string>());
        };
        if (stop->is_array()) {
            if (stop->size() > 16) f.fail("stop", "may hold at most 16 strings");
            for (const Json& v : *stop) add(v);
        } else {
            add(*stop);
        }
    }
    // Refused rather than ignored: a client asking for these would read a wrong answer as a right one.
    if (const Json* logprobs = f.find("logprobs");
        logprobs && ((logprobs->is_boolean() && logprobs->get<bool>()) || (logprobs->is_number() && logprobs->get<double>() > 0)))
        throw ApiError(400, "logprobs are not supported by this server", f.param("logprobs"), "unsupported_parameter");
    if (const Json* format = f.find("response_format")) {
        if (!format->is_object()) f.fail("response_format", "must be an object");
        const auto type = Fields(*format, "response_format.").string("type").value_or("text");
        if (type != "text")
            throw ApiError(400, "response_format '" + type + "' is not supported by this server (only 'text')",
                           f.param("response_format"), "unsupported_parameter");
    }
    return r;
}

// A message's content as the template takes it: a string, or the text parts of a list joined by newlines.
std::string contentText(const Json* content, const std::string& param) {
    if (!content) return {};
    if (content->is_string()) return content->get<std::string>();
    if (!content->is_array()) throw ApiError(400, param + " must be a string or a list of content parts", param);
    std::string text;
    for (std::size_t j = 0; j < content->size(); ++j) {
        const Json& part = (*content)[j];
        const std::string where = param + "[" + std::to_string(j) + "]";
        if (!part.is_object()) throw ApiError(400, where + " must be an object such as {\"type\": \"text\", \"text\": \"...\"}", where);
        const Fields p(part, where + ".");
        const auto type = p.string("type").value_or("");
        if (type != "text")
            throw ApiError(400, where + ": only text content is supported" + (type.empty() ? std::string() : ", not '" + type + "'"),
                           where, "unsupported_content");
        const auto partText = p.string("text");
        if (!partText) p.fail("text", "is missing");
        if (j > 0) text += '\n';
        text += *partText;
    }
    return text;
}

Json parseMessages(const Fields& f) {
    const Json* messages = f.find("messages");
    if (!messages) throw ApiError(400, "missing messages: give the conversation as a list of {\"role\", \"content\"} objects", "messages");
    if (!messages->is_array()) f.fail("messages", "must be a list of {\"role\", \"content\"} objects");
    if (messages->empty()) f.fail("messages", "must not be empty");
    Json out = Json::array();
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const Json& m = (*messages)[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw ApiError(400, where + " must be an object with a role and a content", where);
        const Fields mf(m, where + ".");
        auto role = mf.string("role");
        if (!role) mf.fail("role", "is missing");
        if (*role == "developer") role = "system";  // OpenAI's newer name for the system message
        if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
            mf.fail("role", "must be system, developer, user, assistant or tool, not '" + *role + "'");
        const Json* content = mf.find("content");
        const Json* toolCalls = mf.find("tool_calls");
        if (!content && !(*role == "assistant" && toolCalls)) mf.fail("content", "is missing");
        Json message{{"role", *role}, {"content", contentText(content, mf.param("content"))}};
        if (const auto name = mf.string("name")) message["name"] = *name;
        if (*role == "assistant") {
            if (toolCalls) {
                if (!toolCalls->is_array()) mf.fail("tool_calls", "must be a list");
                message["tool_calls"] = *toolCalls;
            }
            if (const auto reasoning = mf.string("reasoning_content"); reasoning && !reasoning->empty())
                message["reasoning_content"] = *reasoning;
        }
        if (*role == "tool")
            if (const auto id = mf.string("tool_call_id")) message["tool_call_id"] = *id;
        out.push_back(std::move(message));
    }
    return out;
}

Json parseTools(const Fields& f) {
    const Json* tools = f.find("tools");
    if (!tools) return nullptr;
    if (!tools->is_array()) f.fail("tools", "must be a list of {\"type\": \"function\", \"function\": {...}} objects");
    for (std::size_t i = 0; i < tools->size(); ++i) {
        const Json& t = (*tools)[i];
        const std::string where = "tools[" + std::to_string(i) + "]";
        if (!t.is_object()) throw ApiError(400, where + " must be an object", where);
        const Fields tf(t, where + ".");
        if (tf.string("type").value_or("") != "function") tf.fail("type", "must be 'function'");
        const Json* function = tf.find("function");
        if (!function || !function->is_object()) tf.fail("function", "must be an object with a name");
        const auto name = Fields(*function, where + ".function.").string("name");
        if (!name || name->empty()) tf.fail("function.name", "is missing");
    }
    if (tools->empty()) return nullptr;
    if (const Json* choice = f.find("tool_choice")) {
        if (choice->is_string()) {
            const auto c = choice->get<std::string>();
            if (c == "none") return nullptr;  // the model is not to call tools: it need not see them
            if (c != "auto" && c != "required") f.fail("tool_choice", "must be none, auto, required or an object");
        } else if (!choice->is_object()) {
            f.fail("tool_choice", "must be none, auto, required or an object");
        }
    }
    return *tools;
}

}  // namespace

SamplingOptions SamplingFields::apply(SamplingOptions s) const {
    if (temperature) s.temperature = static_cast<float>(*temperature);
    if (topP) s.topP = static_cast<float>(*topP);
    if (topK) s.topK = *topK;
    if (minP) s.minP = static_cast<float>(*minP);
    if (presencePenalty) s.presencePenalty = static_cast<float>(*presencePenalty);
    if (frequencyPenalty) s.frequencyPenalty = static_cast<float>(*frequencyPenalty);
    if (repetitionPenalty) s.repetitionPenalty = static_cast<float>(*repetitionPenalty);
    if (seed) {
        s.seed = static_cast<std::uint64_t>(*seed);
    } else {
        std::random_device device;
        s.seed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
    }
    return s;
}

ChatRequest parseChatRequest(std::string_view body, int maxTokensLimit) {
    const Json j = parseBody(body);
    const Fields f(j, "");
    ChatRequest r;
    static_cast<CommonRequest&>(r) = parseCommon(f, maxTokensLimit);
    r.messages = parseMessages(f);
    r.tools = parseTools(f);
    if (const Json* kwargs = f.find("chat_template_kwargs")) {
        if (!kwargs->is_object()) f.fail("chat_template_kwargs", "must be an object");
        for (const auto& [name, value] : kwargs->items()) {
            if (name == "messages" || name == "tools" || name == "add_generation_prompt")
                f.fail("chat_template_kwargs." + name, "cannot be set here");
            r.templateVariables[name] = value;
        }
    }
    if (const auto effort = f.string("reasoning_effort")) r.templateVariables["reasoning_effort"] = *effort;
    return r;
}

CompletionRequest parseCompletionRequest(std::string_view body, int maxTokensLimit) {
    const Json j = parseBody(body);
    const Fields f(j, "");
    CompletionRequest r;
    static_cast<CommonRequest&>(r) = parseCommon(f, maxTokensLimit);
    const Json* prompt = f.find("prompt");
    if (!prompt) throw ApiError(400, "missing prompt: give the text to continue", "prompt");
    const auto ids = [&](const Json& list) {
        for (const Json& id : list) {
            const bool valid = id.is_number_unsigned() ? id.get<std::uint64_t>() <= std::numeric_limits<int>::max()
                                                       : id.is_number_integer() && id.get<std::int64_t>() >= 0;
            if (!valid) f.fail("prompt", "must be a string, or a list of token ids");
            r.promptIds.push_back(static_cast<int>(id.get<std::int64_t>()));
        }
        if (r.promptIds.empty()) f.fail("prompt", "must not be empty");
    };
    // A string, a list of one string, token ids, or a list of one list of token ids.
    const Json* one = prompt;
    if (prompt->is_array() && !prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
        if (prompt->size() != 1) f.fail("prompt", "must be one prompt: this server answers one prompt per request");
        one = &(*prompt)[0];
    }
    if (one->is_string())
        r.prompt = one->get<std::string>();
    else if (one->is_array())
        ids(*one);
    else
        f.fail("prompt", "must be a string, or a list of token ids");
    if (f.boolean("echo").value_or(false)) throw ApiError(400, "echo is not supported by this server", "echo", "unsupported_parameter");
    if (const auto suffix = f.string("suffix"); suffix && !suffix->empty())
        throw ApiError(400, "suffix is not supported by this server", "suffix", "unsupported_parameter");
    if (const auto bestOf = f.integer("best_of", 1, std::numeric_limits<std::int64_t>::max()); bestOf && *bestOf != 1)
        f.fail("best_of", "must be 1");
    return r;
}

}  // namespace tandem::server
