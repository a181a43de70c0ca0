// A model folder that does not load (issue 24, item 3): the folder is checked before the working model
// is let go, a folder that passes the check but fails in the engine gives the previous model back, a
// folder is remembered only once it loaded, and at start a saved folder that fails falls back to the
// shipped model, or, with none shipped, opens the model wizard.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/notification_banner.h"
#include "ui/wizard/model_wizard.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;
using tandem::test::startApp;

namespace {

QString canonical(const QString& dir) { return QDir(dir).canonicalPath(); }

// A copy of the fixture that passes every check Tandem can make without loading it, and fails in the
// engine: one of its two weight shards is gone.
bool makeBrokenModel(const QString& dir) {
    return test::copyFixture(QStringLiteral("tiny-qwen3moe"), dir) &&
           QFile::remove(dir + QStringLiteral("/model-00002-of-00002.safetensors"));
}

// The model stays what it was: settled (not loading), ready, and `dir`.
bool settlesOn(TandemApp& app, const QString& dir) {
    if (!QTest::qWaitFor([&] {
            return app.model()->state() != ModelController::State::Loading && app.model()->isReady() &&
                   canonical(app.model()->summary().dir) == canonical(dir);
        }, 60000))
        return false;
    QTest::qWait(50);  // nothing else is on its way
    return app.model()->isReady() && canonical(app.model()->summary().dir) == canonical(dir);
}

void setSavedModel(const QTemporaryDir& dir, const QString& modelDir) {
    QSettings ini(dir.filePath(QStringLiteral("settings.ini")), QSettings::IniFormat);
    ini.setValue("engine/modelDir", modelDir);
}

}  // namespace

class ModelFallbackTest : public QObject {
    Q_OBJECT

private slots:
    void aFolderThatIsNoModelLeavesTheWorkingModelAlone() {
        QTemporaryDir dir, own, notAModel;
        QVERIFY(test::copyFixture("tiny-qwen3moe", own.path()));
        QVERIFY(test::writeFile(notAModel.filePath("notes.txt"), "not a model"));
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        app->model()->loadModelFolder(own.path());
        QVERIFY(settlesOn(*app, own.path()));

        app->model()->loadModelFolder(notAModel.path());
        QVERIFY(settlesOn(*app, own.path()));
        QCOMPARE(canonical(app->settings()->engine().modelDir), canonical(own.path()));
        NotificationBanner* banner = app->window()->banner();
        QVERIFY(banner->isVisible());
        QVERIFY2(banner->text().contains(QDir::toNativeSeparators(notAModel.path())), qPrintable(banner->text()));
        QVERIFY2(banner->text().contains("config.json"), qPrintable(banner->text()));
        QVERIFY(app->chat()->send("still there?"));
        QVERIFY(test::waitForIdle(*app));
    }

    void aFolderThatFailsInTheEngineGivesThePreviousModelBack() {
        QTemporaryDir dir, own, broken;
        QVERIFY(test::copyFixture("tiny-qwen3moe", own.path()));
        QVERIFY(makeBrokenModel(broken.path()));
        {
            auto app = startApp(dir);
            QVERIFY(test::waitForModel(*app));
            app->model()->loadModelFolder(own.path());
            QVERIFY(settlesOn(*app, own.path()));

            app->model()->loadModelFolder(broken.path());
            QVERIFY(settlesOn(*app, own.path()));
            // Not remembered: the folder that failed is not the model of the next start.
            QCOMPARE(canonical(app->settings()->engine().modelDir), canonical(own.path()));
            NotificationBanner* banner = app->window()->banner();
            QVERIFY(banner->isVisible());
            QVERIFY2(banner->text().contains(QDir::toNativeSeparators(broken.path())), qPrintable(banner->text()));
            QVERIFY2(banner->text().contains(QFileInfo(own.path()).fileName()), qPrintable(banner->text()));
        }
        auto app = startApp(dir);
        QVERIFY(settlesOn(*app, own.path()));
    }

    void aSavedFolderThatFailsAtStartFallsBackToTheShippedModel() {
        QTemporaryDir dir, broken;
        QVERIFY(makeBrokenModel(broken.path()));
        setSavedModel(dir, broken.path());
        auto app = startApp(dir);
        QVERIFY(settlesOn(*app, test::fixturePath("tiny-qwen3moe")));
        QVERIFY(app->model()->isEmbeddedModelReady());
        NotificationBanner* banner = app->window()->banner();
        QVERIFY(banner->isVisible());
        QVERIFY2(banner->text().startsWith("Could not load the model in " + QDir::toNativeSeparators(broken.path())),
                 qPrintable(banner->text()));
        QVERIFY2(banner->text().contains("ships with Tandem"), qPrintable(banner->text()));
        // The chat works with the shipped model meanwhile.
        QVERIFY(app->chat()->send("anyone?"));
        QVERIFY(test::waitForIdle(*app));
    }

    void aSavedFolderThatIsGoneFallsBackToTheShippedModel() {
        QTemporaryDir dir;
        setSavedModel(dir, dir.filePath("deleted-model"));
        auto app = startApp(dir);
        QVERIFY(settlesOn(*app, test::fixturePath("tiny-qwen3moe")));
        QVERIFY(app->window()->banner()->isVisible());
        QVERIFY2(app->window()->banner()->text().contains("deleted-model"), qPrintable(app->window()->banner()->text()));
    }

    void aSavedFolderThatFailsWithNothingShippedOpensTheWizard() {
        QTemporaryDir dir, broken;
        QVERIFY(makeBrokenModel(broken.path()));
        setSavedModel(dir, broken.path());
        auto options = test::appOptions(dir);
        options.embeddedModelDir = QString();
        TandemApp app(std::move(options));
        app.start();
        app.window()->show();
        QVERIFY(QTest::qWaitFor([&] { return app.model()->state() != ModelController::State::Loading; }, 60000));
        QVERIFY(!app.model()->isReady());
        QVERIFY(QTest::qWaitFor([&] { return app.window()->modelWizard() && app.window()->modelWizard()->isVisible(); },
                                10000));
    }
};

QTEST_MAIN(ModelFallbackTest)
#include "tst_model_fallback.moc"
