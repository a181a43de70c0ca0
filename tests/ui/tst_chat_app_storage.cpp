// The desktop app and its conversation database when the file or the disk misbehaves: a damaged
// database is left untouched, a full disk mid-answer or at send time loses nothing, a second Tandem
// does not write the same file, and a folder that cannot be written is named as such.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "tandem/tokenizer.h"
#include "test_support.h"
#include "ui/store/conversation_store.h"
#include "ui/store/database.h"
#include "ui/widgets/chat_view.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/message_view.h"
#include "ui/widgets/notification_banner.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;
using tandem::test::limitAnswers;
using tandem::test::startApp;
using tandem::test::typeAndSend;

class ChatAppStorageTest : public QObject {
    Q_OBJECT

private slots:
    void aCorruptDatabaseIsReportedAndLeftUntouched() {
        QTemporaryDir dir;
        const QString path = dir.filePath("conversations.sqlite");
        const QByteArray garbage = QByteArray("This is not a database. ").repeated(300);
        QVERIFY(test::writeFile(path, garbage));
        {
            auto app = startApp(dir);
            NotificationBanner* banner = app->window()->banner();
            QVERIFY(banner->isVisible());
            QVERIFY(banner->text().contains(QDir::toNativeSeparators(path)));
            QVERIFY(banner->text().contains("has not changed it"));
            QVERIFY(!app->store()->isPersistent());
            // Chatting still works, in memory.
            QVERIFY(test::waitForModel(*app));
            typeAndSend(*app, "Still here?");
            QVERIFY(test::waitForIdle(*app));
            QCOMPARE(app->messages()->rowCount(), 2);
        }
        QCOMPARE(test::readFile(path), garbage);
        QVERIFY(!QFile::exists(path + "-wal"));
    }

    // Issue 20: the disk fills in the middle of an answer. The answer goes on on screen, the window says
    // the disk is full and what to do, and once there is room the answer is saved whole, in its final
    // state, with nothing saved before it lost.
    void anAnswerIsKeptWhileTheDiskIsFullAndSavedWhenThereIsRoom() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        const auto tokenizer = text::Tokenizer::load(test::fixturePath("tiny-qwen3moe").toStdString());
        const QString expected = QStringLiteral("Experts are small networks; a router picks a few of them for every token.");
        gate->scriptedAnswer = tokenizer.encode(expected.toStdString() + "<|im_end|>", false);
        QVERIFY(gate->scriptedAnswer.size() > 12);
        qint64 id = 0;
        {
            auto app = startApp(dir, test::gatedModelLoader(gate));
            limitAnswers(*app, 256);
            QVERIFY(test::waitForModel(*app));
            typeAndSend(*app, "Hello?");  // saved before the disk fills
            QVERIFY(test::waitForIdle(*app));
            id = app->chat()->currentConversationId();

            gate->holdAtToken = 3;
            typeAndSend(*app, "What is a mixture of experts?");
            QVERIFY(gate->reached.tryAcquire(1, 60000));
            QTRY_VERIFY(!app->store()->messages(id)[3].content.isEmpty());
            const QString savedBefore = app->store()->messages(id)[3].content;

            app->store()->setDiskFullForTesting(true);
            gate->holdAtToken = 10;
            gate->release.release();
            QVERIFY(gate->reached.tryAcquire(1, 60000));
            NotificationBanner* banner = app->window()->banner();
            QTRY_VERIFY(banner->isVisible() && banner->topic() == QLatin1String("store"));
            QVERIFY2(banner->text().startsWith("Could not save the answer: the disk is full. Free some space on the disk "
                                               "that holds " + QDir::toNativeSeparators(dir.path())),
                     qPrintable(banner->text()));
            QVERIFY2(banner->text().contains("keeps the answer"), qPrintable(banner->text()));
            // On screen the answer has grown past what the disk took.
            const QString shown = app->messages()->message(3).content;
            QVERIFY2(shown.startsWith(savedBefore) && shown.size() > savedBefore.size(), qPrintable(shown));
            app->window()->chatView()->renderPending();
            QVERIFY(app->window()->chatView()->messageView(3)->visibleText().contains(shown.trimmed()));
            QCOMPARE(app->store()->messages(id)[3].content, savedBefore);

            // The answer ends while the disk is still full: shown whole and final, not stored yet.
            gate->holdAtToken = 0;
            gate->release.release();
            QVERIFY(test::waitForIdle(*app));
            QCOMPARE(app->messages()->message(3).content, expected);
            QCOMPARE(toString(app->messages()->message(3).state), toString(MessageState::Complete));
            QTest::qWait(3 * ChatController::kSaveIntervalMs);  // saves keep failing, and are not reported again
            QVERIFY(banner->text().startsWith("Could not save the answer: the disk is full."));
            QCOMPARE(toString(app->store()->messages(id)[3].state), toString(MessageState::Streaming));

            // Room again: the next save stores it, and the window takes the problem down.
            app->store()->setDiskFullForTesting(false);
            QTRY_COMPARE(toString(app->store()->messages(id)[3].state), toString(MessageState::Complete));
            QVERIFY(!banner->isVisible());
            QCOMPARE(app->messages()->message(3).content, expected);
        }
        // What is in the file, read afresh.
        auto opened = Database::open(dir.filePath("conversations.sqlite"));
        QVERIFY2(opened.database, qPrintable(opened.problem));
        ConversationStore store(std::move(opened.database));
        const QList<ChatMessage> stored = store.messages(id);
        QCOMPARE(stored.size(), 4);
        QCOMPARE(stored[0].content, QStringLiteral("Hello?"));
        QCOMPARE(stored[1].content, expected);
        QCOMPARE(toString(stored[1].state), toString(MessageState::Complete));
        QCOMPARE(stored[2].content, QStringLiteral("What is a mixture of experts?"));
        QCOMPARE(stored[3].content, expected);
        QCOMPARE(toString(stored[3].state), toString(MessageState::Complete));
        QVERIFY(stored[3].metrics.generatedTokens > 10);
    }

    // The disk never has room again: the answer is still shown in full, the app quits cleanly, and the
    // next start finds the text saved before the disk filled, marked interrupted.
    void anAnswerThatCanNeverBeSavedIsShownAndTheAppStillQuits() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        const auto tokenizer = text::Tokenizer::load(test::fixturePath("tiny-qwen3moe").toStdString());
        const QString expected = QStringLiteral("Experts are small networks; a router picks a few of them for every token.");
        gate->scriptedAnswer = tokenizer.encode(expected.toStdString() + "<|im_end|>", false);
        QString savedBefore;
        {
            auto app = startApp(dir, test::gatedModelLoader(gate));
            limitAnswers(*app, 256);
            QVERIFY(test::waitForModel(*app));
            gate->holdAtToken = 3;
            typeAndSend(*app, "What is a mixture of experts?");
            QVERIFY(gate->reached.tryAcquire(1, 60000));
            const qint64 id = app->chat()->currentConversationId();
            QTRY_VERIFY(!app->store()->messages(id)[1].content.isEmpty());
            savedBefore = app->store()->messages(id)[1].content;
            app->store()->setDiskFullForTesting(true);
            gate->holdAtToken = 0;
            gate->release.release();
            QVERIFY(test::waitForIdle(*app));
            QCOMPARE(app->messages()->message(1).content, expected);
            QCOMPARE(toString(app->messages()->message(1).state), toString(MessageState::Complete));
            QVERIFY(app->window()->banner()->text().startsWith("Could not save the answer: the disk is full."));
            app->window()->close();
        }
        auto app = startApp(dir);
        QCOMPARE(app->messages()->rowCount(), 2);
        QCOMPARE(app->messages()->message(0).content, QStringLiteral("What is a mixture of experts?"));
        QCOMPARE(app->messages()->message(1).content, savedBefore);
        QCOMPARE(toString(app->messages()->message(1).state), toString(MessageState::Interrupted));
    }

    // A question the store cannot take is not sent: the window says why and what to do, the text stays
    // in the message box, and it goes once there is room.
    void aQuestionThatCannotBeSavedStaysInTheMessageBox() {
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        typeAndSend(*app, "First");
        QVERIFY(test::waitForIdle(*app));
        const qint64 id = app->chat()->currentConversationId();

        app->store()->setDiskFullForTesting(true);
        typeAndSend(*app, "Second");
        QVERIFY(!app->chat()->isGenerating());
        QCOMPARE(app->window()->composer()->text(), QStringLiteral("Second"));
        QCOMPARE(app->messages()->rowCount(), 2);
        NotificationBanner* banner = app->window()->banner();
        QVERIFY(banner->isVisible());
        QVERIFY2(banner->text().startsWith("Could not save your message: the disk is full. Free some space"),
                 qPrintable(banner->text()));
        QVERIFY2(banner->text().contains("was not sent and is still in the message box"), qPrintable(banner->text()));

        // In a new chat the conversation itself cannot be created: the same answer.
        QTest::keyClick(app->window(), Qt::Key_N, Qt::ControlModifier);
        app->window()->composer()->clear();
        typeAndSend(*app, "Third");
        QCOMPARE(app->window()->composer()->text(), QStringLiteral("Third"));
        QCOMPARE(app->store()->conversations().size(), 1);
        QVERIFY2(banner->text().startsWith("Could not save the new conversation: the disk is full."), qPrintable(banner->text()));

        app->store()->setDiskFullForTesting(false);
        app->chat()->openConversation(id);
        app->window()->composer()->clear();
        typeAndSend(*app, "Second");
        QVERIFY(test::waitForIdle(*app));
        QVERIFY(app->window()->composer()->text().isEmpty());
        QVERIFY(!banner->isVisible());
        const QList<ChatMessage> stored = app->store()->messages(id);
        QCOMPARE(stored.size(), 4);
        QCOMPARE(stored[2].content, QStringLiteral("Second"));
        QCOMPARE(toString(stored[3].state), toString(MessageState::Complete));
    }

    void aSecondTandemDoesNotWriteTheSameDatabase() {
        QTemporaryDir dir;
        auto first = startApp(dir);
        QVERIFY(first->store()->isPersistent());
        auto second = startApp(dir);
        QVERIFY(!second->store()->isPersistent());
        QVERIFY(second->window()->banner()->text().startsWith("Another Tandem is open"));
        first.reset();
        second.reset();
        auto third = startApp(dir);  // the lock went with the first
        QVERIFY(third->store()->isPersistent());
    }

    void aFolderThatCannotBeWrittenIsNamedAsSuch() {
        // Not "another Tandem is open": the folder cannot hold a file (here its parent is a file, so the
        // system says "Not a directory"; read-only and full disks read the same way).
        QTemporaryDir dir;
        QVERIFY(test::writeFile(dir.filePath("blocker"), "a file, not a folder"));
        TandemAppOptions options = test::appOptions(dir, {});
        options.databasePath = dir.filePath("blocker/conversations.sqlite");
        auto app = std::make_unique<TandemApp>(std::move(options));
        app->start();
        const QString text = app->window()->banner()->text();
        QVERIFY2(text.startsWith("Tandem cannot save conversations in"), qPrintable(text));
        QVERIFY2(text.contains(QDir::toNativeSeparators(dir.filePath("blocker"))), qPrintable(text));
        QVERIFY(!app->store()->isPersistent());
    }

};

QTEST_MAIN(ChatAppStorageTest)
#include "tst_chat_app_storage.moc"
