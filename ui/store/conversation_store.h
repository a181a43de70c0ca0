#pragma once
// Conversations and their messages in SQLite. Every call is one short statement or transaction on the
// UI thread; a failed write is reported through writeFailed() with a message for the user.
#include <QList>
#include <QObject>
#include <memory>
#include <optional>

#include "ui/store/chat_types.h"
#include "ui/store/database.h"

class QSqlQuery;

namespace tandem::ui {

class ConversationStore : public QObject {
    Q_OBJECT
public:
    explicit ConversationStore(std::unique_ptr<Database> database, QObject* parent = nullptr);
    ~ConversationStore() override;

    bool isPersistent() const { return database_->isPersistent(); }
    QString path() const { return database_->path(); }

    // Newest first.
    QList<ConversationSummary> conversations() const;
    std::optional<Conversation> conversation(qint64 id) const;
    qint64 createConversation(const QString& title, const ConversationSettings& settings = {});
    bool renameConversation(qint64 id, const QString& title);
    bool setConversationSettings(qint64 id, const ConversationSettings& settings);
    bool deleteConversation(qint64 id);

    QList<ChatMessage> messages(qint64 conversationId) const;
    // Appends at the end of its conversation; fills in id, position and createdAt. Returns the id, 0 on failure.
    qint64 appendMessage(ChatMessage& message);
    // A streaming answer's text so far.
    bool updateMessageText(qint64 id, const QString& content, const QString& reasoning);
    // The final state of an answer.
    bool finishMessage(const ChatMessage& message);
    // Deletes the message at `position` of the conversation and every later one.
    bool deleteMessagesFrom(qint64 conversationId, int position);

    // Conversations whose messages (full text) or title match every word of `query`.
    QList<ConversationSummary> search(const QString& query) const;

    qint64 lastConversationId() const;
    void setLastConversationId(qint64 id);
    // Answers left Streaming by a crash become Interrupted; returns how many.
    int markInterruptedAnswers();

signals:
    void writeFailed(const QString& message);
    // Something in the list of conversations changed: one was created, renamed, deleted or touched.
    void conversationsChanged();

private:
    bool touch(qint64 conversationId);
    bool reportIfFailed(bool ok, const QString& what, const QSqlQuery& query);

    std::unique_ptr<Database> database_;
};

}  // namespace tandem::ui
