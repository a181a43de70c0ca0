#include "tandem/chat.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "io/text_file.h"
#include "runtime/stop_strings.h"
#include "tandem/stream_decoder.h"
#include "tandem/tokenizer.h"
#include "text/chat_template.h"

namespace tandem {

struct Chat::Impl {
    Impl(const std::filesystem::path& dir, const std::string& modelType)
        : tokenizer(text::Tokenizer::load(dir)), chatTemplate(text::ChatTemplate::load(dir, modelType)) {
        // The template's end-of-turn token also ends a reply, whatever generation_config.json lists.
        if (const auto eos = chatTemplate.specialToken("eos_token"))
            if (const auto id = tokenizer.tokenToId(*eos)) endOfTurn.push_back(*id);
        // gpt-oss's harmony format ends a turn with <|return|> or <|call|>.
        for (const int id : text::harmonyEndOfTurnTokens(tokenizer))
            if (std::find(endOfTurn.begin(), endOfTurn.end(), id) == endOfTurn.end()) endOfTurn.push_back(id);
    }

    // Templates of reasoning models may open the <think> block in the generation prompt themselves.
    static bool opensThinking(const std::string& prompt) {
        const auto end = prompt.find_last_not_of(" \n");
        return std::string_view(prompt).substr(0, end == std::string::npos ? 0 : end + 1).ends_with("<think>");
    }

    std::string render(const std::vector<ChatMessage>& conversation, bool enableThinking,
                       const std::string& reasoningEffort = {}) const {
        nlohmann::ordered_json messages = nlohmann::ordered_json::array();
        for (const auto& m : conversation) {
            nlohmann::ordered_json message{{"role", m.role}, {"content", m.content}};
            if (!m.reasoning.empty()) message["reasoning_content"] = m.reasoning;
            messages.push_back(std::move(message));
        }
        nlohmann::ordered_json variables{{"enable_thinking", enableThinking}};
        if (!reasoningEffort.empty()) variables["reasoning_effort"] = reasoningEffort;
        return chatTemplate.render(messages, true, variables);
    }

    // The template's end-of-turn token stops an answer, and ids past the tokenizer's vocabulary are
    // never chosen.
    GenerateOptions answerOptions(GenerateOptions options) const {
        options.stopTokenIds.insert(options.stopTokenIds.end(), endOfTurn.begin(), endOfTurn.end());
        options.vocabularyLimit = tokenizer.vocabSize();
        return options;
    }

    text::Tokenizer tokenizer;
    text::ChatTemplate chatTemplate;
    std::vector<int> endOfTurn;
};

Chat::Chat(const std::filesystem::path& modelDir, const std::string& modelType)
    : impl_(std::make_unique<Impl>(modelDir, modelType)) {}
Chat::~Chat() = default;
Chat::Chat(Chat&&) noexcept = default;

const std::string& Chat::templateWarning() const { return impl_->chatTemplate.warning(); }

void Chat::setCancelFlag(const std::atomic<bool>* cancel) { impl_->chatTemplate.setCancelFlag(cancel); }

std::vector<int> Chat::promptTokens(const std::vector<ChatMessage>& conversation, bool enableThinking) const {
    // Like transformers' apply_chat_template: the template writes BOS and the like itself.
    return impl_->tokenizer.encode(impl_->render(conversation, enableThinking), false);
}

ChatReply Chat::reply(Session& session, const std::vector<ChatMessage>& conversation, const ChatOptions& options,
                      const std::function<bool(TextKind, std::string_view)>& onText) const {
    return reply([&session](std::span<const int> prompt, const GenerateOptions& generate,
                            const std::function<bool(int)>& onToken) { return session.generate(prompt, generate, onToken); },
                 conversation, options, onText);
}

ChatReply Chat::reply(const Generator& generate, const std::vector<ChatMessage>& conversation, const ChatOptions& options,
                      const std::function<bool(TextKind, std::string_view)>& onText) const {
    if (!options.reasoningEffort.empty() && options.reasoningEffort != "low" && options.reasoningEffort != "medium" &&
        options.reasoningEffort != "high")
        throw Error("reasoning effort must be low, medium or high, not '" + options.reasoningEffort + "'");
    const std::string prompt = impl_->render(conversation, options.enableThinking, options.reasoningEffort);
    const std::vector<int> tokens = impl_->tokenizer.encode(prompt, false);
    text::StreamDecoder decoder(impl_->tokenizer, {Impl::opensThinking(prompt)});
    runtime::StopStringFilter stops(options.stopStrings);

    ChatReply reply;
    bool keepGoing = true;
    const auto deliver = [&](const std::vector<text::StreamText>& pieces) {
        for (const auto& piece : pieces) {
            if (piece.kind == text::StreamText::Kind::Reasoning) {
                reply.reasoning += piece.text;
                if (keepGoing && !onText(TextKind::Reasoning, piece.text)) keepGoing = false;
                continue;
            }
            const std::string shown = stops.push(piece.text);
            reply.answer += shown;
            if (!shown.empty() && keepGoing && !onText(TextKind::Answer, shown)) keepGoing = false;
            if (stops.stopped()) {
                reply.stoppedByStopString = true;
                keepGoing = false;
            }
        }
    };

    reply.stats = generate(tokens, impl_->answerOptions(options.generate), [&](int token) {
        deliver(decoder.push(token));
        return keepGoing;
    });
    deliver(decoder.finish());
    const std::string tail = stops.finish();
    if (!tail.empty()) {
        reply.answer += tail;
        if (keepGoing) onText(TextKind::Answer, tail);
    }
    return reply;
}

RenderedPrompt renderChatPrompt(const std::filesystem::path& modelDir, const JsonInput& messages,
                                const std::vector<std::pair<std::string, JsonInput>>& variables, bool addGenerationPrompt) {
    using Json = nlohmann::ordered_json;
    const auto chat = text::ChatTemplate::load(modelDir);
    Json extra = Json::object();
    for (const auto& [name, value] : variables) {
        try {
            extra[name] = io::parseJson<Json>(value.text, value.name);
        } catch (const Json::exception&) {
            throw Error(value.name + ": '" + value.text +
                        "' is not JSON (write strings in quotes, e.g. reasoning_effort='\"high\"')");
        }
    }
    Json list;
    try {
        list = io::parseJson<Json>(messages.text, messages.name);
    } catch (const Json::exception& e) {
        throw Error(messages.name + " is not a JSON array of messages: " + std::string(e.what()));
    }
    return {chat.render(list, addGenerationPrompt, extra), chat.isFallback() ? chat.warning() : std::string()};
}

}  // namespace tandem
