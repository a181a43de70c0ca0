#pragma once
// Conversations and their messages in SQLite. Every call is one short statement or transaction on the
// UI thread; a failed write is reported through writeFailed() with a message for the user (once while the
// same failure repeats, as it does when a full disk fails every save), and writesResumed() says when a
// write succeeds again.
#include <QList>
#include <QObject>
#include <functional>
#include <memory>
#include <optional>

#include "ui/store/chat_types.h"
#include "ui/store/database.h"

class QSqlError;
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

    // The conversation as shown: from its first message, each place's chosen version, in order, each
    // with its version and versions filled in (chat_types.h).
    QList<ChatMessage> messages(qint64 conversationId) const;
    // Every message of the conversation, all versions, in the order they were written.
    QList<ChatMessage> allMessages(qint64 conversationId) const;
    // Appends after the last message shown; fills in id, position, parentId and createdAt. Returns the
    // id, 0 on failure.
    qint64 appendMessage(ChatMessage& message);
    // A new version of message `replacedId` (an edited question, a regenerated answer): in its place and
    // shown instead of it; the old version and what followed it are kept. Fills in what appendMessage does.
    qint64 appendVersion(ChatMessage& message, qint64 replacedId);
    // Shows version `version` (from 1) of the place message `messageId` is in, and the messages that
    // follow that version as they were last shown.
    bool showVersion(qint64 messageId, int version);
    // Deletes one message; the messages that followed it follow its parent instead.
    bool deleteMessage(qint64 id);
    // A streaming answer's text so far.
    bool updateMessageText(qint64 id, const QString& content, const QString& reasoning);
    // The new text of a question the user edited.
    bool editMessage(qint64 id, const QString& content);
    // The final state of an answer.
    bool finishMessage(const ChatMessage& message);
    // Deletes the messages written at `position` of the conversation or later (and what follows them).
    bool deleteMessagesFrom(qint64 conversationId, int position);

    // Conversations whose messages (full text) or title match every word of `query`.
    QList<ConversationSummary> search(const QString& query) const;

    qint64 lastConversationId() const;
    void setLastConversationId(qint64 id);
    // Answers left Streaming by a crash become Interrupted; returns how many.
    int markInterruptedAnswers();

    // For tests: while `full` is true every write fails before it reaches SQLite, with SQLite's error
    // for a full disk.
    void setDiskFullForTesting(bool full) { diskFullForTesting_ = full; }

signals:
    void writeFailed(const QString& message);
    // A write succeeded after one had failed: what could not be saved then can be saved now.
    void writesResumed();
    // Something in the list of conversations changed: one was created, renamed, deleted or touched.
    void conversationsChanged();

private:
    bool touch(qint64 conversationId);
    // The id of the last message shown in the conversation, 0 when it has none.
    qint64 lastShownMessage(qint64 conversationId) const;
    // Inserts `m` after `parentId` (0: first), as the version shown there.
    qint64 insertMessage(ChatMessage& m, qint64 parentId);
    // Runs `steps` (writes through write()) in one transaction; false, with nothing changed, when one
    // fails or the commit does (reported as `what` not being saved).
    bool inTransaction(const QString& what, const QString& meanwhile, const std::function<bool()>& steps);
    void reportFailure(const QString& message);
    // Runs a prepared write. A failure is reported as `what` not being saved, followed by `meanwhile`
    // (what becomes of it), unless the same failure was the last one reported.
    bool write(QSqlQuery& query, const QString& what, const QString& meanwhile = {});
    void noteWriteSucceeded();
    QString failureMessage(const QSqlError& error, const QString& what, const QString& meanwhile) const;

    std::unique_ptr<Database> database_;
    QString lastFailure_;  // the message reported for the last failed write; empty once a write succeeds
    bool diskFullForTesting_ = false;
};

}  // namespace tandem::ui
