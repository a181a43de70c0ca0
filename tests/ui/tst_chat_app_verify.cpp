// The app with a packed store that has not been verified: it loads, is read in full in the background
// with its progress in the banner and the status bar while the chat goes on, and when that read finds
// damage the app says which file and what to do, and stops using the model (the dashboard then leaves the
// GPU it ran on for Settings' choice).
#include <QFile>
#include <QFileInfo>
#include <QPushButton>
#include <QSemaphore>
#include <QTemporaryDir>
#include <QTest>
#include <atomic>

#include "convert/convert_model.h"
#include "flaky_gpu.h"
#include "test_support.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/notification_banner.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

// The real background verification, held after it has reported `heldAt` until the test releases it.
struct VerifyGate {
    double heldAt = 0.42;
    QSemaphore reached, release;
    std::atomic<int> runs{0};
};

StoreVerifyFunction gatedVerifier(std::shared_ptr<VerifyGate> gate) {
    return [gate](const QString& dir, const std::function<bool(double)>& progress) {
        ++gate->runs;
        if (!progress(gate->heldAt)) {
            tandem::StoreCheck stopped;
            stopped.state = tandem::StoreState::Unverified;
            return stopped;
        }
        gate->reached.release();
        gate->release.acquire();
        return verifyStoreInBackground(dir, progress);
    };
}

QString convertFixture(const QTemporaryDir& dir) {
    const QString out = dir.filePath("tiny-store");
    convert::convertModel({test::fixturePath("tiny-qwen3moe").toStdString(), out.toStdString(), io::ExpertType::INT4, 1}, {});
    return out;
}

std::unique_ptr<TandemApp> startWithStore(const QTemporaryDir& dir, const QString& store, std::shared_ptr<VerifyGate> gate) {
    TandemAppOptions options = test::appOptions(dir);
    options.storeVerifier = gatedVerifier(std::move(gate));
    auto app = std::make_unique<TandemApp>(std::move(options));
    EngineSettings engine = app->settings()->engine();
    engine.modelDir = store;
    engine.threads = 1;
    app->settings()->setEngine(engine);
    test::limitAnswers(*app, 8);
    app->start();
    app->window()->show();
    return app;
}

}  // namespace

class ChatAppVerifyTest : public QObject {
    Q_OBJECT

private slots:
    void damageFoundInTheBackgroundStopsTheModel() {
        QTemporaryDir dir;
        const QString store = convertFixture(dir);
        // Never verified (as a store from elsewhere), with one byte changed in the middle of an expert
        // file: its size and first page are right, so it loads.
        QVERIFY(QFile::remove(store + "/tandem-verified.json"));
        const QString layer = store + "/experts-001.bin";
        QByteArray bytes = test::readFile(layer);
        bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x20);
        QVERIFY(test::writeFile(layer, bytes));

        auto gate = std::make_shared<VerifyGate>();
        // On a stand-in GPU numbered 1 (the engine's pick): the dashboard follows it while the model runs.
        test::FlakyGpu gpu(1 << 30);
        gpu.device = 1;
        auto app = startWithStore(dir, store, gate);
        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->summary().store == tandem::StoreState::Unverified);
        QCOMPARE(app->monitor()->gpuDevice(), 1);

        // Progress, while the verification is held at 42%.
        QVERIFY(QTest::qWaitFor([&] { return gate->reached.tryAcquire(); }, 60000));
        MainWindow* window = app->window();
        QTRY_VERIFY_WITH_TIMEOUT(window->banner()->text().contains("42%"), 10000);
        QVERIFY(window->banner()->isVisible());
        QCOMPARE(window->banner()->kind(), NotificationBanner::Kind::Information);
        QVERIFY2(window->banner()->text().contains("Checking the files of tiny-store"), qPrintable(window->banner()->text()));
        QVERIFY2(window->modelStatusText().contains("checking its files 42%"), qPrintable(window->modelStatusText()));
        QVERIFY(app->model()->isVerifying());

        // The chat goes on meanwhile (on damaged weights an answer may also fail; it ends either way).
        test::typeAndSend(*app, "Hello?");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(app->messages()->rowCount(), 2);
        QVERIFY(app->messages()->message(1).state != MessageState::Streaming);

        // The read goes on and finds the damaged file.
        gate->release.release();
        QTRY_VERIFY_WITH_TIMEOUT(window->banner()->kind() == NotificationBanner::Kind::Error, 60000);
        const QString message = window->banner()->text();
        QVERIFY2(message.contains(layer) && message.contains("convert the model again", Qt::CaseInsensitive) &&
                     message.contains("stopped using it"),
                 qPrintable(message));
        QCOMPARE(app->model()->state(), ModelController::State::Failed);
        QCOMPARE(app->monitor()->gpuDevice(), 0);  // no model: Settings' choice (automatic) again
        QVERIFY(!app->model()->isVerifying());
        QVERIFY(!window->composer()->button()->isEnabled());
        QVERIFY(QFile::exists(layer));  // nothing deleted
        QCOMPARE(gate->runs.load(), 1);

        // Recorded: the next start refuses the store at once, without reading it again, says why, and
        // chats with the model that ships with Tandem instead (issue 24, item 3).
        app.reset();
        auto again = startWithStore(dir, store, gate);
        QVERIFY(test::waitForModel(*again));
        QVERIFY(again->model()->isEmbeddedModelReady());
        QVERIFY2(again->window()->banner()->text().contains(layer), qPrintable(again->window()->banner()->text()));
        QCOMPARE(gate->runs.load(), 1);
    }

    // A store its conversion verified loads without a second read.
    void convertedStoreIsNotReadAgain() {
        QTemporaryDir dir;
        const QString store = convertFixture(dir);
        auto gate = std::make_shared<VerifyGate>();
        auto app = startWithStore(dir, store, gate);
        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->summary().store == tandem::StoreState::Verified);
        QVERIFY(!app->model()->isVerifying());
        QCOMPARE(gate->runs.load(), 0);
        QVERIFY(!app->window()->modelStatusText().contains("checking"));
    }

    // An intact store that was never verified: checked in the background, then the banner goes.
    void intactStoreIsVerifiedOnce() {
        QTemporaryDir dir;
        const QString store = convertFixture(dir);
        QVERIFY(QFile::remove(store + "/tandem-verified.json"));
        auto gate = std::make_shared<VerifyGate>();
        auto app = startWithStore(dir, store, gate);
        QVERIFY(test::waitForModel(*app));
        QVERIFY(QTest::qWaitFor([&] { return gate->reached.tryAcquire(); }, 60000));
        QTRY_VERIFY_WITH_TIMEOUT(app->window()->banner()->text().contains("42%"), 10000);
        // An answer while the store is being read.
        test::typeAndSend(*app, "Hello?");
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(toString(app->messages()->message(1).state), toString(MessageState::Complete));
        QVERIFY(app->model()->isVerifying());
        gate->release.release();
        QTRY_VERIFY_WITH_TIMEOUT(!app->model()->isVerifying(), 60000);
        QVERIFY(app->model()->isReady());
        QVERIFY(!app->window()->banner()->isVisible() || app->window()->banner()->topic() != "verify");
        QVERIFY(QFile::exists(store + "/tandem-verified.json"));
        QVERIFY(app->model()->summary().store == tandem::StoreState::Verified);
    }
};

QTEST_MAIN(ChatAppVerifyTest)
#include "tst_chat_app_verify.moc"
