#include "ui/store/conversation_store.h"

#include <QDir>
#include <QFileInfo>
#include <QHash>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QSqlError>
#include <QSqlQuery>
#include <QStringList>

namespace tandem::ui {
namespace {

qint64 nowMs() { return QDateTime::currentMSecsSinceEpoch(); }

// Qt SQL binds a null QString as SQL NULL; the text columns are NOT NULL and hold '' instead.
QString text(const QString& s) { return s.isNull() ? QStringLiteral("") : s; }
QDateTime fromMs(qint64 ms) { return QDateTime::fromMSecsSinceEpoch(ms); }

// What becomes of what could not be saved: ChatController keeps a streaming or finished answer and saves
// it again on every save until one succeeds; a message that could not be stored is not sent, and the
// window leaves it in the message box.
const QString kAnswerKept = QStringLiteral("Until then Tandem keeps the answer and keeps trying to save it.");
const QString kQuestionKept = QStringLiteral("Your message was not sent and is still in the message box: send it again then.");
const QString kAnswerNotStarted = QStringLiteral("Regenerate the answer then.");

// Every word of the user's query as a quoted FTS5 string (so punctuation is never FTS syntax), the
// last one as a prefix so results appear while typing.
QString ftsQuery(const QStringList& words) {
    QStringList terms;
    for (const QString& w : words) terms << QLatin1Char('"') + QString(w).replace(QLatin1Char('"'), QLatin1String("\"\"")) + QLatin1Char('"');
    if (!terms.isEmpty()) terms.last() += QLatin1Char('*');
    return terms.join(QLatin1Char(' '));
}

ChatMessage messageFrom(const QSqlQuery& q) {
    ChatMessage m;
    m.id = q.value(0).toLongLong();
    m.conversationId = q.value(1).toLongLong();
    m.position = q.value(2).toInt();
    m.role = q.value(3).toString();
    m.content = q.value(4).toString();
    m.reasoning = q.value(5).toString();
    m.state = messageStateFromString(q.value(6).toString());
    m.createdAt = fromMs(q.value(7).toLongLong());
    m.model = q.value(8).toString();
    m.metrics.promptTokens = q.value(9).toInt();
    m.metrics.generatedTokens = q.value(10).toInt();
    m.metrics.tokensPerSecond = q.value(11).toDouble();
    m.metrics.timeToFirstTokenSeconds = q.value(12).toDouble();
    m.error = q.value(13).toString();
    return m;
}

}  // namespace

ConversationStore::ConversationStore(std::unique_ptr<Database> database, QObject* parent)
    : QObject(parent), database_(std::move(database)) {}

ConversationStore::~ConversationStore() = default;

// SQLite's result code for a full disk (SQLITE_FULL), which Qt reports as the native error code.
constexpr int kSqliteFull = 13;

QString ConversationStore::failureMessage(const QSqlError& error, const QString& what, const QString& meanwhile) const {
    QString message;
    if (error.nativeErrorCode().toInt() == kSqliteFull) {
        message = isPersistent() ? QStringLiteral("Could not save %1: the disk is full. Free some space on the disk that holds %2.")
                                       .arg(what, QDir::toNativeSeparators(QFileInfo(path()).absolutePath()))
                                 : QStringLiteral("Could not save %1: there is no memory left for it. Close other programs.").arg(what);
    } else {
        message = QStringLiteral("Could not save %1: %2. Check that the disk is not full.").arg(what, error.text());
    }
    return meanwhile.isEmpty() ? message : message + QLatin1Char(' ') + meanwhile;
}

bool ConversationStore::write(QSqlQuery& query, const QString& what, const QString& meanwhile) {
    if (!diskFullForTesting_ && query.exec()) {
        noteWriteSucceeded();
        return true;
    }
    const QSqlError error = diskFullForTesting_ ? QSqlError(QStringLiteral("database or disk is full"), {},
                                                            QSqlError::StatementError, QString::number(kSqliteFull))
                                                : query.lastError();
    const QString message = failureMessage(error, what, meanwhile);
    // A full disk fails every save of a streaming answer, four times a second: say it once.
    if (message != lastFailure_) emit writeFailed(message);
    lastFailure_ = message;
    return false;
}

void ConversationStore::noteWriteSucceeded() {
    if (lastFailure_.isEmpty()) return;
    lastFailure_.clear();
    emit writesResumed();
}

QList<ConversationSummary> ConversationStore::conversations() const {
    QSqlQuery q(database_->connection());
    q.exec(QStringLiteral("SELECT id, title, created_at, updated_at FROM conversations ORDER BY updated_at DESC, id DESC"));
    QList<ConversationSummary> out;
    while (q.next())
        out.append({q.value(0).toLongLong(), q.value(1).toString(), fromMs(q.value(2).toLongLong()),
                    fromMs(q.value(3).toLongLong()), {}});
    return out;
}

std::optional<Conversation> ConversationStore::conversation(qint64 id) const {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("SELECT title, created_at, updated_at, settings FROM conversations WHERE id = ?"));
    q.addBindValue(id);
    if (!q.exec() || !q.next()) return std::nullopt;
    Conversation c;
    c.id = id;
    c.title = q.value(0).toString();
    c.createdAt = fromMs(q.value(1).toLongLong());
    c.updatedAt = fromMs(q.value(2).toLongLong());
    c.settings = ConversationSettings::fromJson(QJsonDocument::fromJson(q.value(3).toByteArray()).object());
    return c;
}

qint64 ConversationStore::createConversation(const QString& title, const ConversationSettings& settings) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("INSERT INTO conversations (title, created_at, updated_at, settings) VALUES (?, ?, ?, ?)"));
    const qint64 now = nowMs();
    q.addBindValue(text(title));
    q.addBindValue(now);
    q.addBindValue(now);
    q.addBindValue(QString::fromUtf8(QJsonDocument(settings.toJson()).toJson(QJsonDocument::Compact)));
    if (!write(q, QStringLiteral("the new conversation"), kQuestionKept)) return 0;
    emit conversationsChanged();
    return q.lastInsertId().toLongLong();
}

bool ConversationStore::renameConversation(qint64 id, const QString& title) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("UPDATE conversations SET title = ? WHERE id = ?"));
    q.addBindValue(text(title));
    q.addBindValue(id);
    if (!write(q, QStringLiteral("the conversation's name"))) return false;
    emit conversationsChanged();
    return true;
}

bool ConversationStore::setConversationSettings(qint64 id, const ConversationSettings& settings) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("UPDATE conversations SET settings = ? WHERE id = ?"));
    q.addBindValue(QString::fromUtf8(QJsonDocument(settings.toJson()).toJson(QJsonDocument::Compact)));
    q.addBindValue(id);
    return write(q, QStringLiteral("the conversation's settings"));
}

bool ConversationStore::deleteConversation(qint64 id) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("DELETE FROM conversations WHERE id = ?"));  // messages go by ON DELETE CASCADE
    q.addBindValue(id);
    if (!write(q, QStringLiteral("the deletion"))) return false;
    emit conversationsChanged();
    return true;
}

bool ConversationStore::touch(qint64 conversationId) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("UPDATE conversations SET updated_at = ? WHERE id = ?"));
    q.addBindValue(nowMs());
    q.addBindValue(conversationId);
    const bool ok = !diskFullForTesting_ && q.exec();
    if (ok) emit conversationsChanged();
    return ok;
}

QList<ChatMessage> ConversationStore::messages(qint64 conversationId) const {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("SELECT id, conversation_id, position, role, content, reasoning, state, created_at, model,"
                             " prompt_tokens, generated_tokens, tokens_per_second, first_token_seconds, error"
                             " FROM messages WHERE conversation_id = ? ORDER BY position"));
    q.addBindValue(conversationId);
    q.exec();
    QList<ChatMessage> out;
    while (q.next()) out.append(messageFrom(q));
    return out;
}

qint64 ConversationStore::appendMessage(ChatMessage& m) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("INSERT INTO messages (conversation_id, position, role, content, reasoning, state,"
                             " created_at, updated_at, model)"
                             " VALUES (?, (SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE conversation_id = ?),"
                             " ?, ?, ?, ?, ?, ?, ?)"));
    const qint64 now = nowMs();
    q.addBindValue(m.conversationId);
    q.addBindValue(m.conversationId);
    q.addBindValue(text(m.role));
    q.addBindValue(text(m.content));
    q.addBindValue(text(m.reasoning));
    q.addBindValue(toString(m.state));
    q.addBindValue(now);
    q.addBindValue(now);
    q.addBindValue(text(m.model));
    const bool question = m.role == QLatin1String("user");
    if (!write(q, question ? QStringLiteral("your message") : QStringLiteral("the answer"),
               question ? kQuestionKept : kAnswerNotStarted))
        return 0;
    m.id = q.lastInsertId().toLongLong();
    m.createdAt = fromMs(now);
    QSqlQuery p(database_->connection());
    p.prepare(QStringLiteral("SELECT position FROM messages WHERE id = ?"));
    p.addBindValue(m.id);
    if (p.exec() && p.next()) m.position = p.value(0).toInt();
    touch(m.conversationId);
    return m.id;
}

bool ConversationStore::updateMessageText(qint64 id, const QString& content, const QString& reasoning) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("UPDATE messages SET content = ?, reasoning = ?, updated_at = ? WHERE id = ?"));
    q.addBindValue(text(content));
    q.addBindValue(text(reasoning));
    q.addBindValue(nowMs());
    q.addBindValue(id);
    return write(q, QStringLiteral("the answer"), kAnswerKept);
}

bool ConversationStore::editMessage(qint64 id, const QString& content) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("UPDATE messages SET content = ?, reasoning = '', updated_at = ? WHERE id = ?"));
    q.addBindValue(text(content));
    q.addBindValue(nowMs());
    q.addBindValue(id);
    return write(q, QStringLiteral("your edited message"));
}

bool ConversationStore::finishMessage(const ChatMessage& m) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("UPDATE messages SET content = ?, reasoning = ?, state = ?, updated_at = ?, model = ?,"
                             " prompt_tokens = ?, generated_tokens = ?, tokens_per_second = ?, first_token_seconds = ?,"
                             " error = ? WHERE id = ?"));
    q.addBindValue(text(m.content));
    q.addBindValue(text(m.reasoning));
    q.addBindValue(toString(m.state));
    q.addBindValue(nowMs());
    q.addBindValue(text(m.model));
    q.addBindValue(m.metrics.promptTokens);
    q.addBindValue(m.metrics.generatedTokens);
    q.addBindValue(m.metrics.tokensPerSecond);
    q.addBindValue(m.metrics.timeToFirstTokenSeconds);
    q.addBindValue(text(m.error));
    q.addBindValue(m.id);
    if (!write(q, QStringLiteral("the answer"), kAnswerKept)) return false;
    touch(m.conversationId);
    return true;
}

bool ConversationStore::deleteMessagesFrom(qint64 conversationId, int position) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("DELETE FROM messages WHERE conversation_id = ? AND position >= ?"));
    q.addBindValue(conversationId);
    q.addBindValue(position);
    return write(q, QStringLiteral("the conversation"));
}

QList<ConversationSummary> ConversationStore::search(const QString& query) const {
    const QStringList words = query.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts);
    if (words.isEmpty()) return conversations();

    // The best-ranked matching message of each conversation gives its snippet. FTS5's ranking and
    // snippet functions only work in a plain query over the index, hence two queries.
    QHash<qint64, QString> snippets;
    QSqlQuery hits(database_->connection());
    hits.prepare(QStringLiteral("SELECT m.conversation_id, snippet(message_search, -1, '[', ']', '…', 12)"
                                " FROM message_search JOIN messages m ON m.id = message_search.rowid"
                                " WHERE message_search MATCH ? ORDER BY rank"));
    hits.addBindValue(ftsQuery(words));
    hits.exec();
    while (hits.next())
        if (!snippets.contains(hits.value(0).toLongLong())) snippets.insert(hits.value(0).toLongLong(), hits.value(1).toString());

    const QString needle = query.simplified();
    QList<ConversationSummary> out;
    for (ConversationSummary c : conversations()) {
        const auto found = snippets.constFind(c.id);
        if (found == snippets.cend() && !c.title.contains(needle, Qt::CaseInsensitive)) continue;
        if (found != snippets.cend()) c.snippet = found.value();
        out.append(c);
    }
    return out;
}

qint64 ConversationStore::lastConversationId() const {
    QSqlQuery q(database_->connection());
    q.exec(QStringLiteral("SELECT value FROM app_state WHERE key = 'last_conversation'"));
    return q.next() ? q.value(0).toLongLong() : 0;
}

void ConversationStore::setLastConversationId(qint64 id) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("INSERT INTO app_state (key, value) VALUES ('last_conversation', ?)"
                             " ON CONFLICT (key) DO UPDATE SET value = excluded.value"));
    q.addBindValue(QString::number(id));
    write(q, QStringLiteral("the open conversation"));
}

int ConversationStore::markInterruptedAnswers() {
    QSqlQuery q(database_->connection());
    q.exec(QStringLiteral("UPDATE messages SET state = 'interrupted' WHERE state = 'streaming'"));
    return q.numRowsAffected();
}

}  // namespace tandem::ui
