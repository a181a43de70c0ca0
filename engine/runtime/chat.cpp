#include "tandem/chat.h"

#include <nlohmann/json.hpp>

#include "runtime/stop_strings.h"
#include "tandem/stream_decoder.h"
#include "tandem/tokenizer.h"
#include "text/chat_template.h"

namespace tandem {

struct Chat::Impl {
    Impl(const Engine& engine, const std::filesystem::path& dir)
        : tokenizer(text::Tokenizer::load(dir)), chatTemplate(text::ChatTemplate::load(dir, engine.info().modelType)) {
        // The template's end-of-turn token also ends a reply, whatever generation_config.json lists.
        if (const auto eos = chatTemplate.specialToken("eos_token"))
            if (const auto id = tokenizer.tokenToId(*eos)) endOfTurn.push_back(*id);
    }

    std::string render(const std::vector<ChatMessage>& conversation, bool enableThinking) const {
        nlohmann::ordered_json messages = nlohmann::ordered_json::array();
        for (const auto& m : conversation) {
            nlohmann::ordered_json message{{"role", m.role}, {"content", m.content}};
            if (!m.reasoning.empty()) message["reasoning_content"] = m.reasoning;
            messages.push_back(std::move(message));
        }
        return chatTemplate.render(messages, true, {{"enable_thinking", enableThinking}});
    }

    text::Tokenizer tokenizer;
    text::ChatTemplate chatTemplate;
    std::vector<int> endOfTurn;
};

Chat::Chat(const Engine& engine, const std::filesystem::path& modelDir) : impl_(std::make_unique<Impl>(engine, modelDir)) {}
Chat::~Chat() = default;
Chat::Chat(Chat&&) noexcept = default;

const std::string& Chat::templateWarning() const { return impl_->chatTemplate.warning(); }

std::vector<int> Chat::promptTokens(const std::vector<ChatMessage>& conversation, bool enableThinking) const {
    // Like transformers' apply_chat_template: the template writes BOS and the like itself.
    return impl_->tokenizer.encode(impl_->render(conversation, enableThinking), false);
}

ChatReply Chat::reply(Session& session, const std::vector<ChatMessage>& conversation, const ChatOptions& options,
                      const std::function<bool(TextKind, std::string_view)>& onText) const {
    const std::string prompt = impl_->render(conversation, options.enableThinking);
    const std::vector<int> tokens = impl_->tokenizer.encode(prompt, false);

    // Templates of reasoning models may open the <think> block in the generation prompt themselves.
    const auto end = prompt.find_last_not_of(" \n");
    const bool opensThinking = std::string_view(prompt).substr(0, end == std::string::npos ? 0 : end + 1).ends_with("<think>");
    text::StreamDecoder stream(impl_->tokenizer, {opensThinking});
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

    GenerateOptions generate = options.generate;
    generate.vocabularyLimit = impl_->tokenizer.vocabSize();
    generate.stopTokenIds.insert(generate.stopTokenIds.end(), impl_->endOfTurn.begin(), impl_->endOfTurn.end());
    reply.stats = session.generate(tokens, generate, [&](int token) {
        deliver(stream.push(token));
        return keepGoing;
    });
    deliver(stream.finish());
    const std::string tail = stops.finish();
    if (!tail.empty()) {
        reply.answer += tail;
        if (keepGoing) onText(TextKind::Answer, tail);
    }
    return reply;
}

}  // namespace tandem
