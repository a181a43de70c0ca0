#pragma once
// Stand-in ChatFormatter until the engine's tokenizer and Jinja renderer land: the byte-per-token
// ByteVocabulary and a hand-written version of the three template styles the supported families use
// (ChatML for Qwen3, DeepSeek's <｜User｜>/<｜Assistant｜>, Mistral's [INST]). The style is recognized from
// the chat_template text in tokenizer_config.json.
#include <memory>

#include "ui/text/byte_vocabulary.h"
#include "ui/text/chat_formatter.h"

namespace tandem::ui {

enum class TemplateStyle { ChatML, DeepSeek, Mistral, Plain };

class StandInChatFormatter : public ChatFormatter {
public:
    // Throws tandem::Error when tokenizer.json is missing or unusable.
    static std::unique_ptr<StandInChatFormatter> load(const QString& modelDir, const QString& modelType);

    std::vector<int> encodeConversation(const QList<PromptMessage>& messages) const override;
    std::unique_ptr<AnswerDecoder> newAnswerDecoder() const override;
    QString description() const override;

    // The prompt text before tokenization.
    QString render(const QList<PromptMessage>& messages) const;
    TemplateStyle style() const { return style_; }

private:
    std::shared_ptr<const ByteVocabulary> vocabulary_;
    TemplateStyle style_ = TemplateStyle::Plain;
    QString bos_;
    QString eos_;
    // DeepSeek-R1-style templates end the prompt with "<think>\n": the answer starts inside the reasoning.
    bool promptOpensReasoning_ = false;
};

}  // namespace tandem::ui
