// What the app says about itself: Help ▸ About Tandem and `tandem --version` show the build (version,
// git revision, GPU path, CPU kernels, Qt) and where Tandem keeps its files, which follow XDG.
#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QLabel>
#include <QMenuBar>
#include <QProcess>
#include <QPushButton>
#include <QTemporaryDir>
#include <QTest>

#include "tandem/build_info.h"
#include "test_support.h"
#include "ui/settings/app_paths.h"
#include "ui/widgets/about_dialog.h"
#include "ui/widgets/main_window.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

QAction* menuAction(QMainWindow* window, const QString& menu, const QString& text) {
    for (QAction* top : window->menuBar()->actions())
        if (top->text() == menu && top->menu())
            for (QAction* a : top->menu()->actions())
                if (a->text() == text) return a;
    return nullptr;
}

QString allLabelText(QWidget* widget) {
    QString text;
    for (const QLabel* label : widget->findChildren<QLabel*>()) text += label->text() + QLatin1Char('\n');
    return text;
}

QString run(const QString& program, const QStringList& args, int* exitCode = nullptr) {
    QProcess p;
    p.start(program, args);
    if (!p.waitForFinished(60000)) return QStringLiteral("<did not finish>");
    if (exitCode) *exitCode = p.exitCode();
    return QString::fromUtf8(p.readAllStandardOutput());
}

}  // namespace

class AppInfoTest : public QObject {
    Q_OBJECT

private slots:
    void foldersFollowXdg() {
        // tandem_add_ui_test gives each suite its own XDG_DATA_HOME and XDG_CONFIG_HOME.
        const QString data = qEnvironmentVariable("XDG_DATA_HOME");
        const QString config = qEnvironmentVariable("XDG_CONFIG_HOME");
        QVERIFY(!data.isEmpty() && !config.isEmpty());
        QCOMPARE(paths::dataDir(), data + "/tandem");
        QCOMPARE(paths::databaseFile(), data + "/tandem/conversations.sqlite");
        QCOMPARE(paths::modelsDir(), data + "/tandem/models");
        QCOMPARE(paths::settingsFile(), config + "/tandem/tandem.ini");
        QCOMPARE(TandemApp::defaultDatabasePath(), paths::databaseFile());
    }

    void shippedModelIsBesideTheExecutable() {
        // The installed layout, <bin>/../share/tandem/models/<name>; the build folder repeats it.
        const QString expected = QDir::cleanPath(QCoreApplication::applicationDirPath() +
                                                 "/../share/tandem/models/" TANDEM_DEFAULT_MODEL_NAME);
        QCOMPARE(paths::shippedModelDir(), expected);
        QCOMPARE(paths::defaultModelName(), QStringLiteral(TANDEM_DEFAULT_MODEL_NAME));
    }

    void aboutShowsTheBuildAndTheModel() {
        QTemporaryDir dir;
        TandemApp app(test::appOptions(dir));
        app.start();
        app.window()->show();
        QVERIFY(test::waitForModel(app));

        QAction* about = menuAction(app.window(), "&Help", "&About Tandem");
        QVERIFY(about);
        about->trigger();
        AboutDialog* dialog = app.window()->findChild<AboutDialog*>();
        QVERIFY(dialog);
        QVERIFY(dialog->isVisible());

        const BuildInfo& build = buildInfo();
        const QString text = allLabelText(dialog);
        QVERIFY2(text.contains(QString::fromStdString(build.version)), qPrintable(text));
        QVERIFY2(text.contains(QString::fromStdString(build.revision)), qPrintable(text));
        QVERIFY(text.contains(build.cuda ? "CUDA " : "not built (CPU only)"));
        QVERIFY(text.contains("scalar, avx2, avx512, amx"));
        QVERIFY(text.contains(QString::fromStdString(build.cpuKernel)));
        QVERIFY(text.contains(QString::fromLatin1(qVersion())));
        QVERIFY(text.contains("tiny-qwen3moe"));  // the loaded model
        QVERIFY(text.contains(paths::databaseFile()));
        QVERIFY(text.contains(paths::settingsFile()));

        QPushButton* copy = dialog->findChild<QPushButton*>("copyDetails");
        QVERIFY(copy);
        QApplication::clipboard()->clear();
        copy->click();
        const QString copied = QApplication::clipboard()->text();
        QCOMPARE(copied, dialog->details());
        QVERIFY(copied.startsWith("Tandem " + QString::fromStdString(build.version) + " (" +
                                  QString::fromStdString(build.revision) + ")\n"));
        QVERIFY(copied.contains("Model: tiny-qwen3moe\n"));

        dialog->close();  // deletes itself
        QTRY_VERIFY(app.window()->findChild<AboutDialog*>() == nullptr);
    }

    void versionOptionPrintsTheBuild() {
        int exitCode = -1;
        const QString out = run(TANDEM_APP_PATH, {"--version"}, &exitCode);
        QCOMPARE(exitCode, 0);
        QCOMPARE(out, buildDescription("tandem"));
        QVERIFY(out.contains("\nQt: "));
        const QString cli = run(test::cliPath(), {"--version"}, &exitCode);
        QCOMPARE(exitCode, 0);
        QCOMPARE(cli, QString::fromStdString(describeBuild("tandem-cli")));
        QVERIFY(cli.startsWith("tandem-cli " + QString::fromStdString(buildInfo().version) + " ("));
    }
};

QTEST_MAIN(AppInfoTest)
#include "tst_app_info.moc"
