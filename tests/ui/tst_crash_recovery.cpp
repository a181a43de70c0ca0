// kill -9 in the middle of an answer: everything the app had saved while streaming is in the database,
// the conversation is intact, and the next start shows the answer as interrupted.
#include <QProcess>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/controllers/chat_controller.h"
#include "ui/store/conversation_store.h"
#include "ui/widgets/chat_view.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/message_view.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

class CrashRecoveryTest : public QObject {
    Q_OBJECT

private slots:
    void streamingSavesBatchesOftenEnough() {
        // "At most the last second is lost" rests on this interval.
        QVERIFY(ChatController::kSaveIntervalMs <= 1000);
    }

    void killedMidAnswerKeepsWhatWasSaved() {
        QTemporaryDir dir;
        const QString database = dir.filePath("conversations.sqlite");
        const QString settings = dir.filePath("settings.ini");
        {
            // Greedy and long: the answer cannot end on its own before the engine is held.
            QSettings ini(settings, QSettings::IniFormat);
            ini.setValue("sampling/useModelRecommendation", false);
            ini.setValue("sampling/temperature", 0.0);
            ini.setValue("sampling/maxNewTokens", 200);
        }
        QProcess child;
        child.setProcessChannelMode(QProcess::SeparateChannels);
        child.start(QStringLiteral(TANDEM_CRASH_CHILD), {database, settings, test::fixturePath("tiny-qwen3moe")});
        QVERIFY(child.waitForStarted());

        QString saved;
        QByteArray pending;
        const bool gotSave = QTest::qWaitFor([&] {
            pending += child.readAllStandardOutput();
            while (pending.contains('\n')) {
                const QByteArray line = pending.left(pending.indexOf('\n'));
                pending.remove(0, line.size() + 1);
                if (line.startsWith("saved ")) saved = QString::fromUtf8(QByteArray::fromBase64(line.mid(6)));
            }
            return !saved.isEmpty() || child.state() == QProcess::NotRunning;
        }, 120000);
        QVERIFY2(gotSave && !saved.isEmpty(), child.readAllStandardError().constData());

        child.kill();  // SIGKILL: no destructor, no flush, no goodbye
        QVERIFY(child.waitForFinished());
        QCOMPARE(child.exitStatus(), QProcess::CrashExit);
        // Lines printed after the one read above would be later saves; take the last one.
        pending += child.readAllStandardOutput();
        for (const QByteArray& line : pending.split('\n'))
            if (line.startsWith("saved ")) saved = QString::fromUtf8(QByteArray::fromBase64(line.mid(6)));

        {
            auto opened = Database::open(database);
            QVERIFY2(opened.database, qPrintable(opened.problem));
            ConversationStore store(std::move(opened.database));
            const auto conversations = store.conversations();
            QCOMPARE(conversations.size(), 1);
            const auto messages = store.messages(conversations[0].id);
            QCOMPARE(messages.size(), 2);
            QCOMPARE(messages[0].content, QStringLiteral("Tell me a long story about experts."));
            QCOMPARE(toString(messages[1].state), toString(MessageState::Streaming));  // it died mid-answer
            QCOMPARE(messages[1].content, saved);
        }

        // The next start marks the answer interrupted and shows it so.
        auto options = test::appOptions(dir);
        TandemApp app(std::move(options));
        app.start();
        QVERIFY(app.store()->isPersistent());  // the dead child's lock is stale and taken over
        QCOMPARE(app.messages()->rowCount(), 2);
        QCOMPARE(toString(app.messages()->message(1).state), toString(MessageState::Interrupted));
        QCOMPARE(app.messages()->message(1).content, saved);
        app.window()->chatView()->renderPending();
        QVERIFY(app.window()->chatView()->messageView(1)->footerText().startsWith("Interrupted"));
    }
};

QTEST_MAIN(CrashRecoveryTest)
#include "tst_crash_recovery.moc"
