// The SQLite store: schema and pragmas, messages, streaming saves, search, deletion, export, and files
// it must refuse (corrupt, damaged, newer schema) without changing a byte.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>

#include "test_support.h"
#include "ui/store/conversation_export.h"
#include "ui/store/conversation_store.h"
#include "ui/store/migrations.h"

using namespace tandem::ui;

namespace {

std::unique_ptr<ConversationStore> openStore(const QString& path) {
    auto opened = Database::open(path);
    if (!opened.database) qWarning("%s", qPrintable(opened.problem));
    return opened.database ? std::make_unique<ConversationStore>(std::move(opened.database)) : nullptr;
}

ChatMessage message(qint64 conversation, const QString& role, const QString& content, const QString& reasoning = {}) {
    ChatMessage m;
    m.conversationId = conversation;
    m.role = role;
    m.content = content;
    m.reasoning = reasoning;
    return m;
}

QStringList contents(const QList<ChatMessage>& messages) {
    QStringList out;
    for (const ChatMessage& m : messages) out << m.content;
    return out;
}

QVariant pragma(const ConversationStore&, const QString& path, const QString& name) {
    // A separate connection sees what is on disk.
    const QString connection = QStringLiteral("probe-") + name;
    QVariant value;
    {
        QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", connection);
        db.setDatabaseName(path);
        db.open();
        QSqlQuery q(db);
        q.exec("PRAGMA " + name);
        if (q.next()) value = q.value(0);
    }
    QSqlDatabase::removeDatabase(connection);
    return value;
}

}  // namespace

class ConversationStoreTest : public QObject {
    Q_OBJECT

private slots:
    void newDatabaseIsMigratedToWalWithForeignKeys() {
        QTemporaryDir dir;
        const QString path = dir.filePath("nested/folder/conversations.sqlite");
        auto store = openStore(path);
        QVERIFY(store);
        QVERIFY(store->isPersistent());
        QCOMPARE(pragma(*store, path, "user_version").toInt(), Database::latestSchemaVersion());
        QCOMPARE(pragma(*store, path, "journal_mode").toString(), QStringLiteral("wal"));
        // Foreign keys are per connection: a message for a conversation that does not exist is refused.
        QSignalSpy failed(store.get(), &ConversationStore::writeFailed);
        ChatMessage orphan = message(12345, "user", "nobody's");
        QCOMPARE(store->appendMessage(orphan), qint64(0));
        QCOMPARE(failed.count(), 1);
        QVERIFY(failed.first().first().toString().contains("FOREIGN KEY"));
        store.reset();
        // Opening again finds the schema current and changes nothing.
        QVERIFY(openStore(path));
        QCOMPARE(pragma(*openStore(path), path, "user_version").toInt(), Database::latestSchemaVersion());
    }

    void messagesAndStreamingSavesSurviveReopening() {
        QTemporaryDir dir;
        const QString path = dir.filePath("c.sqlite");
        qint64 id = 0, answerId = 0;
        {
            auto store = openStore(path);
            id = store->createConversation("First", ConversationSettings{"Be brief.", false, {}, 0});
            ChatMessage q = message(id, "user", "What is MoE?");
            QVERIFY(store->appendMessage(q) > 0);
            QCOMPARE(q.position, 0);
            ChatMessage a = message(id, "assistant", {});
            a.state = MessageState::Streaming;
            answerId = store->appendMessage(a);
            QCOMPARE(a.position, 1);
            QVERIFY(store->updateMessageText(answerId, "Mixture", "think"));
            QVERIFY(store->updateMessageText(answerId, "Mixture of experts", "think more"));
            a.content = "Mixture of experts.";
            a.reasoning = "think more";
            a.state = MessageState::Complete;
            a.metrics = {12, 5, 42.5, 0.25};
            a.model = "tiny";
            QVERIFY(store->finishMessage(a));
            store->setLastConversationId(id);
        }
        auto store = openStore(path);
        QCOMPARE(store->lastConversationId(), id);
        QCOMPARE(store->conversation(id)->settings.systemPrompt, QStringLiteral("Be brief."));
        const auto list = store->messages(id);
        QCOMPARE(list.size(), 2);
        QCOMPARE(list[0].content, QStringLiteral("What is MoE?"));
        QCOMPARE(list[1].id, answerId);
        QCOMPARE(list[1].content, QStringLiteral("Mixture of experts."));
        QCOMPARE(list[1].reasoning, QStringLiteral("think more"));
        QCOMPARE(toString(list[1].state), toString(MessageState::Complete));
        QCOMPARE(list[1].metrics.generatedTokens, 5);
        QCOMPARE(list[1].metrics.tokensPerSecond, 42.5);
        QCOMPARE(list[1].model, QStringLiteral("tiny"));
    }

    // SQLite's own full disk (max_page_count caps the file at its size): the failure is named as a full
    // disk with what to do, reported once while it repeats, and the same save succeeds once there is
    // room. The test seam fails the same way, with the same message.
    void aFullDiskIsNamedReportedOnceAndSavingResumesWithRoom() {
        QTemporaryDir dir;
        const QString path = dir.filePath("c.sqlite");
        auto opened = Database::open(path);
        QVERIFY2(opened.database, qPrintable(opened.problem));
        QSqlDatabase connection = opened.database->connection();
        ConversationStore store(std::move(opened.database));
        const qint64 id = store.createConversation("Full");
        ChatMessage q = message(id, "user", "Tell me everything.");
        QVERIFY(store.appendMessage(q) > 0);
        ChatMessage a = message(id, "assistant", "Once upon a time");
        a.state = MessageState::Streaming;
        const qint64 answerId = store.appendMessage(a);
        QVERIFY(answerId > 0);

        QSignalSpy failed(&store, &ConversationStore::writeFailed);
        QSignalSpy resumed(&store, &ConversationStore::writesResumed);
        QVERIFY(QSqlQuery(connection).exec("PRAGMA max_page_count = 1"));  // the limit cannot go below the size
        const QString everything = QString("All the experts, one by one. ").repeated(4000);  // far more than a page
        QVERIFY(!store.updateMessageText(answerId, everything, {}));
        QVERIFY(!store.updateMessageText(answerId, everything + "And more.", {}));
        a.content = everything;
        a.state = MessageState::Complete;
        QVERIFY(!store.finishMessage(a));
        store.setDiskFullForTesting(true);
        QVERIFY(!store.updateMessageText(answerId, "short", {}));
        store.setDiskFullForTesting(false);
        QCOMPARE(failed.size(), 1);
        const QString report = failed.first().first().toString();
        QVERIFY2(report.startsWith("Could not save the answer: the disk is full. Free some space on the disk that holds " +
                                   QDir::toNativeSeparators(dir.path()) + "."),
                 qPrintable(report));
        QVERIFY2(report.contains("keeps the answer"), qPrintable(report));
        QCOMPARE(resumed.size(), 0);

        QVERIFY(QSqlQuery(connection).exec("PRAGMA max_page_count = 1073741823"));
        QVERIFY(store.finishMessage(a));
        QCOMPARE(resumed.size(), 1);
        QVERIFY(store.renameConversation(id, "Still full?"));
        QCOMPARE(resumed.size(), 1);  // only the first success after a failure
        const auto list = store.messages(id);
        QCOMPARE(list[0].content, QStringLiteral("Tell me everything."));
        QCOMPARE(list[1].content, everything);
        QCOMPARE(toString(list[1].state), toString(MessageState::Complete));
    }

    void listsNewestFirstAndRenames() {
        QTemporaryDir dir;
        auto store = openStore(dir.filePath("c.sqlite"));
        QSignalSpy changed(store.get(), &ConversationStore::conversationsChanged);
        const qint64 a = store->createConversation("A");
        const qint64 b = store->createConversation("B");
        QTest::qWait(2);  // distinct millisecond timestamps
        ChatMessage m = message(a, "user", "touch A");
        store->appendMessage(m);
        QCOMPARE(store->conversations().first().id, a);
        QVERIFY(store->renameConversation(b, "Bee"));
        QCOMPARE(store->conversation(b)->title, QStringLiteral("Bee"));
        QVERIFY(changed.count() >= 4);
    }

    void deletingAConversationDeletesItsMessages() {
        QTemporaryDir dir;
        const QString path = dir.filePath("c.sqlite");
        auto store = openStore(path);
        const qint64 id = store->createConversation("Doomed");
        for (const char* text : {"one", "two", "three"}) {
            ChatMessage m = message(id, "user", text);
            store->appendMessage(m);
        }
        QVERIFY(store->deleteMessagesFrom(id, 1));
        QCOMPARE(store->messages(id).size(), 1);
        QVERIFY(store->deleteConversation(id));
        QVERIFY(!store->conversation(id));
        QCOMPARE(store->messages(id).size(), 0);
        QCOMPARE(store->search("one").size(), 0);  // the search index follows
    }

    void searchFindsWordsInAnyMessage() {
        QTemporaryDir dir;
        auto store = openStore(dir.filePath("c.sqlite"));
        const qint64 cooking = store->createConversation("Dinner");
        const qint64 physics = store->createConversation("Waves");
        ChatMessage m1 = message(cooking, "user", "How long do I roast the pumpkin?");
        ChatMessage m2 = message(physics, "assistant", "Interference happens when two waves overlap.", "recall optics");
        store->appendMessage(m1);
        store->appendMessage(m2);

        auto hits = store->search("pumpkin");
        QCOMPARE(hits.size(), 1);
        QCOMPARE(hits[0].id, cooking);
        QVERIFY2(hits[0].snippet.contains("[pumpkin]"), qPrintable(hits[0].snippet));
        QCOMPARE(store->search("interfer").value(0).id, physics);  // the last word is a prefix
        QCOMPARE(store->search("OPTICS").value(0).id, physics);    // reasoning is searched, case-insensitively
        QCOMPARE(store->search("two waves").size(), 1);
        QCOMPARE(store->search("waves pumpkin").size(), 0);        // every word must match
        QCOMPARE(store->search("Dinn").value(0).id, cooking);      // titles match too
        // FTS syntax in a query is just text.
        QCOMPARE(store->search("\"AND( NEAR* -pumpkin").size(), 0);
        // A streaming update is searchable at once.
        store->updateMessageText(m1.id, "Roast the squash for forty minutes.", {});
        QCOMPARE(store->search("squash").value(0).id, cooking);
        QCOMPARE(store->search("pumpkin").size(), 0);
    }

    void interruptedAnswersAreMarked() {
        QTemporaryDir dir;
        auto store = openStore(dir.filePath("c.sqlite"));
        const qint64 id = store->createConversation("x");
        ChatMessage a = message(id, "assistant", "half");
        a.state = MessageState::Streaming;
        store->appendMessage(a);
        QCOMPARE(store->markInterruptedAnswers(), 1);
        QCOMPARE(toString(store->messages(id)[0].state), toString(MessageState::Interrupted));
    }

    void exportsValidMarkdownAndJson() {
        Conversation c;
        c.title = "Export me";
        c.createdAt = QDateTime::currentDateTime();
        c.settings.systemPrompt = "Answer briefly.";
        ChatMessage q = message(1, "user", "Show code");
        ChatMessage a = message(1, "assistant", "Here:\n\n```python\nprint('hi')\n```\n\nAnd a stopped one:\n```cpp\nint x", "# not a heading\nthink");
        a.metrics = {10, 7, 12.5, 0.3};
        a.model = "tiny";
        const QString md = conversationToMarkdown(c, {q, a});
        QCOMPARE(md.count("```") % 2, 0);  // the unclosed fence was closed

        QTextDocument doc;
        doc.setMarkdown(md);
        QStringList headings;
        for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
            if (b.blockFormat().headingLevel() > 0) headings << b.text();
        // The reasoning's own "# ..." line stays inside its quote.
        QCOMPARE(headings, (QStringList{"Export me", "You", "Assistant (tiny)"}));
        QVERIFY(doc.toPlainText().contains("# not a heading"));
        QVERIFY(doc.toPlainText().contains("print('hi')"));
        QVERIFY(doc.toPlainText().contains("Answer briefly."));

        QJsonParseError error;
        const QJsonObject json = QJsonDocument::fromJson(conversationToJson(c, {q, a}), &error).object();
        QCOMPARE(error.error, QJsonParseError::NoError);
        QCOMPARE(json["format"].toString(), QStringLiteral("tandem-conversation"));
        QCOMPARE(json["title"].toString(), QStringLiteral("Export me"));
        QCOMPARE(json["settings"].toObject()["system_prompt"].toString(), QStringLiteral("Answer briefly."));
        const QJsonArray messages = json["messages"].toArray();
        QCOMPARE(messages.size(), 2);
        QCOMPARE(messages[1]["content"].toString(), a.content);
        QCOMPARE(messages[1]["reasoning"].toString(), a.reasoning);
        QCOMPARE(messages[1]["stats"]["generated_tokens"].toInt(), 7);

        QTemporaryDir dir;
        QCOMPARE(writeExportFile(dir.filePath("out.md"), md.toUtf8()), QString());
        QCOMPARE(tandem::test::readFile(dir.filePath("out.md")), md.toUtf8());
        QVERIFY(writeExportFile(dir.filePath("missing/folder/out.md"), "x").contains("Could not write"));
    }

    void corruptFileIsReportedAndLeftUntouched() {
        QTemporaryDir dir;
        const QString path = dir.filePath("conversations.sqlite");
        QByteArray garbage;
        for (int i = 0; i < 8192; ++i) garbage += static_cast<char>((i * 131) % 251);
        QVERIFY(tandem::test::writeFile(path, garbage));
        const auto opened = Database::open(path);
        QVERIFY(!opened.database);
        QVERIFY2(opened.problem.contains("not an SQLite database"), qPrintable(opened.problem));
        QVERIFY(opened.problem.contains(QDir::toNativeSeparators(path)));
        QCOMPARE(tandem::test::readFile(path), garbage);
        QVERIFY(!QFile::exists(path + "-wal"));
        QVERIFY(!QFile::exists(path + "-journal"));
    }

    void damagedDatabaseIsReportedAndLeftUntouched() {
        QTemporaryDir dir;
        const QString path = dir.filePath("conversations.sqlite");
        {
            auto store = openStore(path);
            const qint64 id = store->createConversation("x");
            for (int i = 0; i < 200; ++i) {
                ChatMessage m = message(id, "user", QString("message number %1 ").arg(i).repeated(20));
                store->appendMessage(m);
            }
        }  // closing checkpoints the WAL into the file
        QVERIFY(!QFile::exists(path + "-wal"));
        QByteArray bytes = tandem::test::readFile(path);
        QVERIFY(bytes.size() > 8 * 4096);
        for (int i = 4096 + 100; i < 4 * 4096; ++i) bytes[i] = static_cast<char>(0xA5);  // pages 2-4
        QVERIFY(tandem::test::writeFile(path, bytes));
        const auto opened = Database::open(path);
        QVERIFY(!opened.database);
        QVERIFY2(opened.problem.contains("damaged") || opened.problem.contains("cannot be read"), qPrintable(opened.problem));
        QCOMPARE(tandem::test::readFile(path), bytes);
    }

    // Issue 24, item 5: a database of the schema before message versions (step 1 of the migrations,
    // which never changes, with rows as that version wrote them) opens with every conversation as it was,
    // and takes versions from then on.
    void todaysDatabaseIsMigratedToMessageVersions() {
        QTemporaryDir dir;
        const QString path = dir.filePath("conversations.sqlite");
        {
            QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "schema-1");
            db.setDatabaseName(path);
            QVERIFY(db.open());
            QSqlQuery q(db);
            for (const QString& statement : migrations().at(0).statements) QVERIFY2(q.exec(statement), qPrintable(statement));
            QVERIFY(q.exec("PRAGMA user_version = 1"));
            QVERIFY(q.exec("INSERT INTO conversations (id, title, created_at, updated_at) VALUES (7, 'Old', 1, 2)"));
            const char* rows[][3] = {{"user", "First question", "complete"},
                                     {"assistant", "First answer", "complete"},
                                     {"user", "Second question", "complete"},
                                     {"assistant", "Half an answer", "streaming"}};
            for (int i = 0; i < 4; ++i)
                QVERIFY(q.exec(QString("INSERT INTO messages (conversation_id, position, role, content, state, created_at,"
                                       " updated_at, model, generated_tokens) VALUES (7, %1, '%2', '%3', '%4', %5, %5, 'tiny', 3)")
                                   .arg(i * 2)  // positions need not be consecutive
                                   .arg(rows[i][0], rows[i][1], rows[i][2])
                                   .arg(1000 + i)));
        }
        QSqlDatabase::removeDatabase("schema-1");

        auto store = openStore(path);
        QVERIFY(store);
        QCOMPARE(pragma(*store, path, "user_version").toInt(), Database::latestSchemaVersion());
        QCOMPARE(Database::latestSchemaVersion(), 2);
        QCOMPARE(store->markInterruptedAnswers(), 1);
        QList<ChatMessage> shown = store->messages(7);
        QCOMPARE(contents(shown), (QStringList{"First question", "First answer", "Second question", "Half an answer"}));
        for (int i = 0; i < shown.size(); ++i) {
            QCOMPARE(shown[i].parentId, i == 0 ? qint64(0) : shown[i - 1].id);
            QCOMPARE(shown[i].version, 1);
            QCOMPARE(shown[i].versions, 1);
            QCOMPARE(shown[i].omittedMessages, 0);
        }
        QCOMPARE(toString(shown[3].state), toString(MessageState::Interrupted));
        QCOMPARE(shown[1].metrics.generatedTokens, 3);
        QCOMPARE(store->search("second").value(0).id, qint64(7));  // the search index still matches the rows

        // New messages follow the conversation; a regenerated answer is a version beside the old one.
        ChatMessage again = message(7, "assistant", "A whole answer");
        QVERIFY(store->appendVersion(again, shown[3].id) > 0);
        QCOMPARE(again.version, 2);
        QCOMPARE(again.versions, 2);
        ChatMessage next = message(7, "user", "Third question");
        QVERIFY(store->appendMessage(next) > 0);
        QCOMPARE(next.parentId, again.id);
        QCOMPARE(next.position, 8);  // after the version, written at 7
        QCOMPARE(contents(store->messages(7)),
                 (QStringList{"First question", "First answer", "Second question", "A whole answer", "Third question"}));
    }

    void versionsKeepWhatFollowedThemAndSurviveReopening() {
        QTemporaryDir dir;
        const QString path = dir.filePath("c.sqlite");
        qint64 id = 0, q1 = 0, q1b = 0, a1 = 0;
        {
            auto store = openStore(path);
            id = store->createConversation("Versions");
            ChatMessage q = message(id, "user", "Q1");
            q1 = store->appendMessage(q);
            ChatMessage a = message(id, "assistant", "A1");
            a1 = store->appendMessage(a);
            ChatMessage a2 = message(id, "assistant", "A1, again");
            QVERIFY(store->appendVersion(a2, a1) > 0);
            ChatMessage follow = message(id, "user", "Q2");
            store->appendMessage(follow);
            QCOMPARE(contents(store->messages(id)), (QStringList{"Q1", "A1, again", "Q2"}));
            QCOMPARE(store->messages(id)[1].version, 2);

            // Editing the first question: a new first place version, nothing after it yet.
            ChatMessage edited = message(id, "user", "Q1, edited");
            q1b = store->appendVersion(edited, q1);
            QVERIFY(q1b > 0);
            QCOMPARE(edited.parentId, qint64(0));
            QCOMPARE(contents(store->messages(id)), (QStringList{"Q1, edited"}));
            QCOMPARE(store->messages(id)[0].version, 2);
            QCOMPARE(store->messages(id)[0].versions, 2);
            ChatMessage answer = message(id, "assistant", "B1");
            store->appendMessage(answer);

            // Back to the first version: what followed it, as it was last shown.
            QVERIFY(store->showVersion(q1b, 1));
            QCOMPARE(contents(store->messages(id)), (QStringList{"Q1", "A1, again", "Q2"}));
            QVERIFY(store->showVersion(store->messages(id)[1].id, 1));
            QCOMPARE(contents(store->messages(id)), (QStringList{"Q1", "A1"}));  // A1 had nothing after it
            QVERIFY(!store->showVersion(q1, 3));
            QCOMPARE(store->allMessages(id).size(), 6);
        }
        auto store = openStore(path);
        QList<ChatMessage> shown = store->messages(id);
        QCOMPARE(contents(shown), (QStringList{"Q1", "A1"}));
        QCOMPARE(shown[0].version, 1);
        QCOMPARE(shown[0].versions, 2);
        QCOMPARE(shown[1].id, a1);
        QCOMPARE(shown[1].versions, 2);
        QVERIFY(store->showVersion(q1, 2));
        QCOMPARE(contents(store->messages(id)), (QStringList{"Q1, edited", "B1"}));
    }

    // Issue 24, item 2: one message goes; what followed it stays, after what preceded it.
    void deletingOneMessageKeepsTheRest() {
        QTemporaryDir dir;
        auto store = openStore(dir.filePath("c.sqlite"));
        const qint64 id = store->createConversation("Delete one");
        QList<qint64> ids;
        for (const char* text : {"Q1", "A1", "A huge paste", "It failed", "Q3", "A3"}) {
            ChatMessage m = message(id, QString(text).startsWith('Q') || QString(text).startsWith("A huge") ? "user" : "assistant", text);
            ids << store->appendMessage(m);
        }
        QVERIFY(store->deleteMessage(ids[2]));
        QCOMPARE(contents(store->messages(id)), (QStringList{"Q1", "A1", "It failed", "Q3", "A3"}));
        QCOMPARE(store->messages(id)[2].parentId, ids[1]);
        QVERIFY(store->deleteMessage(ids[3]));
        QCOMPARE(contents(store->messages(id)), (QStringList{"Q1", "A1", "Q3", "A3"}));
        QCOMPARE(store->search("huge").size(), 0);  // gone from the search index too

        // A version that is shown gives its place to what followed it, else to the version before it.
        ChatMessage again = message(id, "assistant", "A3, again");
        store->appendVersion(again, ids[5]);
        QVERIFY(store->deleteMessage(again.id));
        QCOMPARE(contents(store->messages(id)), (QStringList{"Q1", "A1", "Q3", "A3"}));
        QCOMPARE(store->messages(id)[3].versions, 1);
        QVERIFY(store->deleteMessage(ids[0]));
        QCOMPARE(contents(store->messages(id)), (QStringList{"A1", "Q3", "A3"}));
    }

    // Issue 24, item 10: a snippet is what the message says, not its Markdown.
    void searchSnippetsArePlainText() {
        QTemporaryDir dir;
        auto store = openStore(dir.filePath("c.sqlite"));
        const auto add = [&](const QString& title, const QString& text) {
            const qint64 id = store->createConversation(title);
            ChatMessage m = message(id, "assistant", text);
            store->appendMessage(m);
        };
        add("Dinner", "## Roasting\n\n- Roast the **pumpkin** for `40` minutes.");
        add("Links", "> Read [the squash guide](https://example.com/x) first.");
        add("Code", "Keep snake_case, __bold__ and 2 * 3 in:\n\n```python\nprint(snake)\n```");
        add("Table", "| fruit | colour |\n|---|---|\n| *lime* | green |");
        const auto snippetFor = [&](const QString& query) {
            const auto hits = store->search(query);
            return hits.size() == 1 ? hits[0].snippet : QString("(%1 hits)").arg(hits.size());
        };
        QCOMPARE(snippetFor("pumpkin"), QStringLiteral("Roasting Roast the [pumpkin] for 40 minutes."));
        QCOMPARE(snippetFor("squash"), QStringLiteral("Read the [squash] guide first."));
        QCOMPARE(snippetFor("bold"), QStringLiteral("Keep snake_case, [bold] and 2 * 3 in: print(snake)"));
        QCOMPARE(snippetFor("lime"), QStringLiteral("fruit colour [lime] green"));
    }

    void newerSchemaIsReportedAndLeftUntouched() {
        QTemporaryDir dir;
        const QString path = dir.filePath("conversations.sqlite");
        openStore(path).reset();
        {
            QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", "future");
            db.setDatabaseName(path);
            QVERIFY(db.open());
            QSqlQuery(db).exec("PRAGMA journal_mode = DELETE");
            QVERIFY(QSqlQuery(db).exec(QString("PRAGMA user_version = %1").arg(Database::latestSchemaVersion() + 1)));
        }
        QSqlDatabase::removeDatabase("future");
        const QByteArray before = tandem::test::readFile(path);
        const auto opened = Database::open(path);
        QVERIFY(!opened.database);
        QVERIFY2(opened.problem.contains("newer version of Tandem"), qPrintable(opened.problem));
        QCOMPARE(tandem::test::readFile(path), before);
    }
};

QTEST_GUILESS_MAIN(ConversationStoreTest)
#include "tst_conversation_store.moc"
