#pragma once
// Conversations and messages as the store keeps them and the models show them.
#include <QDateTime>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include "tandem/engine.h"

namespace tandem::ui {

enum class MessageState {
    Complete,
    Streaming,    // being generated; found at start-up, it means the app stopped mid-answer
    Stopped,      // the user stopped it
    Failed,       // the engine reported an error (in ChatMessage::error)
    Interrupted,  // was Streaming when the app last ended
};
QString toString(MessageState state);
MessageState messageStateFromString(const QString& text);

struct AnswerMetrics {
    int promptTokens = 0;
    int generatedTokens = 0;
    double tokensPerSecond = 0;
    double timeToFirstTokenSeconds = 0;
};

// A conversation's messages form a tree: each message follows its parent (none for the first), and
// messages with the same parent are versions of one place in the conversation (an edited question, a
// regenerated answer). The conversation shown is one path through it: from the first message, each
// place's chosen version.
struct ChatMessage {
    qint64 id = 0;
    qint64 conversationId = 0;
    int position = 0;       // the order the conversation's messages were written in
    qint64 parentId = 0;    // the message this one follows; 0 for the first
    int version = 1;        // which of its place's versions this is, from 1 (oldest first)
    int versions = 1;       // how many versions its place has
    QString role;  // "user" or "assistant"
    QString content;
    QString reasoning;
    MessageState state = MessageState::Complete;
    QDateTime createdAt;
    QString model;  // assistant messages: the folder name of the model that wrote it
    AnswerMetrics metrics;
    QString error;
    int omittedMessages = 0;  // answers: earlier messages left out of its prompt to fit the context
};

// Per-conversation choices; sampling falls back to the app's defaults unless overridden.
struct ConversationSettings {
    QString systemPrompt;
    bool overrideSampling = false;
    tandem::SamplingOptions sampling;
    int maxNewTokens = 0;  // 0 = the app's default
    QStringList stopStrings = {};  // an answer ends before the first of these (none by default)

    QJsonObject toJson() const;
    static ConversationSettings fromJson(const QJsonObject& json);
    bool operator==(const ConversationSettings& other) const;
};

struct ConversationSummary {
    qint64 id = 0;
    QString title;
    QDateTime createdAt;
    QDateTime updatedAt;
    QString snippet;  // search results: the matching text as plain text (no Markdown), the match between [ and ]
};

struct Conversation {
    qint64 id = 0;
    QString title;
    QDateTime createdAt;
    QDateTime updatedAt;
    ConversationSettings settings;
};

}  // namespace tandem::ui
