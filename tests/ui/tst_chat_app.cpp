// The whole app on the offscreen platform, driven like a user: the real tiny-qwen3moe model, a real
// SQLite file in a temporary folder, the window's own widgets and shortcuts.
#include <QAbstractButton>
#include <QAbstractItemView>
#include <QAction>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QListView>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTcpServer>
#include <QTest>
#include <QTimer>

#include "flaky_gpu.h"
#include "test_support.h"
#include "tandem/tokenizer.h"
#include "ui/widgets/chat_view.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/context_indicator.h"
#include "ui/widgets/conversation_sidebar.h"
#include "ui/widgets/dashboard.h"
#include "ui/widgets/deferral_panel.h"
#include "ui/widgets/empty_state_page.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/message_view.h"
#include "ui/widgets/notification_banner.h"
#include "ui/wizard/model_wizard.h"
#include "ui/widgets/settings_dialog.h"
#include "ui/widgets/theme.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;
using tandem::test::limitAnswers;
using tandem::test::startApp;
using tandem::test::typeAndSend;

namespace {

// Accepts the next modal dialog once it is up, after `edit` has changed it.
void whenModalOpens(const std::function<void(QWidget*)>& edit) {
    QTimer::singleShot(0, [edit] {
        QTRY_VERIFY(QApplication::activeModalWidget() != nullptr);
        edit(QApplication::activeModalWidget());
    });
}

template <typename T>
T* childNamed(QWidget* parent, const QString& accessibleName) {
    for (T* w : parent->findChildren<T*>())
        if (w->accessibleName() == accessibleName) return w;
    return nullptr;
}

}  // namespace

class ChatAppTest : public QObject {
    Q_OBJECT

private slots:
    void sendingStreamsAnAnswerThatIsSavedAndSurvivesARestart() {
        QTemporaryDir dir;
        qint64 conversation = 0;
        QString answer;
        {
            auto app = startApp(dir);
            QVERIFY(test::waitForModel(*app));
            typeAndSend(*app, "What is a mixture of experts?");
            QVERIFY(app->chat()->isGenerating());
            QVERIFY(app->window()->composer()->text().isEmpty());  // sent: the box is cleared
            QVERIFY(test::waitForIdle(*app));

            MessageModel* messages = app->messages();
            QCOMPARE(messages->rowCount(), 2);
            QCOMPARE(messages->message(0).content, QStringLiteral("What is a mixture of experts?"));
            const ChatMessage& reply = messages->message(1);
            QCOMPARE(reply.role, QStringLiteral("assistant"));
            QCOMPARE(toString(reply.state), toString(MessageState::Complete));
            QVERIFY(reply.metrics.generatedTokens > 0);
            QVERIFY(reply.metrics.timeToFirstTokenSeconds > 0);
            QCOMPARE(reply.model, QStringLiteral("tiny-qwen3moe"));
            answer = reply.content;
            conversation = app->chat()->currentConversationId();

            // What the window shows.
            app->window()->chatView()->renderPending();
            MessageView* view = app->window()->chatView()->messageView(1);
            QVERIFY(view->footerText().contains("tokens/s"));
            QVERIFY(view->footerText().contains("s to first token"));
            QVERIFY(app->window()->isShowingConversation());
            QVERIFY(app->window()->contextIndicator()->text().endsWith("/ 4,096 tokens"));
            QVERIFY(app->chat()->contextUsed() > reply.metrics.generatedTokens);
            QCOMPARE(app->window()->windowTitle(), QStringLiteral("What is a mixture of experts? — Tandem"));

            // In the store already.
            const auto stored = app->store()->messages(conversation);
            QCOMPARE(stored.size(), 2);
            QCOMPARE(stored[1].content, answer);
            QCOMPARE(stored[1].metrics.generatedTokens, reply.metrics.generatedTokens);
        }
        auto app = startApp(dir);
        QCOMPARE(app->conversations()->rowCount(), 1);
        QCOMPARE(app->chat()->currentConversationId(), conversation);  // the last conversation reopens
        QCOMPARE(app->messages()->rowCount(), 2);
        QCOMPARE(app->messages()->message(1).content, answer);
        QVERIFY(app->window()->isShowingConversation());
        // Once the model is there, the engine thread counts the reopened conversation for the indicator.
        QVERIFY(test::waitForModel(*app));
        QTRY_VERIFY_WITH_TIMEOUT(app->chat()->contextUsed() > 0, 60000);
        QVERIFY(app->window()->contextIndicator()->text().endsWith("/ 4,096 tokens"));
    }

    void stopAndRegenerate() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        auto app = startApp(dir, test::gatedModelLoader(gate));
        limitAnswers(*app, 64);
        QVERIFY(test::waitForModel(*app));
        gate->holdAtToken = 3;
        typeAndSend(*app, "Count to ten.");
        QVERIFY(gate->reached.tryAcquire(1, 60000));
        QVERIFY(app->window()->stopAction()->isEnabled());
        QCOMPARE(app->window()->composer()->button()->text(), QStringLiteral("Stop"));
        QTest::keyClick(app->window(), Qt::Key_Escape);  // Esc stops
        gate->release.release();
        QVERIFY(test::waitForIdle(*app));
        const ChatMessage stopped = app->messages()->message(1);
        QCOMPARE(toString(stopped.state), toString(MessageState::Stopped));
        QCOMPARE(stopped.metrics.generatedTokens, 3);
        QCOMPARE(toString(app->store()->messages(app->chat()->currentConversationId())[1].state), toString(MessageState::Stopped));
        app->window()->chatView()->renderPending();
        QVERIFY(app->window()->chatView()->messageView(1)->footerText().startsWith("Stopped"));

        // Regenerate through the answer's own button: the stopped answer is replaced.
        gate->holdAtToken = 0;
        QAbstractButton* regenerate = childNamed<QAbstractButton>(app->window()->chatView()->messageView(1), "Regenerate answer");
        QVERIFY(regenerate && regenerate->isVisible());
        QTest::mouseClick(regenerate, Qt::LeftButton);
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(app->messages()->rowCount(), 2);
        const ChatMessage fresh = app->messages()->message(1);
        QCOMPARE(toString(fresh.state), toString(MessageState::Complete));
        QCOMPARE(app->store()->messages(app->chat()->currentConversationId()).size(), 2);
    }

    void editAndResendReplacesLaterMessages() {
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        typeAndSend(*app, "First question");
        QVERIFY(test::waitForIdle(*app));
        typeAndSend(*app, "Second question");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(app->messages()->rowCount(), 4);
        const qint64 secondQuestion = app->messages()->message(2).id;

        ChatView* chat = app->window()->chatView();
        chat->renderPending();
        MessageView* first = chat->messageView(0);
        QTest::mouseClick(childNamed<QAbstractButton>(first, "Edit message"), Qt::LeftButton);
        auto* editor = childNamed<QPlainTextEdit>(first, "Edited message");
        QVERIFY(editor && editor->isVisible());
        editor->setPlainText("First question, edited");
        QTest::mouseClick(childNamed<QPushButton>(first, "Send edited message"), Qt::LeftButton);
        QVERIFY(test::waitForIdle(*app));

        QCOMPARE(app->messages()->rowCount(), 2);
        QCOMPARE(app->messages()->message(0).content, QStringLiteral("First question, edited"));
        QCOMPARE(toString(app->messages()->message(1).state), toString(MessageState::Complete));
        const auto stored = app->store()->messages(app->chat()->currentConversationId());
        QCOMPARE(stored.size(), 2);
        QCOMPARE(stored[0].content, QStringLiteral("First question, edited"));
        QVERIFY(stored[1].id != secondQuestion);
    }

    // Issue 24, item 5: a regenerated answer and an edited question are new versions; the old ones stay,
    // with what followed them, < n/m > flips between them, and they are there after a restart.
    void editingAndRegeneratingKeepEveryVersion() {
        QTemporaryDir dir;
        qint64 firstAnswer = 0, secondAnswer = 0;
        const auto view = [](TandemApp& app, int row) {
            app.window()->chatView()->renderPending();
            return app.window()->chatView()->messageView(row);
        };
        const auto click = [&](TandemApp& app, int row, const QString& button) {
            auto* b = childNamed<QAbstractButton>(view(app, row), button);
            QVERIFY2(b && b->isVisible() && b->isEnabled(), qPrintable(button));
            QTest::mouseClick(b, Qt::LeftButton);
        };
        {
            auto app = startApp(dir);
            QVERIFY(test::waitForModel(*app));
            typeAndSend(*app, "First question");
            QVERIFY(test::waitForIdle(*app));
            typeAndSend(*app, "Second question");
            QVERIFY(test::waitForIdle(*app));
            QCOMPARE(app->messages()->rowCount(), 4);
            firstAnswer = app->messages()->message(1).id;
            secondAnswer = app->messages()->message(3).id;
            QVERIFY(view(*app, 3)->versionText().isEmpty());

            click(*app, 3, "Regenerate answer");
            QVERIFY(test::waitForIdle(*app));
            QCOMPARE(app->messages()->rowCount(), 4);
            const qint64 regenerated = app->messages()->message(3).id;
            QVERIFY(regenerated != secondAnswer);
            QCOMPARE(toString(app->messages()->message(3).state), toString(MessageState::Complete));
            QCOMPARE(view(*app, 3)->versionText(), QStringLiteral("2/2"));
            click(*app, 3, "Previous version");
            QCOMPARE(app->messages()->message(3).id, secondAnswer);
            QCOMPARE(view(*app, 3)->versionText(), QStringLiteral("1/2"));

            QTest::mouseClick(childNamed<QAbstractButton>(view(*app, 0), "Edit message"), Qt::LeftButton);
            childNamed<QPlainTextEdit>(view(*app, 0), "Edited message")->setPlainText("First question, edited");
            QTest::mouseClick(childNamed<QPushButton>(view(*app, 0), "Send edited message"), Qt::LeftButton);
            QVERIFY(test::waitForIdle(*app));
            QCOMPARE(app->messages()->rowCount(), 2);
            QCOMPARE(app->messages()->message(0).content, QStringLiteral("First question, edited"));
            QCOMPARE(view(*app, 0)->versionText(), QStringLiteral("2/2"));
            QCOMPARE(toString(app->messages()->message(1).state), toString(MessageState::Complete));

            // The first version comes back with all that followed it, as last shown.
            click(*app, 0, "Previous version");
            QCOMPARE(app->messages()->rowCount(), 4);
            QCOMPARE(app->messages()->message(0).content, QStringLiteral("First question"));
            QCOMPARE(app->messages()->message(1).id, firstAnswer);
            QCOMPARE(app->messages()->message(3).id, secondAnswer);
            QCOMPARE(app->store()->allMessages(app->chat()->currentConversationId()).size(), 7);
        }
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(app->messages()->rowCount(), 4);
        QCOMPARE(app->messages()->message(3).id, secondAnswer);
        QCOMPARE(view(*app, 0)->versionText(), QStringLiteral("1/2"));
        QCOMPARE(view(*app, 3)->versionText(), QStringLiteral("1/2"));
        click(*app, 0, "Next version");
        QCOMPARE(app->messages()->rowCount(), 2);
        QCOMPARE(app->messages()->message(0).content, QStringLiteral("First question, edited"));
        // What is sent next follows the version shown.
        typeAndSend(*app, "Third question");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(app->messages()->rowCount(), 4);
        QCOMPARE(app->messages()->message(2).parentId, app->messages()->message(1).id);
    }

    // Issue 24, item 2: a paste longer than the whole context fails on its own, says so, and the chat
    // goes on: the next question is sent with the system prompt, the latest turns and the earlier ones that
    // fit (the first question and its answer: only the paste is left out), its answer says so, the header
    // counts what is sent, and the paste can be deleted.
    void aPasteLongerThanTheContextDoesNotBreakTheChat() {
        QTemporaryDir dir;
        QSettings(dir.filePath("settings.ini"), QSettings::IniFormat).setValue("engine/contextLength", 512);
        auto gate = std::make_shared<test::ModelGate>();
        auto app = startApp(dir, test::gatedModelLoader(gate));
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(app->model()->summary().contextLength, 512);
        QVERIFY(app->settings()->fitConversationToContext());  // on by default
        QVERIFY(app->window()->contextIndicator()->fitToContextAction()->isChecked());
        ConversationSettings brief;
        brief.systemPrompt = "Be brief.";
        app->chat()->setConversationSettings(brief);
        typeAndSend(*app, "What is a mixture of experts?");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(toString(app->messages()->message(1).state), toString(MessageState::Complete));

        const QString paste = QString("All the experts, one by one. ").repeated(150);
        app->window()->composer()->editor()->setPlainText(paste);
        QTest::keyClick(app->window()->composer()->editor(), Qt::Key_Return);
        QVERIFY(test::waitForIdle(*app));
        const ChatMessage failed = app->messages()->message(3);
        QCOMPARE(toString(failed.state), toString(MessageState::Failed));
        QVERIFY2(failed.error.startsWith("Your message takes"), qPrintable(failed.error));
        // The header counts what the conversation takes now, not what it took before the paste.
        QTRY_VERIFY_WITH_TIMEOUT(app->chat()->contextUsed() > 512, 60000);

        typeAndSend(*app, "And what is a router?");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(app->messages()->rowCount(), 6);
        const ChatMessage reply = app->messages()->message(5);
        QCOMPARE(toString(reply.state), toString(MessageState::Complete));
        QCOMPARE(reply.omittedMessages, 1);  // the paste
        const auto tokenizer = text::Tokenizer::load(test::fixturePath("tiny-qwen3moe").toStdString());
        const QString prompt = QString::fromStdString(tokenizer.decode(gate->lastPrompt, false));
        QVERIFY2(prompt.startsWith(QStringLiteral("<|im_start|>system\nBe brief.<|im_end|>\n"
                                                  "<|im_start|>user\nWhat is a mixture of experts?<|im_end|>\n"
                                                  "<|im_start|>assistant\n")),
                 qPrintable(prompt));
        QVERIFY2(prompt.endsWith(QStringLiteral("<|im_start|>user\nAnd what is a router?<|im_end|>\n<|im_start|>assistant\n")),
                 qPrintable(prompt));
        QVERIFY(!prompt.contains("All the experts"));
        app->window()->chatView()->renderPending();
        QVERIFY2(app->window()->chatView()->messageView(5)->contextNoteText().startsWith("1 earlier message was left out"),
                 qPrintable(app->window()->chatView()->messageView(5)->contextNoteText()));
        QVERIFY(app->window()->chatView()->messageView(1)->contextNoteText().isEmpty());
        QCOMPARE(app->store()->messages(app->chat()->currentConversationId())[5].omittedMessages, 1);
        QVERIFY(app->chat()->contextUsed() <= 512);
        QCOMPARE(app->chat()->contextOmitted(), 1);
        QVERIFY2(app->window()->contextIndicator()->text().endsWith("/ 512 tokens · 1 left out"),
                 qPrintable(app->window()->contextIndicator()->text()));

        // With the policy off the header counts the whole conversation, which is what would be sent.
        app->window()->contextIndicator()->fitToContextAction()->trigger();
        QVERIFY(!app->settings()->fitConversationToContext());
        QTRY_VERIFY_WITH_TIMEOUT(app->chat()->contextUsed() > 512, 60000);
        QCOMPARE(app->chat()->contextOmitted(), 0);
        app->window()->contextIndicator()->fitToContextAction()->trigger();
        QVERIFY(app->settings()->fitConversationToContext());

        // Deleting the paste alone: the rest stays, and all of it fits again.
        QAbstractButton* del = childNamed<QAbstractButton>(app->window()->chatView()->messageView(2), "Delete message");
        QVERIFY(del && del->isVisible());
        QTest::mouseClick(del, Qt::LeftButton);
        QCOMPARE(app->messages()->rowCount(), 5);
        QCOMPARE(app->store()->messages(app->chat()->currentConversationId()).size(), 5);
        QCOMPARE(app->messages()->message(2).content, QString());  // the failed answer, now after the first answer
        QTRY_VERIFY_WITH_TIMEOUT(app->chat()->contextOmitted() == 0 && app->chat()->contextUsed() < 512, 60000);
    }

    void searchFindsAMessage() {
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        typeAndSend(*app, "Tell me about zebras");
        QVERIFY(test::waitForIdle(*app));
        const qint64 zebras = app->chat()->currentConversationId();
        QTest::keyClick(app->window(), Qt::Key_N, Qt::ControlModifier);  // Ctrl+N: a new chat
        QCOMPARE(app->chat()->currentConversationId(), qint64(0));
        QCOMPARE(app->messages()->rowCount(), 0);
        typeAndSend(*app, "And about giraffes");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(app->conversations()->rowCount(), 2);

        QTest::keyClick(app->window(), Qt::Key_F, Qt::ControlModifier);  // Ctrl+F: the search field
        QLineEdit* search = app->window()->sidebar()->searchField();
        QVERIFY(search->hasFocus());
        QTest::keyClicks(search, "zebra");
        QCOMPARE(app->conversations()->rowCount(), 1);
        QCOMPARE(app->conversations()->idAt(0), zebras);
        QVERIFY(app->conversations()->index(0).data(ConversationListModel::SnippetRole).toString().contains("[zebras]"));
        // Choosing the result opens it.
        QListView* list = app->window()->sidebar()->listView();
        list->setCurrentIndex(app->conversations()->index(0));
        QCOMPARE(app->chat()->currentConversationId(), zebras);
        search->clear();
        QCOMPARE(app->conversations()->rowCount(), 2);
    }

    void systemPromptAndSamplingArePerConversation() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        auto app = startApp(dir, test::gatedModelLoader(gate));
        QVERIFY(test::waitForModel(*app));
        ConversationSettings pirate;
        pirate.systemPrompt = "Answer like a pirate.";
        pirate.overrideSampling = true;
        pirate.sampling.temperature = 0.0f;
        pirate.sampling.topK = 7;
        pirate.maxNewTokens = 5;
        app->chat()->setConversationSettings(pirate);  // a new chat: kept until its first message
        typeAndSend(*app, "Where is the treasure?");
        QVERIFY(test::waitForIdle(*app));
        const auto tokenizer = text::Tokenizer::load(test::fixturePath("tiny-qwen3moe").toStdString());
        const std::string prompt = tokenizer.decode(gate->lastPrompt, false);
        QCOMPARE(QString::fromStdString(prompt), QStringLiteral("<|im_start|>system\nAnswer like a pirate.<|im_end|>\n"
                                                           "<|im_start|>user\nWhere is the treasure?<|im_end|>\n"
                                                           "<|im_start|>assistant\n"));
        QCOMPARE(gate->lastOptions.maxNewTokens, 5);
        QCOMPARE(gate->lastOptions.sampling.topK, 7);
        QCOMPARE(gate->lastOptions.sampling.temperature, 0.0f);
        const qint64 id = app->chat()->currentConversationId();
        QCOMPARE(app->store()->conversation(id)->settings, pirate);

        // Another conversation uses the defaults: the model's recommendation (temperature 0.6).
        QTest::keyClick(app->window(), Qt::Key_N, Qt::ControlModifier);
        typeAndSend(*app, "Hello");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(gate->lastOptions.sampling.temperature, 0.6f);
        QCOMPARE(gate->lastOptions.maxNewTokens, 16);
        QVERIFY(tokenizer.decode(gate->lastPrompt, false).find("pirate") == std::string::npos);
    }

    // One chat turn for the app and tandem-cli (issue 19): for the same conversation, a system prompt and
    // an earlier answer with reasoning, both send the model the same prompt tokens. tiny-qwen3moe's
    // template leaves earlier reasoning out; a template that shows it again gets it from both.
    void theAppAndTheCliSendTheSamePrompts_data() {
        QTest::addColumn<bool>("showsEarlierReasoning");
        QTest::newRow("tiny-qwen3moe's template") << false;
        QTest::newRow("a template that shows earlier reasoning") << true;
    }

    void theAppAndTheCliSendTheSamePrompts() {
        QFETCH(bool, showsEarlierReasoning);
        QTemporaryDir model;
        QVERIFY(test::copyFixture("tiny-qwen3moe", model.path()));
        if (showsEarlierReasoning) {
            const QString path = model.filePath("tokenizer_config.json");
            QJsonObject config = QJsonDocument::fromJson(test::readFile(path)).object();
            QString chatTemplate = config["chat_template"].toString();
            const QString onlyTheLastTurn = "{%- if loop.index0 > ns.last_query_index %}";
            QVERIFY(chatTemplate.contains(onlyTheLastTurn));
            config["chat_template"] = chatTemplate.replace(onlyTheLastTurn, "{%- if true %}");
            QVERIFY(test::writeFile(path, QJsonDocument(config).toJson()));
        }
        const auto tokenizer = text::Tokenizer::load(model.path().toStdString());
        const std::string reasoning = "Count the experts first.";
        auto gate = std::make_shared<test::ModelGate>();
        gate->scriptedAnswer = tokenizer.encode("<think>\n" + reasoning + "\n</think>\n\nA router picks a few.<|im_end|>", false);
        const QString system = "Be brief.";
        const QStringList questions{"What is a mixture of experts?", "And why is it fast?"};

        // The app: the first question, a restart (the conversation comes back from the store), the second.
        QTemporaryDir dir;
        QSettings(dir.filePath("settings.ini"), QSettings::IniFormat).setValue("engine/modelDir", model.path());
        ChatMessage firstAnswer;
        {
            auto app = startApp(dir, test::gatedModelLoader(gate));
            limitAnswers(*app, 256);
            QVERIFY(test::waitForModel(*app));
            QCOMPARE(app->model()->summary().dir, model.path());
            ConversationSettings settings;
            settings.systemPrompt = system;
            app->chat()->setConversationSettings(settings);
            typeAndSend(*app, questions[0]);
            QVERIFY(test::waitForIdle(*app));
            firstAnswer = app->messages()->message(1);
        }
        QCOMPARE(firstAnswer.reasoning.trimmed(), QString::fromStdString(reasoning));
        {
            auto app = startApp(dir, test::gatedModelLoader(gate));
            limitAnswers(*app, 256);
            QVERIFY(test::waitForModel(*app));
            QCOMPARE(app->messages()->rowCount(), 2);
            QCOMPARE(app->messages()->message(1).reasoning, firstAnswer.reasoning);
            typeAndSend(*app, questions[1]);
            QVERIFY(test::waitForIdle(*app));
            QCOMPARE(app->messages()->rowCount(), 4);
        }

        const test::CliChat cli = test::cliChat(model.path(), "qwen3_moe", system, questions, gate->scriptedAnswer, 256);
        QCOMPARE(cli.answers.first(), firstAnswer.content);
        QCOMPARE(cli.reasonings.first(), firstAnswer.reasoning);
        QCOMPARE(gate->prompts.size(), std::size_t{2});
        QCOMPARE(cli.prompts.size(), std::size_t{2});
        for (std::size_t turn = 0; turn < 2; ++turn)
            QVERIFY2(gate->prompts[turn] == cli.prompts[turn],
                     qPrintable(QString("turn %1\napp: %2\ncli: %3")
                                    .arg(turn + 1)
                                    .arg(QString::fromStdString(tokenizer.decode(gate->prompts[turn], false)))
                                    .arg(QString::fromStdString(tokenizer.decode(cli.prompts[turn], false)))));
        const std::string secondPrompt = tokenizer.decode(cli.prompts[1], false);
        QVERIFY(secondPrompt.starts_with("<|im_start|>system\nBe brief.<|im_end|>"));
        QCOMPARE(secondPrompt.find(reasoning) != std::string::npos, showsEarlierReasoning);
    }

    // A stop string from the conversation's settings ends the answer before it: the stop string is not
    // shown, not saved, and the model is not run past it.
    void aStopStringEndsTheAnswerAndIsNeitherShownNorSaved() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        const auto tokenizer = text::Tokenizer::load(test::fixturePath("tiny-qwen3moe").toStdString());
        gate->scriptedAnswer = tokenizer.encode("The answer is 42. User: and now my own question<|im_end|>", false);
        auto app = startApp(dir, test::gatedModelLoader(gate));
        limitAnswers(*app, 256);
        QVERIFY(test::waitForModel(*app));

        whenModalOpens([](QWidget* dialog) {
            auto* stops = childNamed<QPlainTextEdit>(dialog, "Stop strings");
            QVERIFY(stops && stops->toPlainText().isEmpty());  // none by default
            stops->setPlainText("User:\n\nnever said");        // one per line
            qobject_cast<QDialog*>(dialog)->accept();
        });
        app->window()->openConversationSettings();
        QCOMPARE(app->chat()->currentSettings().stopStrings, (QStringList{"User:", "never said"}));

        QString streamed;
        QList<AnswerStats> completed;
        QObject receiver;  // on this thread, as the app's receivers are
        connect(app->worker(), &EngineWorker::answerTextArrived, &receiver,
                [&](quint64, const QString& answer, const QString&) { streamed += answer; });
        connect(app->chat(), &ChatController::answerCompleted, &receiver, [&](const AnswerStats& s) { completed << s; });
        typeAndSend(*app, "What is the answer?");
        QVERIFY(test::waitForIdle(*app));

        const QString expected = QStringLiteral("The answer is 42. ");
        const ChatMessage reply = app->messages()->message(1);
        QCOMPARE(reply.content, expected);
        QCOMPARE(streamed, expected);
        QCOMPARE(toString(reply.state), toString(MessageState::Complete));
        QCOMPARE(completed.size(), 1);
        QVERIFY(completed.first().stoppedByStopString);
        QVERIFY(!completed.first().stoppedAtEos);
        QVERIFY(reply.metrics.generatedTokens < static_cast<int>(gate->scriptedAnswer.size()) - 1);
        const qint64 id = app->chat()->currentConversationId();
        QCOMPARE(app->store()->messages(id)[1].content, expected);
        QCOMPARE(app->store()->conversation(id)->settings.stopStrings, (QStringList{"User:", "never said"}));
        app->window()->chatView()->renderPending();
        QVERIFY2(!app->window()->chatView()->messageView(1)->visibleText().contains("User:"),
                 qPrintable(app->window()->chatView()->messageView(1)->visibleText()));
    }

    void renameInPlaceWithF2() {
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        typeAndSend(*app, "A title from the first message");
        QVERIFY(test::waitForIdle(*app));
        const qint64 id = app->chat()->currentConversationId();
        QCOMPARE(app->store()->conversation(id)->title, QStringLiteral("A title from the first message"));
        QTest::keyClick(app->window(), Qt::Key_F2);
        QListView* list = app->window()->sidebar()->listView();
        auto* editor = list->viewport()->findChild<QLineEdit*>();
        QVERIFY(editor && editor->isVisible());
        editor->selectAll();
        QTest::keyClicks(editor, "Renamed");
        QTest::keyClick(editor, Qt::Key_Return);
        // The delegate commits through a queued call once the key is handled.
        QTRY_COMPARE(app->store()->conversation(id)->title, QStringLiteral("Renamed"));
        QCOMPARE(app->window()->windowTitle(), QStringLiteral("Renamed — Tandem"));
        QCOMPARE(app->conversations()->index(0).data().toString(), QStringLiteral("Renamed"));
    }

    void exportWritesMarkdownAndJson() {
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        typeAndSend(*app, "Export this");
        QVERIFY(test::waitForIdle(*app));
        const qint64 id = app->chat()->currentConversationId();
        const QString md = dir.filePath("chat.md");
        const QString json = dir.filePath("chat.json");
        QCOMPARE(app->chat()->exportConversation(id, md, ChatController::ExportFormat::Markdown), QString());
        QCOMPARE(app->chat()->exportConversation(id, json, ChatController::ExportFormat::Json), QString());
        const QString markdown = QString::fromUtf8(test::readFile(md));
        QVERIFY(markdown.startsWith("# Export this\n"));
        QVERIFY(markdown.contains("## You\n\nExport this"));
        QVERIFY(markdown.contains("## Assistant (tiny-qwen3moe)"));
        QJsonParseError error;
        const QJsonObject root = QJsonDocument::fromJson(test::readFile(json), &error).object();
        QCOMPARE(error.error, QJsonParseError::NoError);
        QCOMPARE(root["messages"].toArray().size(), 2);
        QCOMPARE(root["messages"].toArray()[1].toObject()["content"].toString(), app->messages()->message(1).content);
    }

    void sliderValueReachesTheEngineAndIsRememberedPerModel() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        {
            auto app = startApp(dir, test::gatedModelLoader(gate));
            QVERIFY(test::waitForModel(*app));
            QSlider* slider = app->window()->dashboard()->deferralPanel()->slider();
            QVERIFY(slider->isEnabled());
            QCOMPARE(slider->maximum(), 3);  // k = 4
            QCOMPARE(gate->engineDeferral.load(), 0);
            slider->setValue(2);
            QTRY_COMPARE_WITH_TIMEOUT(app->model()->deferral(), 2, 60000);
            QCOMPARE(gate->engineDeferral.load(), 2);
        }
        auto app = startApp(dir, test::gatedModelLoader(gate));
        QVERIFY(test::waitForModel(*app));
        QTRY_COMPARE_WITH_TIMEOUT(app->window()->dashboard()->deferralPanel()->slider()->value(), 2, 60000);
        QCOMPARE(gate->engineDeferral.load(), 2);
    }

    void settingsPersistAndEngineChangesReloadOnConfirmation() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        auto app = startApp(dir, test::gatedModelLoader(gate));
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(gate->loads.load(), 1);

        // Ctrl+, opens the dialog; change the theme and the context length, press OK, then confirm the reload.
        whenModalOpens([](QWidget* dialog) {
            childNamed<QSpinBox>(dialog, "Context length")->setValue(2048);
            childNamed<QComboBox>(dialog, "Theme")->setCurrentIndex(static_cast<int>(ThemeChoice::Dark));
            whenModalOpens([](QWidget* question) {
                auto* box = qobject_cast<QMessageBox*>(question);
                QVERIFY(box && box->text().contains("Reload it now?"));
                box->button(QMessageBox::Yes)->click();
            });
            qobject_cast<QDialog*>(dialog)->accept();
        });
        QTest::keyClick(app->window(), Qt::Key_Comma, Qt::ControlModifier);
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(gate->loads.load(), 2);
        QCOMPARE(app->model()->summary().contextLength, 2048);
        QVERIFY(isDarkTheme());
        QVERIFY(QApplication::palette().color(QPalette::Window).lightness() < 128);

        // Saved: a new settings object on the same file reads the same values.
        const AppSettings reread(std::make_unique<QSettings>(dir.filePath("settings.ini"), QSettings::IniFormat));
        QCOMPARE(reread.engine().contextLength, 2048);
        QCOMPARE(reread.appearance().theme, ThemeChoice::Dark);

        // A change that needs no reload does not reload.
        SettingsValues light = SettingsValues::read(*app->settings());
        light.appearance.theme = ThemeChoice::Light;
        QVERIFY(!app->window()->applySettings(light));
        QVERIFY(!isDarkTheme());
        QCOMPARE(gate->loads.load(), 2);

        // The server's GPU sessions on a model that runs on the CPU: nothing to reserve, no reload.
        SettingsValues serving = SettingsValues::read(*app->settings());
        serving.engine.serverGpuBatch = 4;
        serving.server.enabled = true;
        {
            QTcpServer probe;  // a port nothing listens on: the server starts there on the CPU path
            QVERIFY(probe.listen(QHostAddress::LocalHost, 0));
            serving.server.port = probe.serverPort();
        }
        QVERIFY(!app->model()->summary().onGpu);
        QVERIFY(!app->window()->applySettings(serving));
        serving.server.enabled = false;
        QVERIFY(!app->window()->applySettings(serving));
    }

    void interactiveWidgetsHaveAccessibleNames() {
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        typeAndSend(*app, "Name everything");
        QVERIFY(test::waitForIdle(*app));
        app->window()->chatView()->renderPending();
        QStringList unnamed;
        for (QWidget* w : app->window()->findChildren<QWidget*>()) {
            if (!w->isVisible() || w->focusPolicy() == Qt::NoFocus) continue;
            const bool interactive = qobject_cast<QAbstractButton*>(w) || qobject_cast<QLineEdit*>(w) ||
                                     qobject_cast<QPlainTextEdit*>(w) || qobject_cast<QSlider*>(w) ||
                                     qobject_cast<QAbstractItemView*>(w) || qobject_cast<QComboBox*>(w);
            if (!interactive) continue;
            const auto* button = qobject_cast<QAbstractButton*>(w);
            if (w->accessibleName().isEmpty() && !(button && !button->text().isEmpty()))
                unnamed << QString::fromLatin1(w->metaObject()->className()) + " " + w->objectName();
        }
        QVERIFY2(unnamed.isEmpty(), qPrintable(unnamed.join(", ")));
    }

    void deletingAConversationAsksFirst() {
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        typeAndSend(*app, "Delete me");
        QVERIFY(test::waitForIdle(*app));
        const qint64 id = app->chat()->currentConversationId();

        whenModalOpens([](QWidget* box) { qobject_cast<QMessageBox*>(box)->button(QMessageBox::Cancel)->click(); });
        app->window()->confirmDelete(id);
        QVERIFY(app->store()->conversation(id));

        whenModalOpens([](QWidget* box) {
            for (QAbstractButton* b : qobject_cast<QMessageBox*>(box)->buttons())
                if (b->text() == "Delete") b->click();
        });
        app->window()->confirmDelete(id);
        QVERIFY(!app->store()->conversation(id));
        QCOMPARE(app->chat()->currentConversationId(), qint64(0));
        QCOMPARE(app->conversations()->rowCount(), 0);
    }
};

QTEST_MAIN(ChatAppTest)
#include "tst_chat_app.moc"
