// `tandem --reset-settings`: every setting back to its default, the old file kept as tandem.ini.bak,
// the conversations byte for byte as they were; refused while a Tandem runs on the same database.
#include <QDir>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"
#include "ui/settings/app_paths.h"
#include "ui/settings/settings_reset.h"
#include "ui/store/conversation_store.h"
#include "ui/store/database.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

// Settings that differ from every default the test checks.
void writeChangedSettings(const QString& file) {
    AppSettings settings(std::make_unique<QSettings>(file, QSettings::IniFormat));
    EngineSettings e = settings.engine();
    e.modelDir = "/models/Qwen3-30B-A3B";
    e.threads = 12;
    e.contextLength = 16384;
    settings.setEngine(e);
    Appearance a = settings.appearance();
    a.theme = ThemeChoice::Dark;
    settings.setAppearance(a);
    settings.setDefaultDeferral(2);
    settings.sync();
}

bool hasDefaults(const QString& file) {
    const AppSettings settings(std::make_unique<QSettings>(file, QSettings::IniFormat));
    return settings.engine() == EngineSettings{} && settings.appearance() == Appearance{} &&
           settings.defaultDeferral() == 0;
}

void writeConversation(const QString& databaseFile) {
    QDir().mkpath(QFileInfo(databaseFile).absolutePath());
    auto opened = Database::open(databaseFile);
    QVERIFY2(opened.database, qPrintable(opened.problem));
    ConversationStore store(std::move(opened.database));
    store.createConversation("Kept through a reset");
}

}  // namespace

class ResetSettingsTest : public QObject {
    Q_OBJECT

private slots:
    void resetMovesTheSettingsAsideAndKeepsConversations() {
        QTemporaryDir dir;
        const QString settings = dir.filePath("config/tandem.ini");
        const QString database = dir.filePath("data/conversations.sqlite");
        QDir().mkpath(dir.filePath("config"));
        writeChangedSettings(settings);
        writeConversation(database);
        const QByteArray before = test::readFile(settings);
        const QByteArray conversations = test::readFile(database);
        QVERIFY(!hasDefaults(settings));

        const SettingsReset reset = resetSettings(settings, database);
        QVERIFY2(reset.ok, qPrintable(reset.message));
        QVERIFY(!QFileInfo::exists(settings));
        QCOMPARE(test::readFile(settings + ".bak"), before);  // undo: rename it back
        QVERIFY(hasDefaults(settings));
        QCOMPARE(test::readFile(database), conversations);
        QVERIFY(reset.message.contains(settings + ".bak"));
        QVERIFY(reset.message.contains(database));
        QVERIFY(!QFileInfo::exists(database + ".lock"));  // the reset's own lock is gone

        // A second reset replaces the older backup with the settings of the moment.
        writeChangedSettings(settings);
        QVERIFY(resetSettings(settings, database).ok);
        QVERIFY(!QFileInfo::exists(settings));
        QVERIFY(!hasDefaults(settings + ".bak"));
    }

    void resetWithoutSettingsChangesNothing() {
        QTemporaryDir dir;
        const SettingsReset reset = resetSettings(dir.filePath("tandem.ini"), dir.filePath("conversations.sqlite"));
        QVERIFY(reset.ok);
        QVERIFY(reset.message.contains("already the defaults"));
        QCOMPARE(QDir(dir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries), QStringList());
    }

    void resetIsRefusedWhileTandemRuns() {
        QTemporaryDir dir;
        const QString settings = dir.filePath("tandem.ini");
        writeChangedSettings(settings);
        const QByteArray before = test::readFile(settings);
        auto options = test::appOptions(dir);
        const QString database = options.databasePath;
        TandemApp running(std::move(options));  // holds the database's lock, as a running Tandem does

        const SettingsReset reset = resetSettings(settings, database);
        QVERIFY(!reset.ok);
        QVERIFY2(reset.message.contains("Quit Tandem"), qPrintable(reset.message));
        QCOMPARE(test::readFile(settings), before);
        QVERIFY(!QFileInfo::exists(settings + ".bak"));
    }

    void commandResetsTheUsersSettings() {
        // The real executable with its own XDG folders: ~/.config/tandem/tandem.ini and
        // ~/.local/share/tandem/conversations.sqlite under them.
        QTemporaryDir home;
        const QString config = home.filePath("config"), data = home.filePath("data");
        const QString settings = config + "/tandem/tandem.ini";
        const QString database = data + "/tandem/conversations.sqlite";
        QDir().mkpath(config + "/tandem");
        writeChangedSettings(settings);
        writeConversation(database);
        const QByteArray conversations = test::readFile(database);

        QProcess tandem;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("XDG_CONFIG_HOME", config);
        env.insert("XDG_DATA_HOME", data);
        tandem.setProcessEnvironment(env);
        tandem.start(TANDEM_APP_PATH, {"--reset-settings"});
        QVERIFY(tandem.waitForFinished(60000));
        const QString out = QString::fromUtf8(tandem.readAllStandardOutput());
        QCOMPARE(tandem.exitCode(), 0);
        QVERIFY2(out.contains("Reset every setting to its default") && out.contains(settings + ".bak") &&
                     out.contains(database),
                 qPrintable(out));
        QVERIFY(!QFileInfo::exists(settings));
        QVERIFY(hasDefaults(settings));
        QCOMPARE(test::readFile(database), conversations);
    }
};

QTEST_MAIN(ResetSettingsTest)
#include "tst_reset_settings.moc"
