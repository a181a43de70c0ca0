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
    m.parentId = q.value(14).toLongLong();
    m.omittedMessages = q.value(16).toInt();
    return m;
}

const QString kMessageColumns = QStringLiteral(
    "id, conversation_id, position, role, content, reasoning, state, created_at, model, prompt_tokens,"
    " generated_tokens, tokens_per_second, first_token_seconds, error, parent_id, active, omitted_messages");

// A parent id as SQL binds it: none is NULL (compared with IS).
QVariant parentValue(qint64 parentId) { return parentId ? QVariant(parentId) : QVariant(); }

// One message of the tree, as the path through it needs it.
struct Node {
    qint64 id = 0;
    qint64 parent = 0;
    bool active = true;
};

struct PathStep {
    int index;     // into the nodes
    int version;   // from 1
    int versions;
};

// The conversation shown: from the first place, the active version of each place (the last written when
// none or several are marked), then the place after it. `nodes` are in writing order.
QList<PathStep> shownPath(const QList<Node>& nodes) {
    QHash<qint64, QList<int>> children;  // parent id (0: the first place) -> versions, oldest first
    for (int i = 0; i < nodes.size(); ++i) children[nodes[i].parent].append(i);
    QList<PathStep> path;
    qint64 parent = 0;
    // Each message is written after its parent, so the path ends; the bound keeps a damaged file from looping.
    while (path.size() < nodes.size()) {
        const auto found = children.constFind(parent);
        if (found == children.cend()) break;
        const QList<int>& versions = *found;
        int chosen = static_cast<int>(versions.size()) - 1;
        for (int v = chosen; v >= 0; --v)
            if (nodes[versions[v]].active) {
                chosen = v;
                break;
            }
        path.append({versions[chosen], chosen + 1, static_cast<int>(versions.size())});
        parent = nodes[versions[chosen]].id;
    }
    return path;
}

// Search snippets are shown as one line of plain text: Markdown's marks go, what they mark stays.
// FTS5 has put `open` and `close` (private-use characters) around the matches.
QString plainSnippet(QString text, QChar open, QChar close) {
    static const QRegularExpression fence(QStringLiteral("^\\s*(```|~~~)[^\\n]*$"), QRegularExpression::MultilineOption);
    static const QRegularExpression lineMarks(
        QStringLiteral("^[ \\t]*(?:#{1,6}[ \\t]+|>[ \\t]?|[-*+][ \\t]+(?:\\[[ xX]\\][ \\t]+)?|\\d+[.)][ \\t]+)+"),
        QRegularExpression::MultilineOption);
    static const QRegularExpression rule(QStringLiteral("^[ \\t]*(?:[-*_][ \\t]*){3,}$|^[ \\t]*\\|?[ \\t]*:?-{3,}:?[ \\t|:-]*$"),
                                         QRegularExpression::MultilineOption);
    static const QRegularExpression image(QStringLiteral("!\\[([^\\]\\n]*)\\]\\([^)\\n]*\\)"));
    static const QRegularExpression link(QStringLiteral("\\[([^\\]\\n]*)\\]\\([^)\\n]*\\)"));
    // Emphasis marks open before a word and close after one, never inside one (snake_case stays); the
    // match marks count as inside a word.
    static const QRegularExpression emphasisOpen(
        QStringLiteral("(?<![\\w*_~\\x{E000}\\x{E001}])(?:\\*{1,3}|_{1,3}|~~)(?=[^\\s*_~])"));
    static const QRegularExpression emphasisClose(
        QStringLiteral("(?<=[^\\s*_~])(?:\\*{1,3}|_{1,3}|~~)(?![\\w*_~\\x{E000}\\x{E001}])"));
    static const QRegularExpression html(QStringLiteral("</?[A-Za-z][^>\\n]*>"));
    text.remove(fence);
    text.remove(rule);
    text.remove(lineMarks);
    text.replace(image, QStringLiteral("\\1"));
    text.replace(link, QStringLiteral("\\1"));
    text.remove(emphasisOpen);
    text.remove(emphasisClose);
    text.remove(QLatin1Char('`'));
    text.remove(html);
    text.replace(QLatin1Char('|'), QLatin1Char(' '));
    text = text.simplified();
    text.replace(open, QLatin1Char('['));
    text.replace(close, QLatin1Char(']'));
    return text;
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
    reportFailure(failureMessage(error, what, meanwhile));
    return false;
}

void ConversationStore::reportFailure(const QString& message) {
    // A full disk fails every save of a streaming answer, four times a second: say it once.
    if (message != lastFailure_) emit writeFailed(message);
    lastFailure_ = message;
}

bool ConversationStore::inTransaction(const QString& what, const QString& meanwhile, const std::function<bool()>& steps) {
    QSqlDatabase c = database_->connection();
    const bool began = c.transaction();
    if (!steps()) {
        if (began) c.rollback();
        return false;
    }
    if (began && !c.commit()) {
        reportFailure(failureMessage(c.lastError(), what, meanwhile));
        c.rollback();
        return false;
    }
    return true;
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

QList<ChatMessage> ConversationStore::allMessages(qint64 conversationId) const {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("SELECT ") + kMessageColumns + QStringLiteral(" FROM messages WHERE conversation_id = ? ORDER BY position"));
    q.addBindValue(conversationId);
    q.exec();
    QList<ChatMessage> out;
    while (q.next()) out.append(messageFrom(q));
    return out;
}

QList<ChatMessage> ConversationStore::messages(qint64 conversationId) const {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("SELECT ") + kMessageColumns + QStringLiteral(" FROM messages WHERE conversation_id = ? ORDER BY position"));
    q.addBindValue(conversationId);
    q.exec();
    QList<ChatMessage> all;
    QList<Node> nodes;
    while (q.next()) {
        all.append(messageFrom(q));
        nodes.append({all.last().id, all.last().parentId, q.value(15).toBool()});
    }
    QList<ChatMessage> out;
    for (const PathStep& step : shownPath(nodes)) {
        ChatMessage m = all[step.index];
        m.version = step.version;
        m.versions = step.versions;
        out.append(m);
    }
    return out;
}

qint64 ConversationStore::lastShownMessage(qint64 conversationId) const {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("SELECT id, parent_id, active FROM messages WHERE conversation_id = ? ORDER BY position"));
    q.addBindValue(conversationId);
    q.exec();
    QList<Node> nodes;
    while (q.next()) nodes.append({q.value(0).toLongLong(), q.value(1).toLongLong(), q.value(2).toBool()});
    const QList<PathStep> path = shownPath(nodes);
    return path.isEmpty() ? 0 : nodes[path.last().index].id;
}

qint64 ConversationStore::appendMessage(ChatMessage& m) { return insertMessage(m, lastShownMessage(m.conversationId)); }

qint64 ConversationStore::appendVersion(ChatMessage& m, qint64 replacedId) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("SELECT parent_id FROM messages WHERE id = ? AND conversation_id = ?"));
    q.addBindValue(replacedId);
    q.addBindValue(m.conversationId);
    if (!q.exec() || !q.next()) return 0;
    return insertMessage(m, q.value(0).toLongLong());
}

qint64 ConversationStore::insertMessage(ChatMessage& m, qint64 parentId) {
    const bool question = m.role == QLatin1String("user");
    const QString what = question ? QStringLiteral("your message") : QStringLiteral("the answer");
    const QString meanwhile = question ? kQuestionKept : kAnswerNotStarted;
    const qint64 now = nowMs();
    qint64 id = 0;
    // The new message is the version shown in its place; any other version there is kept, hidden.
    const bool stored = inTransaction(what, meanwhile, [&] {
        QSqlQuery q(database_->connection());
        q.prepare(QStringLiteral("INSERT INTO messages (conversation_id, position, role, content, reasoning, state,"
                                 " created_at, updated_at, model, parent_id, active, omitted_messages)"
                                 " VALUES (?, (SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE conversation_id = ?),"
                                 " ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)"));
        q.addBindValue(m.conversationId);
        q.addBindValue(m.conversationId);
        q.addBindValue(text(m.role));
        q.addBindValue(text(m.content));
        q.addBindValue(text(m.reasoning));
        q.addBindValue(toString(m.state));
        q.addBindValue(now);
        q.addBindValue(now);
        q.addBindValue(text(m.model));
        q.addBindValue(parentValue(parentId));
        q.addBindValue(m.omittedMessages);
        if (!write(q, what, meanwhile)) return false;
        id = q.lastInsertId().toLongLong();
        QSqlQuery others(database_->connection());
        others.prepare(QStringLiteral("UPDATE messages SET active = 0 WHERE conversation_id = ? AND parent_id IS ? AND id != ?"));
        others.addBindValue(m.conversationId);
        others.addBindValue(parentValue(parentId));
        others.addBindValue(id);
        return write(others, what, meanwhile);
    });
    if (!stored) return 0;
    m.id = id;
    m.parentId = parentId;
    m.createdAt = fromMs(now);
    QSqlQuery p(database_->connection());
    p.prepare(QStringLiteral("SELECT position, (SELECT COUNT(*) FROM messages s WHERE s.conversation_id = m.conversation_id"
                             " AND s.parent_id IS m.parent_id) FROM messages m WHERE id = ?"));
    p.addBindValue(m.id);
    if (p.exec() && p.next()) {
        m.position = p.value(0).toInt();
        m.versions = p.value(1).toInt();
        m.version = m.versions;  // the newest
    }
    touch(m.conversationId);
    return m.id;
}

bool ConversationStore::showVersion(qint64 messageId, int version) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("SELECT s.id, s.conversation_id, s.parent_id FROM messages m JOIN messages s"
                             " ON s.conversation_id = m.conversation_id AND s.parent_id IS m.parent_id"
                             " WHERE m.id = ? ORDER BY s.position"));
    q.addBindValue(messageId);
    if (!q.exec()) return false;
    QList<qint64> versions;
    qint64 conversationId = 0, parentId = 0;
    while (q.next()) {
        versions.append(q.value(0).toLongLong());
        conversationId = q.value(1).toLongLong();
        parentId = q.value(2).toLongLong();
    }
    if (version < 1 || version > versions.size()) return false;
    QSqlQuery u(database_->connection());
    u.prepare(QStringLiteral("UPDATE messages SET active = (id = ?) WHERE conversation_id = ? AND parent_id IS ?"));
    u.addBindValue(versions[version - 1]);
    u.addBindValue(conversationId);
    u.addBindValue(parentValue(parentId));
    return write(u, QStringLiteral("the version shown"));
}

bool ConversationStore::deleteMessage(qint64 id) {
    QSqlQuery q(database_->connection());
    q.prepare(QStringLiteral("SELECT conversation_id, parent_id, active, position FROM messages WHERE id = ?"));
    q.addBindValue(id);
    if (!q.exec()) return false;
    if (!q.next()) return true;  // gone already
    const qint64 conversationId = q.value(0).toLongLong();
    const qint64 parentId = q.value(1).toLongLong();
    const bool active = q.value(2).toBool();
    const int position = q.value(3).toInt();

    // What is shown in its place afterwards: what followed it (as shown), else the version before it,
    // else the one after it.
    qint64 shownChild = 0;
    QSqlQuery c(database_->connection());
    c.prepare(QStringLiteral("SELECT id, active FROM messages WHERE parent_id = ? ORDER BY position"));
    c.addBindValue(id);
    c.exec();
    bool childMarked = false;
    while (c.next()) {
        if (c.value(1).toBool() || !childMarked) shownChild = c.value(0).toLongLong();
        childMarked = childMarked || c.value(1).toBool();
    }
    qint64 otherVersion = 0;
    QSqlQuery s(database_->connection());
    s.prepare(QStringLiteral("SELECT id, position FROM messages WHERE conversation_id = ? AND parent_id IS ? AND id != ?"
                             " ORDER BY position"));
    s.addBindValue(conversationId);
    s.addBindValue(parentValue(parentId));
    s.addBindValue(id);
    s.exec();
    while (s.next())
        if (s.value(1).toInt() < position || otherVersion == 0) otherVersion = s.value(0).toLongLong();
    const qint64 shown = shownChild ? shownChild : otherVersion;

    const QString what = QStringLiteral("the deletion");
    const bool done = inTransaction(what, {}, [&] {
        if (!active) {
            // What followed a hidden version stays hidden.
            QSqlQuery hide(database_->connection());
            hide.prepare(QStringLiteral("UPDATE messages SET active = 0 WHERE parent_id = ?"));
            hide.addBindValue(id);
            if (!write(hide, what)) return false;
        }
        QSqlQuery move(database_->connection());
        move.prepare(QStringLiteral("UPDATE messages SET parent_id = ? WHERE parent_id = ?"));
        move.addBindValue(parentValue(parentId));
        move.addBindValue(id);
        if (!write(move, what)) return false;
        if (active && shown) {
            QSqlQuery show(database_->connection());
            show.prepare(QStringLiteral("UPDATE messages SET active = (id = ?) WHERE conversation_id = ? AND parent_id IS ?"));
            show.addBindValue(shown);
            show.addBindValue(conversationId);
            show.addBindValue(parentValue(parentId));
            if (!write(show, what)) return false;
        }
        QSqlQuery del(database_->connection());
        del.prepare(QStringLiteral("DELETE FROM messages WHERE id = ?"));
        del.addBindValue(id);
        return write(del, what);
    });
    if (done) touch(conversationId);
    return done;
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
                             " error = ?, omitted_messages = ? WHERE id = ?"));
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
    q.addBindValue(m.omittedMessages);
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
    // The matches are marked with private-use characters while the Markdown is taken out, so that the
    // text's own brackets are never taken for them.
    const QChar open(0xE000), close(0xE001);
    QHash<qint64, QString> snippets;
    QSqlQuery hits(database_->connection());
    hits.prepare(QStringLiteral("SELECT m.conversation_id, snippet(message_search, -1, ?, ?, '…', 12)"
                                " FROM message_search JOIN messages m ON m.id = message_search.rowid"
                                " WHERE message_search MATCH ? ORDER BY rank"));
    hits.addBindValue(QString(open));
    hits.addBindValue(QString(close));
    hits.addBindValue(ftsQuery(words));
    hits.exec();
    while (hits.next())
        if (!snippets.contains(hits.value(0).toLongLong()))
            snippets.insert(hits.value(0).toLongLong(), plainSnippet(hits.value(1).toString(), open, close));

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
