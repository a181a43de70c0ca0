#pragma once
// The text side of a chat behind one small interface: a conversation's prompt tokens, and one answer
// run through the chat turn loop (prompt, end-of-turn, detokenizing, reasoning apart, stop strings) with
// the caller's own generator. The engine's tandem::Chat implements it, so the app answers exactly as
// tandem-cli does; tests can substitute their own.
#include <QList>
#include <QString>
#include <atomic>
#include <QStringList>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "tandem/engine.h"

namespace tandem::ui {

struct PromptMessage {
    QString role;  // "system", "user" or "assistant"
    QString content;
    QString reasoning = {};  // an assistant's thinking, for templates that show it again
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

// Runs the model for one answer, as tandem::Session::generate does; onToken returns false to end it.
using AnswerGenerator = std::function<tandem::GenerationStats(
    std::span<const int> prompt, const tandem::GenerateOptions& options, const std::function<bool(int)>& onToken)>;

struct ChatAnswer {
    TextDelta text;  // all of it, as it was streamed
    tandem::GenerationStats stats;
    bool stoppedByStopString = false;
};

class ChatFormatter {
public:
    virtual ~ChatFormatter() = default;
    // The conversation as the model expects it, ending with the opening of the assistant's turn.
    virtual std::vector<int> encodeConversation(const QList<PromptMessage>& messages) const = 0;
    // Answers the conversation's last message through `generate`, which gets its prompt and the options
    // with the chat's end-of-turn token added. Text reaches onText as it is decoded: whole characters,
    // special tokens hidden, never any part of a stop string; the answer ends before the first of
    // `stopStrings`. Exceptions of `generate` pass through.
    virtual ChatAnswer answer(const QList<PromptMessage>& messages, const tandem::GenerateOptions& options,
                              const QStringList& stopStrings, const AnswerGenerator& generate,
                              const std::function<void(const TextDelta&)>& onText) const = 0;
    // One line for the About box and logs, e.g. which template style is in use.
    virtual QString description() const = 0;
    // Once *cancel is true, a prompt being made (the model's chat template) ends with an error soon after.
    virtual void setCancelFlag(const std::atomic<bool>* cancel) = 0;
};

// Reads the model folder's tokenizer.json and chat template (tokenizer_config.json). Throws
// tandem::Error with a message for the user when they are missing or unusable.
std::unique_ptr<ChatFormatter> makeChatFormatter(const QString& modelDir, const QString& modelType);

}  // namespace tandem::ui
