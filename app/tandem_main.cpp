// tandem: the desktop app. Wiring only; everything else lives in ui/.
//   tandem                          start the app
//   tandem --screenshot FILE.png    render the window with a demo conversation and exit
//          [--theme light|dark]
//   tandem --reset-settings         every setting back to its default (conversations stay) and exit
//   tandem --version                the build: version, git revision, GPU path, CPU kernels, Qt
#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>
#include <cstring>

#include "tandem/build_info.h"
#include "tandem/engine.h"
#include "ui/settings/app_paths.h"
#include "ui/settings/settings_reset.h"
#include "ui/shell/screenshot.h"
#include "ui/shell/tandem_app.h"
#include "ui/widgets/about_dialog.h"
#include "ui/widgets/app_icon.h"
#include "ui/widgets/main_window.h"

namespace {

// Options that answer without opening a window work without a display (over ssh, in a package test).
bool opensNoWindow(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        for (const char* option : {"--screenshot", "--reset-settings", "--version", "-v", "--help", "-h"})
            if (std::strncmp(argv[i], option, std::strlen(option)) == 0) return true;
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    tandem::numberGpusAsNvidiaSmi();  // Settings' GPU list is NVML's
    if (opensNoWindow(argc, argv) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");

    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("tandem"));
    QApplication::setApplicationDisplayName(QStringLiteral("Tandem"));
    QApplication::setApplicationVersion(QString::fromStdString(tandem::buildInfo().version));
    // The desktop entry's id: Wayland compositors match the window to its entry and icon by it.
    QApplication::setDesktopFileName(QStringLiteral("io.github.tandem.Tandem"));
    QApplication::setWindowIcon(tandem::ui::appIcon());

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Chat with large Mixture-of-Experts models on one workstation."));
    parser.addHelpOption();
    const QCommandLineOption version({QStringLiteral("v"), QStringLiteral("version")},
                                     QStringLiteral("Print the version, git revision, GPU path, CPU kernels and Qt, and exit."));
    const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                        QStringLiteral("Render the window with a demo conversation to FILE and exit."),
                                        QStringLiteral("FILE"));
    const QCommandLineOption theme(QStringLiteral("theme"), QStringLiteral("Theme of the screenshot: light or dark."),
                                   QStringLiteral("THEME"), QStringLiteral("light"));
    const QCommandLineOption resetSettings(
        QStringLiteral("reset-settings"),
        QStringLiteral("Reset every setting to its default (the old file is kept as tandem.ini.bak) and exit. "
                       "Conversations are not touched."));
    parser.addOptions({version, screenshot, theme, resetSettings});
    parser.process(app);

    if (parser.isSet(version)) {
        std::fputs(qPrintable(tandem::ui::buildDescription(QStringLiteral("tandem"))), stdout);
        return 0;
    }
    if (parser.isSet(resetSettings)) {
        const auto reset = tandem::ui::resetSettings(tandem::ui::paths::settingsFile(), tandem::ui::paths::databaseFile());
        std::fprintf(reset.ok ? stdout : stderr, "%s%s\n", reset.ok ? "" : "tandem: ", qPrintable(reset.message));
        return reset.ok ? 0 : 1;
    }
    if (parser.isSet(screenshot)) {
        const auto choice = parser.value(theme) == QLatin1String("dark") ? tandem::ui::ThemeChoice::Dark
                                                                         : tandem::ui::ThemeChoice::Light;
        return tandem::ui::renderScreenshot(parser.value(screenshot), choice);
    }

    tandem::ui::TandemApp tandemApp;
    tandemApp.start();
    tandemApp.window()->show();
    return QApplication::exec();
}
