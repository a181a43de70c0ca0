// The app's ChatFormatter: the engine's tandem::Chat, with Qt strings at the edge.
#include <QDir>

#include "tandem/chat.h"
#include "ui/text/chat_formatter.h"

namespace tandem::ui {
namespace {

std::vector<ChatMessage> toChat(const QList<PromptMessage>& messages) {
    std::vector<ChatMessage> out;
    out.reserve(static_cast<std::size_t>(messages.size()));
    for (const auto& m : messages)
        out.push_back({m.role.toStdString(), m.content.toStdString(), m.reasoning.toStdString()});
    return out;
}

class EngineChatFormatter : public ChatFormatter {
public:
    EngineChatFormatter(const QString& modelDir, const QString& modelType)
        : chat_(QDir(modelDir).filesystemAbsolutePath(), modelType.toStdString()) {}

    std::vector<int> encodeConversation(const QList<PromptMessage>& messages) const override {
        return chat_.promptTokens(toChat(messages), true);
    }
    ChatAnswer answer(const QList<PromptMessage>& messages, const tandem::GenerateOptions& options,
                      const QStringList& stopStrings, const AnswerGenerator& generate,
                      const std::function<void(const TextDelta&)>& onText) const override {
        ChatOptions chatOptions;
        chatOptions.generate = options;
        for (const QString& stop : stopStrings) chatOptions.stopStrings.push_back(stop.toStdString());
        // Pieces are whole characters (the stream decoder and the stop-string filter cut only between
        // them), so each converts on its own.
        const ChatReply reply = chat_.reply(generate, toChat(messages), chatOptions, [&](TextKind kind, std::string_view text) {
            const QString piece = QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
            onText(kind == TextKind::Reasoning ? TextDelta{{}, piece} : TextDelta{piece, {}});
            return true;
        });
        return {{QString::fromStdString(reply.answer), QString::fromStdString(reply.reasoning)}, reply.stats,
                reply.stoppedByStopString};
    }
    void setCancelFlag(const std::atomic<bool>* cancel) override { chat_.setCancelFlag(cancel); }
    QString description() const override {
        return chat_.templateWarning().empty() ? QStringLiteral("the model's tokenizer and chat template")
                                               : QString::fromStdString(chat_.templateWarning());
    }

private:
    Chat chat_;
};

}  // namespace

std::unique_ptr<ChatFormatter> makeChatFormatter(const QString& modelDir, const QString& modelType) {
    return std::make_unique<EngineChatFormatter>(modelDir, modelType);
}

}  // namespace tandem::ui
