#pragma once
// The text side of a chat behind one small interface: turning a conversation into prompt tokens and the
// answer's tokens back into text. The engine's tandem::Chat (the model's tokenizer and Jinja chat
// template, the streaming detokenizer) implements it; tests can substitute their own.
#include <QList>
#include <QString>
#include <memory>
#include <vector>

#include "tandem/engine.h"

namespace tandem::ui {

struct PromptMessage {
    QString role;  // "system", "user" or "assistant"
    QString content;
};

// Text produced by some tokens, split into the model's reasoning (<think>...</think>) and its answer.
struct TextDelta {
    QString answer;
    QString reasoning;

    bool isEmpty() const { return answer.isEmpty() && reasoning.isEmpty(); }
    TextDelta& operator+=(const TextDelta& other) {
        answer += other.answer;
        reasoning += other.reasoning;
        return *this;
    }
};

// Turns the tokens of one answer into text as they arrive. A character split across tokens is held back
// until it is complete.
class AnswerDecoder {
public:
    virtual ~AnswerDecoder() = default;
    virtual TextDelta push(int token) = 0;
    // Whatever is still held back when the answer ends.
    virtual TextDelta finish() = 0;
};

class ChatFormatter {
public:
    virtual ~ChatFormatter() = default;
    // The conversation as the model expects it, ending with the opening of the assistant's turn.
    virtual std::vector<int> encodeConversation(const QList<PromptMessage>& messages) const = 0;
    // A decoder for the answer that follows encodeConversation(messages)'s prompt.
    virtual std::unique_ptr<AnswerDecoder> newAnswerDecoder(const QList<PromptMessage>& messages) const = 0;
    // Generation options for an answer: the chat's end-of-turn token stops it, and so on.
    virtual tandem::GenerateOptions answerOptions(tandem::GenerateOptions options) const = 0;
    // One line for the About box and logs, e.g. which template style is in use.
    virtual QString description() const = 0;
};

// Reads the model folder's tokenizer.json and chat template (tokenizer_config.json). Throws
// tandem::Error with a message for the user when they are missing or unusable.
std::unique_ptr<ChatFormatter> makeChatFormatter(const QString& modelDir, const QString& modelType);

}  // namespace tandem::ui
