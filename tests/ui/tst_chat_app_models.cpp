// The whole app on the offscreen platform, where its model comes from and where it runs: a model that fails
// to load, the one that ships with Tandem, none at all, and a (stand-in) GPU that the dashboard follows and
// that fails in the middle of an answer. tst_chat_app has the chat itself.
#include <QAbstractButton>
#include <QFile>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>

#include "flaky_gpu.h"
#include "test_support.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/conversation_sidebar.h"
#include "ui/widgets/empty_state_page.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/notification_banner.h"
#include "ui/wizard/model_wizard.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;
using tandem::test::startApp;
using tandem::test::typeAndSend;

class ChatAppModelsTest : public QObject {
    Q_OBJECT

private slots:
    void aModelThatFailsToLoadShowsAnErrorAndTheAppStaysUsable() {
        QTemporaryDir dir;
        {
            auto app = startApp(dir);  // a conversation to come back to
            QVERIFY(test::waitForModel(*app));
            typeAndSend(*app, "Remember me");
            QVERIFY(test::waitForIdle(*app));
        }
        QTemporaryDir broken;
        QVERIFY(test::copyFixture("tiny-qwen3moe", broken.path()));
        QVERIFY(QFile::remove(broken.filePath("model-00002-of-00002.safetensors")));
        {
            QSettings ini(dir.filePath("settings.ini"), QSettings::IniFormat);
            ini.setValue("engine/modelDir", broken.path());
        }
        // Nothing shipped to fall back to (tst_model_fallback has that), and no wizard over the window.
        auto options = test::appOptions(dir);
        options.embeddedModelDir = QString();
        options.offerModelWizard = false;
        auto app = std::make_unique<TandemApp>(std::move(options));
        test::limitAnswers(*app);
        app->start();
        app->window()->show();
        QVERIFY(!test::waitForModel(*app));
        NotificationBanner* banner = app->window()->banner();
        QVERIFY(banner->isVisible());
        QVERIFY2(banner->text().startsWith("Could not load the model in " + broken.path()), qPrintable(banner->text()));
        QVERIFY(!app->window()->composer()->button()->isEnabled());
        QVERIFY(!app->chat()->send("anyone?"));
        QVERIFY(banner->text().contains("No model is loaded"));

        // The conversations are still there to read and search.
        QCOMPARE(app->messages()->rowCount(), 2);
        QCOMPARE(app->messages()->message(0).content, QStringLiteral("Remember me"));
        QTest::keyClick(app->window(), Qt::Key_N, Qt::ControlModifier);
        QCOMPARE(app->window()->emptyState()->mode(), EmptyStatePage::Mode::LoadFailed);
        app->window()->sidebar()->searchField()->setText("Remember");
        QCOMPARE(app->conversations()->rowCount(), 1);

        // Choosing a good model folder recovers.
        app->model()->loadModelFolder(test::fixturePath("tiny-qwen3moe"));
        QVERIFY(test::waitForModel(*app));
        // The error is gone; what may stand there instead is the note on the shipped (demo) model.
        QVERIFY(!banner->isVisible() || banner->topic() == QLatin1String("demo-model"));
        typeAndSend(*app, "Back again");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(toString(app->messages()->message(1).state), toString(MessageState::Complete));
    }

    // With no GPU chosen in particular (Settings' default), the engine runs on the GPU it picks (the one with
    // the most memory); the dashboard follows that one, not GPU 0. A GPU chosen by number is followed as chosen.
    void theDashboardFollowsTheGpuTheModelRunsOn() {
        QTemporaryDir dir;
        test::FlakyGpu gpu(1 << 30);
        gpu.device = 1;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->summary().onGpu);
        QCOMPARE(app->model()->summary().gpuDevice, 1);
        QCOMPARE(app->monitor()->gpuDevice(), 1);
        EngineSettings chosen = app->settings()->engine();
        chosen.gpuDevice = 2;
        QCOMPARE(monitoredGpuDevice(chosen, &app->model()->summary()), 2);
        chosen.gpuDevice = kEveryGpuDevice;
        QCOMPARE(monitoredGpuDevice(chosen, &app->model()->summary()), kEveryGpuDevice);
        chosen.gpuDevice = kFirstGpuDevice;  // GPU 0 in particular
        QCOMPARE(monitoredGpuDevice(chosen, &app->model()->summary()), 0);
        chosen.gpuDevice = 0;
        QCOMPARE(monitoredGpuDevice(chosen, nullptr), 0);  // no model loaded: as chosen
        // (A model that stops being used goes back to Settings' GPU: tst_chat_app_verify.)
    }

    // The GPU fails in the middle of an answer: the answer completes (on the CPU), is saved, and the
    // window says what happened and what to do.
    void aGpuFailureMidAnswerIsExplainedAndNothingIsLost() {
        QTemporaryDir dir;
        const test::FlakyGpu gpu(4);
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        typeAndSend(*app, "What is a mixture of experts?");
        QVERIFY(test::waitForIdle(*app));
        const ChatMessage& reply = app->messages()->message(1);
        QCOMPARE(toString(reply.state), toString(MessageState::Complete));
        QVERIFY(reply.metrics.generatedTokens > 3);
        QCOMPARE(app->store()->messages(app->chat()->currentConversationId())[1].content, reply.content);
        NotificationBanner* banner = app->window()->banner();
        QVERIFY(banner->isVisible());
        QVERIFY2(banner->text().startsWith("The GPU failed (CUDA error: an illegal memory access"), qPrintable(banner->text()));
        QVERIFY2(banner->text().contains("nothing was lost"), qPrintable(banner->text()));
    }

    // The model that ships with Tandem is a demo: the window says what it is and offers the wizard, and
    // the note goes once the user loads a model of their own.
    void theShippedModelSaysWhatItIs() {
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->isEmbeddedModelReady());
        NotificationBanner* banner = app->window()->banner();
        QVERIFY(banner->isVisible());
        QCOMPARE(banner->kind(), NotificationBanner::Kind::Information);
        QVERIFY2(banner->text().contains("demo model that ships with Tandem"), qPrintable(banner->text()));
        emit banner->actionTriggered();
        QVERIFY(QTest::qWaitFor([&] { return app->window()->modelWizard() != nullptr; }, 5000));
        app->window()->modelWizard()->close();

        QTemporaryDir own;
        QVERIFY(test::copyFixture("tiny-qwen3moe", own.path()));
        app->model()->loadModelFolder(own.path());
        QVERIFY(test::waitForModel(*app));
        QVERIFY(!app->model()->isEmbeddedModelReady());
        QVERIFY(!banner->isVisible());
    }

    void withoutAnyModelTheWindowSaysWhatToDo() {
        QTemporaryDir dir;
        auto options = test::appOptions(dir);
        options.embeddedModelDir = QString();
        TandemApp app(std::move(options));
        app.start();
        app.window()->show();
        QCOMPARE(app.model()->state(), ModelController::State::NoModel);
        QCOMPARE(app.window()->emptyState()->mode(), EmptyStatePage::Mode::NoModel);
        QVERIFY(app.window()->emptyState()->isVisible());
        const auto button = [&](const QString& name) -> QAbstractButton* {
            for (QAbstractButton* b : app.window()->emptyState()->findChildren<QAbstractButton*>())
                if (b->accessibleName() == name) return b;
            return nullptr;
        };
        auto* open = button("Open model folder");
        QVERIFY(open && open->isEnabled());
        auto* getModel = button("Get a model");
        QVERIFY(getModel && getModel->isVisible() && getModel->isEnabled());
        QVERIFY(!app.window()->composer()->button()->isEnabled());
        // With nothing to load, the model wizard opens by itself (tst_model_wizard drives it).
        QVERIFY(QTest::qWaitFor([&] { return app.window()->modelWizard() && app.window()->modelWizard()->isVisible(); }, 10000));
    }
};

QTEST_MAIN(ChatAppModelsTest)
#include "tst_chat_app_models.moc"
