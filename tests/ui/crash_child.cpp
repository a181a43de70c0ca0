// Helper of tst_crash_recovery: the app, answering a question, frozen in the middle of the answer.
//   tandem_crash_child DATABASE SETTINGS_INI MODEL_DIR
// The engine is held at its 8th token and never released; meanwhile the app keeps saving what it has
// streamed and prints each save as "saved <base64 of the answer so far>". The test then kills it.
#include <QApplication>
#include <QSettings>
#include <cstdio>

#include "ui_test_support.h"

using namespace tandem;

int main(int argc, char** argv) {
    QApplication qapp(argc, argv);
    if (argc != 4) {
        std::fprintf(stderr, "usage: tandem_crash_child DATABASE SETTINGS_INI MODEL_DIR\n");
        return 2;
    }
    auto gate = std::make_shared<test::ModelGate>();
    gate->holdAtToken = 8;
    ui::TandemAppOptions options;
    options.databasePath = QString::fromLocal8Bit(argv[1]);
    options.settings = std::make_unique<QSettings>(QString::fromLocal8Bit(argv[2]), QSettings::IniFormat);
    options.embeddedModelDir = QString::fromLocal8Bit(argv[3]);
    options.modelLoader = test::gatedModelLoader(gate);
    options.monitorSystem = false;
    ui::TandemApp app(std::move(options));

    QObject::connect(app.chat(), &ui::ChatController::streamingAnswerSaved, [](qint64, const QString& content) {
        std::printf("saved %s\n", content.toUtf8().toBase64().constData());
        std::fflush(stdout);
    });
    QObject::connect(app.model(), &ui::ModelController::modelReady, [&app] {
        if (!app.chat()->send(QStringLiteral("Tell me a long story about experts."))) QCoreApplication::exit(3);
    });
    QObject::connect(app.model(), &ui::ModelController::loadFailed, [](const QString& m) {
        std::fprintf(stderr, "%s\n", qPrintable(m));
        QCoreApplication::exit(4);
    });
    app.start();
    return QApplication::exec();
}
