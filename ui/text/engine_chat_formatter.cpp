// The app's ChatFormatter: the engine's tandem::Chat, with Qt strings at the edge.
#include <QDir>

#include "tandem/chat.h"
#include "ui/text/chat_formatter.h"

namespace tandem::ui {
namespace {

std::vector<ChatMessage> toChat(const QList<PromptMessage>& messages) {
    std::vector<ChatMessage> out;
    out.reserve(static_cast<std::size_t>(messages.size()));
    for (const auto& m : messages) out.push_back({m.role.toStdString(), m.content.toStdString(), {}});
    return out;
}

class EngineAnswerDecoder : public AnswerDecoder {
public:
    explicit EngineAnswerDecoder(AnswerStream stream) : stream_(std::move(stream)) {}
    TextDelta push(int token) override { return convert(stream_.push(token)); }
    TextDelta finish() override { return convert(stream_.finish()); }

private:
    static TextDelta convert(const std::vector<AnswerStream::Piece>& pieces) {
        TextDelta delta;
        for (const auto& p : pieces)
            (p.kind == TextKind::Reasoning ? delta.reasoning : delta.answer) += QString::fromStdString(p.text);
        return delta;
    }
    AnswerStream stream_;
};

class EngineChatFormatter : public ChatFormatter {
public:
    EngineChatFormatter(const QString& modelDir, const QString& modelType)
        : chat_(QDir(modelDir).filesystemAbsolutePath(), modelType.toStdString()) {}

    std::vector<int> encodeConversation(const QList<PromptMessage>& messages) const override {
        return chat_.promptTokens(toChat(messages), true);
    }
    std::unique_ptr<AnswerDecoder> newAnswerDecoder(const QList<PromptMessage>& messages) const override {
        return std::make_unique<EngineAnswerDecoder>(chat_.answerStream(toChat(messages), true));
    }
    tandem::GenerateOptions answerOptions(tandem::GenerateOptions options) const override {
        return chat_.answerOptions(std::move(options));
    }
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
