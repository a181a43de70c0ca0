// tandem: the desktop app. Wiring only; everything else lives in ui/.
//   tandem                          start the app
//   tandem --screenshot FILE.png    render the window with a demo conversation and exit
//          [--theme light|dark]
#include <QApplication>
#include <QCommandLineParser>
#include <cstring>

#include "ui/app/screenshot.h"
#include "ui/app/tandem_app.h"
#include "ui/widgets/main_window.h"

int main(int argc, char** argv) {
    // A screenshot needs no display: render offscreen unless a platform was chosen.
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--screenshot") == 0 && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
            qputenv("QT_QPA_PLATFORM", "offscreen");

    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("tandem"));
    QApplication::setApplicationDisplayName(QStringLiteral("Tandem"));
    QApplication::setApplicationVersion(QStringLiteral(TANDEM_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("tandem"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Chat with large Mixture-of-Experts models on one workstation."));
    parser.addHelpOption();
    parser.addVersionOption();
    const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                        QStringLiteral("Render the window with a demo conversation to FILE and exit."),
                                        QStringLiteral("FILE"));
    const QCommandLineOption theme(QStringLiteral("theme"), QStringLiteral("Theme of the screenshot: light or dark."),
                                   QStringLiteral("THEME"), QStringLiteral("light"));
    parser.addOptions({screenshot, theme});
    parser.process(app);

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
