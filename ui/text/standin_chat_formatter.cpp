#include "ui/text/standin_chat_formatter.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include "ui/text/utf8_stream.h"

namespace tandem::ui {
namespace {

// tokenizer_config.json writes special tokens either as a string or as {"content": "..."}.
QString tokenText(const QJsonValue& value) {
    return value.isObject() ? value.toObject().value("content").toString() : value.toString();
}

TemplateStyle styleOf(const QString& chatTemplate, const QString& modelType, const ByteVocabulary& vocabulary) {
    if (chatTemplate.contains(QLatin1String("<|im_start|>"))) return TemplateStyle::ChatML;
    if (chatTemplate.contains(QStringLiteral("<｜User｜>"))) return TemplateStyle::DeepSeek;
    if (chatTemplate.contains(QLatin1String("[INST]"))) return TemplateStyle::Mistral;
    if (modelType.startsWith(QLatin1String("deepseek"))) return TemplateStyle::DeepSeek;
    if (modelType == QLatin1String("mixtral")) return TemplateStyle::Mistral;
    if (vocabulary.addedTokenId(QStringLiteral("<|im_start|>"))) return TemplateStyle::ChatML;
    return TemplateStyle::Plain;
}

class StandInAnswerDecoder : public AnswerDecoder {
public:
    StandInAnswerDecoder(std::shared_ptr<const ByteVocabulary> vocabulary, bool startsInReasoning)
        : vocabulary_(std::move(vocabulary)), inReasoning_(startsInReasoning),
          thinkOpen_(vocabulary_->addedTokenId(QStringLiteral("<think>")).value_or(-1)),
          thinkClose_(vocabulary_->addedTokenId(QStringLiteral("</think>")).value_or(-1)) {}

    TextDelta push(int token) override {
        if (token == thinkOpen_ || token == thinkClose_) {
            TextDelta held = route(utf8_.finish());
            inReasoning_ = token == thinkOpen_;
            return held;
        }
        // Other added tokens (end of turn, padding) are markup, not text.
        if (vocabulary_->isAddedToken(token)) return {};
        return route(utf8_.push(vocabulary_->bytes(token)));
    }

    TextDelta finish() override { return route(utf8_.finish()); }

private:
    // Templates put blank lines after <think> and </think>; they are layout, not content.
    TextDelta route(QString text) {
        TextDelta delta;
        QString& target = inReasoning_ ? delta.reasoning : delta.answer;
        bool& started = inReasoning_ ? reasoningStarted_ : answerStarted_;
        if (!started) {
            qsizetype skip = 0;
            while (skip < text.size() && text[skip].isSpace()) ++skip;
            text.remove(0, skip);
            started = !text.isEmpty();
        }
        target = std::move(text);
        return delta;
    }

    std::shared_ptr<const ByteVocabulary> vocabulary_;
    Utf8Stream utf8_;
    bool inReasoning_;
    bool reasoningStarted_ = false;
    bool answerStarted_ = false;
    int thinkOpen_;
    int thinkClose_;
};

}  // namespace

std::unique_ptr<StandInChatFormatter> StandInChatFormatter::load(const QString& modelDir, const QString& modelType) {
    auto formatter = std::make_unique<StandInChatFormatter>();
    formatter->vocabulary_ =
        std::make_shared<const ByteVocabulary>(ByteVocabulary::load(modelDir + QStringLiteral("/tokenizer.json")));

    // tokenizer_config.json is optional: without it the style comes from the model type.
    QFile configFile(modelDir + QStringLiteral("/tokenizer_config.json"));
    QJsonObject config;
    if (configFile.open(QIODevice::ReadOnly)) config = QJsonDocument::fromJson(configFile.readAll()).object();
    const QString chatTemplate = config.value("chat_template").toString();
    formatter->bos_ = tokenText(config.value("bos_token"));
    formatter->eos_ = tokenText(config.value("eos_token"));
    formatter->style_ = styleOf(chatTemplate, modelType, *formatter->vocabulary_);
    formatter->promptOpensReasoning_ = formatter->style_ == TemplateStyle::DeepSeek &&
                                       chatTemplate.contains(QStringLiteral("<｜Assistant｜><think>\\n"));
    return formatter;
}

QString StandInChatFormatter::render(const QList<PromptMessage>& messages) const {
    QString out;
    QStringList system;
    for (const auto& m : messages)
        if (m.role == QLatin1String("system") && !m.content.isEmpty()) system << m.content;

    switch (style_) {
    case TemplateStyle::ChatML:
        for (const auto& m : messages) {
            if (m.role == QLatin1String("system") && m.content.isEmpty()) continue;
            out += QStringLiteral("<|im_start|>%1\n%2<|im_end|>\n").arg(m.role, m.content);
        }
        out += QStringLiteral("<|im_start|>assistant\n");
        break;
    case TemplateStyle::DeepSeek:
        out += bos_ + system.join(QStringLiteral("\n\n"));
        for (const auto& m : messages) {
            if (m.role == QLatin1String("user")) out += QStringLiteral("<｜User｜>") + m.content;
            if (m.role == QLatin1String("assistant")) out += QStringLiteral("<｜Assistant｜>") + m.content + eos_;
        }
        out += QStringLiteral("<｜Assistant｜>");
        if (promptOpensReasoning_) out += QStringLiteral("<think>\n");
        break;
    case TemplateStyle::Mistral: {
        // Mistral's template has no system role: the system prompt leads the first user turn.
        out += bos_;
        bool firstUser = true;
        for (const auto& m : messages) {
            if (m.role == QLatin1String("user")) {
                const QString prefix = firstUser && !system.isEmpty() ? system.join(QStringLiteral("\n\n")) + "\n\n" : QString();
                out += QStringLiteral("[INST] %1%2 [/INST]").arg(prefix, m.content);
                firstUser = false;
            }
            if (m.role == QLatin1String("assistant")) out += m.content + eos_;
        }
        break;
    }
    case TemplateStyle::Plain:
        for (const auto& m : messages) {
            if (m.content.isEmpty()) continue;
            const QString who = m.role == QLatin1String("user") ? QStringLiteral("User")
                                : m.role == QLatin1String("assistant") ? QStringLiteral("Assistant")
                                                                        : QStringLiteral("System");
            out += QStringLiteral("%1: %2\n\n").arg(who, m.content);
        }
        out += QStringLiteral("Assistant:");
        break;
    }
    return out;
}

std::vector<int> StandInChatFormatter::encodeConversation(const QList<PromptMessage>& messages) const {
    return vocabulary_->encode(render(messages));
}

std::unique_ptr<AnswerDecoder> StandInChatFormatter::newAnswerDecoder() const {
    return std::make_unique<StandInAnswerDecoder>(vocabulary_, promptOpensReasoning_);
}

QString StandInChatFormatter::description() const {
    static const char* const names[] = {"ChatML", "DeepSeek", "Mistral [INST]", "plain text"};
    return QStringLiteral("stand-in byte tokenizer, %1 template").arg(QLatin1String(names[static_cast<int>(style_)]));
}

std::unique_ptr<ChatFormatter> makeChatFormatter(const QString& modelDir, const QString& modelType) {
    return StandInChatFormatter::load(modelDir, modelType);
}

}  // namespace tandem::ui
