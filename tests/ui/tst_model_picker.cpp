// The model picker at the top of the chat (issue 24, item 4): it offers the shipped model, the models in
// the models folder and the folders opened before, switches between them and back, and each conversation
// comes back with the model it was used with, even after a restart; an answer in progress finishes with
// its model first.
#include <QDir>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/model_picker.h"
#include "ui/widgets/notification_banner.h"
#include "ui/wizard/model_wizard.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

QString canonical(const QString& dir) { return QDir(dir).canonicalPath(); }

bool settlesOn(TandemApp& app, const QString& dir) {
    return QTest::qWaitFor([&] {
        return app.model()->state() == ModelController::State::Ready && canonical(app.model()->summary().dir) == canonical(dir);
    }, 60000);
}

ModelPicker* pickerOf(TandemApp& app) { return app.window()->findChild<ModelPicker*>("modelPicker"); }

// Chooses the model in `dir` as a user does: its row of the picker's list.
void pick(TandemApp& app, const QString& dir) {
    ModelPicker* picker = pickerOf(app);
    QVERIFY(picker);
    picker->refresh();
    const int row = picker->rowOf(dir);
    QVERIFY2(row >= 0, qPrintable(dir + " is not offered: " + picker->modelNames().join(", ")));
    picker->setCurrentIndex(row);
    emit picker->activated(row);
}

struct Folders {
    QTemporaryDir dir, elsewhere;
    QString models() const { return dir.filePath("models"); }
    QString alpha() const { return models() + "/alpha"; }
    QString beta() const { return models() + "/beta"; }
    QString gamma() const { return elsewhere.filePath("gamma"); }

    // alpha and beta in the models folder, a download that has only its config.json so far, a conversion
    // still running, and gamma elsewhere, opened before.
    bool make() {
        for (const QString& d : {alpha(), beta(), gamma(), models() + "/half-downloaded", models() + "/delta-int4.partial"})
            if (!QDir().mkpath(d)) return false;
        if (!test::copyFixture("tiny-qwen3moe", alpha()) || !test::copyFixture("tiny-qwen3moe", beta()) ||
            !test::copyFixture("tiny-qwen3moe", gamma()) || !test::copyFixture("tiny-qwen3moe", models() + "/delta-int4.partial"))
            return false;
        if (!QFile::copy(test::fixturePath("tiny-qwen3moe") + "/config.json", models() + "/half-downloaded/config.json"))
            return false;
        AppSettings settings(std::make_unique<QSettings>(dir.filePath("settings.ini"), QSettings::IniFormat));
        settings.setModelsFolder(models());
        settings.addRecentModelFolder(gamma());
        settings.addRecentModelFolder(alpha());  // also in the models folder: listed once
        settings.sync();
        return true;
    }
};

}  // namespace

class ModelPickerTest : public QObject {
    Q_OBJECT

private slots:
    void thePickerOffersTheShippedModelTheModelsFolderAndFoldersOpenedBefore() {
        Folders f;
        QVERIFY(f.make());
        auto app = test::startApp(f.dir);
        QVERIFY(test::waitForModel(*app));
        ModelPicker* picker = pickerOf(*app);
        QVERIFY(picker && picker->isVisible());
        QCOMPARE(picker->modelNames(), QStringList({"tiny-qwen3moe", "alpha", "beta", "gamma"}));
        QCOMPARE(picker->currentIndex(), picker->rowOf(test::fixturePath("tiny-qwen3moe")));
        QVERIFY(picker->currentText().contains("tiny-qwen3moe"));

        pick(*app, f.beta());
        QVERIFY(settlesOn(*app, f.beta()));
        QCOMPARE(picker->currentIndex(), picker->rowOf(f.beta()));
        QCOMPARE(canonical(app->settings()->engine().modelDir), canonical(f.beta()));

        // And back to the shipped model, which needs no folder of its own in the settings.
        pick(*app, test::fixturePath("tiny-qwen3moe"));
        QVERIFY(settlesOn(*app, test::fixturePath("tiny-qwen3moe")));
        QVERIFY(app->model()->isEmbeddedModelReady());
        QVERIFY(app->settings()->engine().modelDir.isEmpty());
        QCOMPARE(picker->currentIndex(), picker->rowOf(test::fixturePath("tiny-qwen3moe")));

        // The folder the user opens joins the list.
        pick(*app, f.gamma());
        QVERIFY(settlesOn(*app, f.gamma()));
        QCOMPARE(app->settings()->recentModelFolders().first(), QDir::cleanPath(f.gamma()));
    }

    void theListEndsWithWaysToGetAnotherModel() {
        Folders f;
        QVERIFY(f.make());
        auto app = test::startApp(f.dir);
        QVERIFY(test::waitForModel(*app));
        ModelPicker* picker = pickerOf(*app);
        int getModel = -1;
        for (int row = 0; row < picker->count(); ++row)
            if (picker->kindAt(row) == ModelPicker::RowKind::GetModel) getModel = row;
        QVERIFY(getModel >= 0);
        emit picker->activated(getModel);
        QVERIFY(QTest::qWaitFor([&] { return app->window()->modelWizard() != nullptr; }, 5000));
        // The row shown is still the model in use.
        QCOMPARE(picker->currentIndex(), picker->rowOf(test::fixturePath("tiny-qwen3moe")));
        app->window()->modelWizard()->close();
    }

    void eachConversationComesBackWithItsModel() {
        Folders f;
        QVERIFY(f.make());
        const QString shipped = test::fixturePath("tiny-qwen3moe");
        qint64 first = 0, second = 0;
        {
            auto app = test::startApp(f.dir);
            QVERIFY(test::waitForModel(*app));
            test::typeAndSend(*app, "Asked the shipped model");
            QVERIFY(test::waitForIdle(*app));
            first = app->chat()->currentConversationId();

            QTest::keyClick(app->window(), Qt::Key_N, Qt::ControlModifier);
            pick(*app, f.alpha());
            QVERIFY(settlesOn(*app, f.alpha()));
            test::typeAndSend(*app, "Asked alpha");
            QVERIFY(test::waitForIdle(*app));
            second = app->chat()->currentConversationId();
            QCOMPARE(app->messages()->message(1).model, QStringLiteral("alpha"));

            app->chat()->openConversation(first);
            QVERIFY(settlesOn(*app, shipped));
            QCOMPARE(pickerOf(*app)->currentIndex(), pickerOf(*app)->rowOf(shipped));
            app->chat()->openConversation(second);
            QVERIFY(settlesOn(*app, f.alpha()));

            // Picking another model for an open conversation makes it that conversation's model.
            app->chat()->openConversation(first);
            QVERIFY(settlesOn(*app, shipped));
            pick(*app, f.beta());
            QVERIFY(settlesOn(*app, f.beta()));
            app->chat()->openConversation(second);
            QVERIFY(settlesOn(*app, f.alpha()));
        }
        // After a restart: the last conversation opens with its model, the others switch as before.
        auto app = test::startApp(f.dir);
        QCOMPARE(app->chat()->currentConversationId(), second);
        QVERIFY(settlesOn(*app, f.alpha()));
        app->chat()->openConversation(first);
        QVERIFY(settlesOn(*app, f.beta()));
    }

    void aConversationsModelThatIsGoneLeavesTheModelInUse() {
        Folders f;
        QVERIFY(f.make());
        auto app = test::startApp(f.dir);
        QVERIFY(test::waitForModel(*app));
        pick(*app, f.beta());
        QVERIFY(settlesOn(*app, f.beta()));
        test::typeAndSend(*app, "Asked beta");
        QVERIFY(test::waitForIdle(*app));
        const qint64 withBeta = app->chat()->currentConversationId();
        QTest::keyClick(app->window(), Qt::Key_N, Qt::ControlModifier);
        pick(*app, f.gamma());
        QVERIFY(settlesOn(*app, f.gamma()));
        QVERIFY(QDir(f.beta()).removeRecursively());
        app->chat()->openConversation(withBeta);
        QTest::qWait(100);
        QVERIFY(settlesOn(*app, f.gamma()));
        QVERIFY(app->window()->banner()->isVisible());
        QVERIFY2(app->window()->banner()->text().contains("beta"), qPrintable(app->window()->banner()->text()));
    }

    void anAnswerInProgressFinishesWithItsModel() {
        Folders f;
        QVERIFY(f.make());
        auto gate = std::make_shared<test::ModelGate>();
        auto app = test::startApp(f.dir, test::gatedModelLoader(gate));
        QVERIFY(test::waitForModel(*app));
        test::typeAndSend(*app, "Asked the shipped model");
        QVERIFY(test::waitForIdle(*app));
        const qint64 first = app->chat()->currentConversationId();
        QTest::keyClick(app->window(), Qt::Key_N, Qt::ControlModifier);
        pick(*app, f.alpha());
        QVERIFY(settlesOn(*app, f.alpha()));

        gate->holdAtToken = 2;
        test::typeAndSend(*app, "A long answer from alpha");
        QVERIFY(gate->reached.tryAcquire(1, 60000));
        const int loads = gate->loads;
        app->chat()->openConversation(first);  // while alpha still answers in the other conversation
        QTest::qWait(50);
        QCOMPARE(gate->loads.load(), loads);
        QVERIFY(app->model()->isReady());
        gate->holdAtToken = 0;
        gate->release.release();
        QVERIFY(test::waitForIdle(*app));
        QVERIFY(settlesOn(*app, test::fixturePath("tiny-qwen3moe")));
    }
};

QTEST_MAIN(ModelPickerTest)
#include "tst_model_picker.moc"
