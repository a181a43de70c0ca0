// Settings ▸ Server (issue 27): the app serves the model it has loaded over the OpenAI API. Turned on in
// the Settings dialog as a user does, on the Pocket Dictionary (the app's default model), spoken to with
// QNetworkAccessManager on 127.0.0.1: /health, /v1/models, chat completions whole and streamed, equal to
// tandem-cli's greedy answer; the address in the status bar; turned off, the port closes. A request in
// flight when the model is reloaded ends with a 503 error body and the server comes back on the new
// load; the dialog refuses an address for other computers without a key; a port in use is shown. Several
// requests at once decode together (the CPU path, and the GPU path where Settings reserves sessions for the
// server) and each equals its answer alone.
#include <QApplication>
#include <QEventLoop>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QPushButton>
#include <QCheckBox>
#include <QSpinBox>
#include <QTabWidget>
#include <QTcpServer>
#include <QTcpSocket>
#include <QSemaphore>
#include <QTest>
#include <QTimer>
#include <QRegularExpression>
#include <QSettings>
#include <functional>
#include <chrono>
#include <thread>

#include "../cli/serve_test_support.h"
#include "ui/controllers/server_controller.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/settings_dialog.h"
#include "flaky_gpu.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

const QString kModel = QStringLiteral(TANDEM_DEFAULT_MODEL_SOURCE);
const QString kName = QFileInfo(kModel).fileName();
const QString kQuestion = QStringLiteral("What does serendipity mean?");

struct Reply {
    int status = 0;
    QByteArray body;
    QNetworkReply::NetworkError error = QNetworkReply::NoError;
    QJsonObject json() const { return QJsonDocument::fromJson(body).object(); }
};

// The finished reply of `reply`, waiting in an event loop (the app's UI thread keeps turning).
Reply finish(QNetworkReply* reply) {
    if (!reply->isFinished()) {
        QEventLoop loop;
        QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
        QTimer::singleShot(120000, &loop, &QEventLoop::quit);
        loop.exec();
    }
    Reply r;
    r.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    r.body = reply->readAll();
    r.error = reply->error();
    reply->deleteLater();
    return r;
}

QNetworkRequest request(int port, const QString& path) {
    QNetworkRequest r(QUrl(QStringLiteral("http://127.0.0.1:%1%2").arg(port).arg(path)));
    r.setHeader(QNetworkRequest::ContentTypeHeader, QStringLiteral("application/json"));
    return r;
}

QByteArray chatBody(const QString& question, bool stream, int maxTokens = 256) {
    QJsonObject body{{"model", kName},
                     {"messages", QJsonArray{QJsonObject{{"role", "user"}, {"content", question}}}},
                     {"temperature", 0},
                     {"max_tokens", maxTokens},
                     {"stream", stream}};
    return QJsonDocument(body).toJson(QJsonDocument::Compact);
}

// A streamed answer's content: the deltas of its "data: {...}" events, up to "data: [DONE]".
QString streamedContent(const QByteArray& body, bool* done) {
    QString content;
    *done = false;
    for (const QByteArray& line : body.split('\n')) {
        if (!line.startsWith("data: ")) continue;
        const QByteArray data = line.mid(6);
        if (data == "[DONE]") {
            *done = true;
            continue;
        }
        const QJsonObject chunk = QJsonDocument::fromJson(data).object();
        content += chunk["choices"].toArray().at(0).toObject()["delta"].toObject()["content"].toString();
    }
    return content;
}

// A port nothing listens on now.
int freePort() {
    QTcpServer probe;
    if (!probe.listen(QHostAddress::LocalHost, 0)) return 0;
    return probe.serverPort();
}

bool portOpen(int port) {
    QTcpSocket socket;
    socket.connectToHost(QHostAddress::LocalHost, static_cast<quint16>(port));
    return socket.waitForConnected(3000);
}

// The Pocket Dictionary as the app's model, loaded as tandem-cli chat loads it (one thread, the
// checkpoint's dense weights), so greedy answers are the same.
TandemAppOptions pocketOptions(const QTemporaryDir& dir, ModelLoader loader = {}) {
    auto options = test::appOptions(dir, std::move(loader));
    options.embeddedModelDir = kModel;
    options.settings->setValue("engine/threads", 1);
    options.settings->setValue("engine/int8Dense", false);
    return options;
}

const QStringList kQuestions = {kQuestion, QStringLiteral("What does ephemeral mean?"), QStringLiteral("What does ubiquitous mean?"),
                                QStringLiteral("What does candid mean?")};

// A chat completion's text.
QString answerText(const Reply& r) {
    return r.json()["choices"].toArray().at(0).toObject()["message"].toObject()["content"].toString();
}

// kQuestions sent to the server at `port` one after another (their answers in `alone`), then all at once, the
// engine thread held until all of them wait so that they run together from the start: each answer at once
// equals its answer alone. `before` and `together` are /health's decode figures before and after the ones
// at once.
void askAloneThenTogether(TandemApp& app, QNetworkAccessManager& http, int port, int maxTokens, QStringList* alone,
                          QJsonObject* before, QJsonObject* together) {
    for (const QString& q : kQuestions) {
        const Reply r = finish(http.post(request(port, "/v1/chat/completions"), chatBody(q, false, maxTokens)));
        QCOMPARE(r.status, 200);
        *alone << answerText(r);
        QVERIFY(!alone->back().isEmpty());
    }
    const auto decode = [&] { return finish(http.get(request(port, "/health"))).json()["decode"].toObject(); };
    *before = decode();
    QSemaphore hold;
    app.worker()->post([&hold](LoadedModel*, quint64) { hold.acquire(); });
    QList<QNetworkReply*> pending;
    for (const QString& q : kQuestions) pending << http.post(request(port, "/v1/chat/completions"), chatBody(q, false, maxTokens));
    const bool allWaiting = QTest::qWaitFor(
        [&] { return finish(http.get(request(port, "/health"))).json()["waiting"].toInt() == kQuestions.size(); }, 30000);
    hold.release();
    QVERIFY(allWaiting);
    for (int i = 0; i < kQuestions.size(); ++i) {
        const Reply r = finish(pending[i]);
        QCOMPARE(r.status, 200);
        QCOMPARE(answerText(r), (*alone)[i]);
    }
    *together = decode();
}

// Opens Settings from the window, as the Edit menu does, and lets `edit` change the Server page before
// OK is pressed.
void changeServerSettings(MainWindow* window, const std::function<void(SettingsDialog*)>& edit) {
    bool edited = false;
    QTimer::singleShot(0, window, [&] {
        auto* dialog = qobject_cast<SettingsDialog*>(QApplication::activeModalWidget());
        if (!dialog) return;
        auto* tabs = dialog->findChild<QTabWidget*>();
        for (int i = 0; i < tabs->count(); ++i)
            if (tabs->tabText(i).remove('&') == QStringLiteral("Server")) tabs->setCurrentIndex(i);
        edit(dialog);
        edited = true;
        dialog->accept();
        if (dialog->isVisible()) dialog->reject();  // refused: close it anyway, the test says why
    });
    window->openSettings();
    QVERIFY(edited);
}

template <typename T>
T* byName(QWidget* parent, const QString& accessibleName) {
    for (T* w : parent->findChildren<T*>())
        if (w->accessibleName() == accessibleName) return w;
    return nullptr;
}

}  // namespace

class AppServerTest : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { QVERIFY2(QFileInfo::exists(kModel + "/config.json"), qPrintable(kModel)); }

    void settingsDefaultsAndKeys() {
        const ServerSettings d;
        QVERIFY(!d.enabled);
        QCOMPARE(d.host, QStringLiteral("127.0.0.1"));
        QCOMPARE(d.port, 8080);
        QVERIFY(d.apiKey.isEmpty());
        QVERIFY(isLoopbackAddress("127.0.0.1") && isLoopbackAddress("127.3.2.1") && isLoopbackAddress("::1") &&
                isLoopbackAddress("[::1]") && isLoopbackAddress("localhost"));
        QVERIFY(!isLoopbackAddress("0.0.0.0") && !isLoopbackAddress("192.168.1.5") && !isLoopbackAddress("example.com"));
        const QString a = generateApiKey(), b = generateApiKey();
        QVERIFY(QRegularExpression("^tandem-[0-9a-f]{40}$").match(a).hasMatch());
        QVERIFY(a != b);

        // Persisted in tandem.ini with the rest; a fresh file gives the defaults.
        QTemporaryDir dir;
        AppSettings settings(std::make_unique<QSettings>(dir.filePath("tandem.ini"), QSettings::IniFormat));
        QCOMPARE(settings.server(), ServerSettings{});
        ServerSettings s{true, "0.0.0.0", 9090, a};
        settings.setServer(s);
        settings.sync();
        AppSettings again(std::make_unique<QSettings>(dir.filePath("tandem.ini"), QSettings::IniFormat));
        QCOMPARE(again.server(), s);
    }

    // The dialog refuses to serve on an address for other computers without a key, and says why.
    void remoteAddressNeedsKeyInDialog() {
        SettingsValues values;
        values.server = {true, "0.0.0.0", 8080, ""};
        SettingsDialog dialog(values, QStringList{});
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));
        QVERIFY(dialog.serverProblem().contains("API key"));
        dialog.accept();
        QVERIFY(dialog.isVisible());
        QVERIFY(dialog.result() != QDialog::Accepted);
        auto* problem = dialog.findChild<QLabel*>("serverProblem");
        QVERIFY(problem && problem->isVisible());
        QVERIFY2(problem->text().contains("0.0.0.0") && problem->text().contains("API key"), qPrintable(problem->text()));
        auto* key = byName<QLineEdit>(&dialog, "API key");
        QVERIFY(key);
        QCOMPARE(key->echoMode(), QLineEdit::Password);  // shown masked
        QVERIFY(key->hasFocus());

        // Generate gives one; the problem goes, OK is taken.
        auto* generate = byName<QPushButton>(&dialog, "Generate an API key");
        QVERIFY(generate);
        QTest::mouseClick(generate, Qt::LeftButton);
        QVERIFY(key->text().startsWith("tandem-"));
        QVERIFY(!problem->isVisible());
        dialog.accept();
        QCOMPARE(dialog.result(), int(QDialog::Accepted));
        QCOMPARE(dialog.values().server.apiKey, key->text());

        // A loopback address needs none; a key with a space is refused.
        SettingsValues local;
        local.server = {true, "127.0.0.1", 8080, ""};
        QVERIFY(SettingsDialog(local, {}).serverProblem().isEmpty());
        local.server.apiKey = "two words";
        QVERIFY(!SettingsDialog(local, {}).serverProblem().isEmpty());
        // Off, nothing is checked.
        values.server.enabled = false;
        QVERIFY(SettingsDialog(values, {}).serverProblem().isEmpty());
    }

    void servesTheLoadedModel() {
        QTemporaryDir dir;
        auto app = std::make_unique<TandemApp>(pocketOptions(dir));
        test::limitAnswers(*app);
        app->start();
        app->window()->show();
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(app->server()->state(), ServerController::State::Off);  // off by default
        QVERIFY(app->window()->serverStatusText().isEmpty());

        const int port = freePort();
        QVERIFY(port > 0);
        changeServerSettings(app->window(), [&](SettingsDialog* dialog) {
            auto* enabled = byName<QCheckBox>(dialog, "Serve the model");
            auto* portBox = byName<QSpinBox>(dialog, "Server port");
            auto* host = byName<QLineEdit>(dialog, "Server address");
            QVERIFY(enabled && portBox && host);
            QVERIFY(!enabled->isChecked());
            QCOMPARE(host->text(), QStringLiteral("127.0.0.1"));
            QCOMPARE(portBox->value(), 8080);
            enabled->click();
            portBox->setValue(port);
        });
        QVERIFY(app->settings()->server().enabled);
        QCOMPARE(app->server()->state(), ServerController::State::Serving);
        const QString url = QStringLiteral("http://127.0.0.1:%1/v1").arg(port);
        QCOMPARE(app->server()->url(), url);
        QCOMPARE(app->window()->serverStatusText(), QStringLiteral("Serving on ") + url);

        QNetworkAccessManager http;
        const Reply health = finish(http.get(request(port, "/health")));
        QCOMPARE(health.status, 200);
        QCOMPARE(health.json()["status"].toString(), QStringLiteral("ok"));
        QCOMPARE(health.json()["model"].toString(), kName);

        const Reply models = finish(http.get(request(port, "/v1/models")));
        QCOMPARE(models.status, 200);
        const QJsonArray data = models.json()["data"].toArray();
        QCOMPARE(data.size(), 1);
        QCOMPARE(data[0].toObject()["id"].toString(), kName);
        QCOMPARE(data[0].toObject()["context_length"].toInt(), app->model()->summary().contextLength);

        // The same greedy answer tandem-cli chat gives.
        const QString cli = QString::fromStdString(test::cliAnswer(kModel, kQuestion.toStdString(), 256));
        QVERIFY2(!cli.isEmpty() && !cli.startsWith("(tandem-cli chat failed"), qPrintable(cli));
        const Reply whole = finish(http.post(request(port, "/v1/chat/completions"), chatBody(kQuestion, false)));
        QCOMPARE(whole.status, 200);
        const QJsonObject choice = whole.json()["choices"].toArray().at(0).toObject();
        QCOMPARE(choice["message"].toObject()["content"].toString(), cli);
        QCOMPARE(choice["finish_reason"].toString(), QStringLiteral("stop"));
        QVERIFY(whole.json()["usage"].toObject()["completion_tokens"].toInt() > 0);

        // Streamed, while the app's own chat answers too: both take turns on the one engine thread.
        QNetworkReply* pending = http.post(request(port, "/v1/chat/completions"), chatBody(kQuestion, true));
        test::typeAndSend(*app, QStringLiteral("Hello"));
        const Reply streamed = finish(pending);
        QCOMPARE(streamed.status, 200);
        bool done = false;
        QCOMPARE(streamedContent(streamed.body, &done), cli);
        QVERIFY(done);
        QVERIFY(test::waitForIdle(*app));
        QVERIFY(app->messages()->rowCount() >= 2);  // the chat's question and its answer

        // A wrong model name is the API's 404, in OpenAI's shape.
        QByteArray wrong = chatBody(kQuestion, false);
        wrong.replace(kName.toUtf8(), "gpt-4");
        const Reply notFound = finish(http.post(request(port, "/v1/chat/completions"), wrong));
        QCOMPARE(notFound.status, 404);
        QCOMPARE(notFound.json()["error"].toObject()["code"].toString(), QStringLiteral("model_not_found"));

        // Turned off: the port closes, the status line goes.
        changeServerSettings(app->window(), [](SettingsDialog* dialog) { byName<QCheckBox>(dialog, "Serve the model")->click(); });
        QCOMPARE(app->server()->state(), ServerController::State::Off);
        QVERIFY(app->window()->serverStatusText().isEmpty());
        QVERIFY(!portOpen(port));
    }

    // Several clients at once: on the CPU path the app's server decodes their requests together, in
    // sessions of its own (GenerationScheduler), and each answer equals the same request sent alone; the
    // chat goes on answering after them.
    void concurrentRequestsDecodeTogether() {
        QTemporaryDir dir;
        auto app = std::make_unique<TandemApp>(pocketOptions(dir));
        test::limitAnswers(*app);
        app->start();
        app->window()->show();
        QVERIFY(test::waitForModel(*app));
        QVERIFY(!app->model()->summary().onGpu);
        const int port = freePort();
        QVERIFY(port > 0);
        changeServerSettings(app->window(), [&](SettingsDialog* dialog) {
            byName<QCheckBox>(dialog, "Serve the model")->click();
            byName<QSpinBox>(dialog, "Server port")->setValue(port);
        });
        QCOMPARE(app->server()->state(), ServerController::State::Serving);

        QNetworkAccessManager http;
        QStringList alone;
        QJsonObject before, together;
        askAloneThenTogether(*app, http, port, 48, &alone, &before, &together);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(before["batched_steps"].toInt(), 0);  // one at a time so far
        qInfo("decode steps %d, batched %d, largest batch %d", together["steps"].toInt(), together["batched_steps"].toInt(),
              together["largest_batch"].toInt());
        QVERIFY(together["batched_steps"].toInt() > 0);
        QCOMPARE(together["largest_batch"].toInt(), 4);

        test::typeAndSend(*app, QStringLiteral("Hello"));
        QVERIFY(test::waitForIdle(*app));
        QVERIFY(app->messages()->rowCount() >= 2);

        // Loaded again: the sessions the server kept on the old model go with it (before its engine), and
        // the server answers from the new load the same way.
        const quint64 firstSerial = app->model()->summary().serial;
        app->model()->loadConfigured();
        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->summary().serial != firstSerial);
        QCOMPARE(app->server()->state(), ServerController::State::Serving);
        const Reply again = finish(http.post(request(port, "/v1/chat/completions"), chatBody(kQuestions[1], false, 48)));
        QCOMPARE(again.status, 200);
        QCOMPARE(answerText(again), alone[1]);
        app.reset();  // quits with the server on and sessions kept: it stops cleanly
        QVERIFY(!portOpen(port));
    }

    // On the GPU path (a stand-in GPU that runs the CPU path) the app's server answers one request at a time
    // through the chat's session unless Settings ▸ Server reserves GPU sessions for it: with 2, the engine is
    // loaded with the chat's session and 2 more (EngineOptions::gpuSessions), four requests sent at once
    // decode two by two (not the CPU path's four), each equal to its answer alone, and never more than the
    // 3 sessions reserved exist.
    void theGpuDecodesTogetherWhereSessionsAreReserved() {
        const test::FlakyGpu gpu(1 << 30);
        QTemporaryDir dir;
        const int port = freePort();
        QVERIFY(port > 0);
        auto options = pocketOptions(dir);
        options.settings->setValue("engine/serverGpuBatch", 2);
        options.settings->setValue("server/enabled", true);
        options.settings->setValue("server/port", port);
        auto app = std::make_unique<TandemApp>(std::move(options));
        test::limitAnswers(*app);
        app->start();
        app->window()->show();
        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->summary().onGpu);
        QCOMPARE(gpu.lastSessions, 3);
        QCOMPARE(app->model()->summary().gpuSessions, 3);
        QVERIFY(QTest::qWaitFor([&] { return app->server()->state() == ServerController::State::Serving; }, 10000));
        QNetworkAccessManager http;
        QStringList alone;
        QJsonObject before, decode;
        askAloneThenTogether(*app, http, port, 32, &alone, &before, &decode);
        if (QTest::currentTestFailed()) return;
        QCOMPARE(decode["largest_batch"].toInt(), 2);
        QCOMPARE(gpu.runners->most.load(), 3);  // the chat's session and the server's two
        app.reset();
    }

    // A request in flight when the model is loaded again ends with a 503 error body; the server comes
    // back on the new load, at the same address.
    void modelReloadEndsRequestsAndRestarts() {
        QTemporaryDir dir;
        auto gate = std::make_shared<test::ModelGate>();
        const int port = freePort();
        auto options = pocketOptions(dir, test::gatedModelLoader(gate));
        options.settings->setValue("server/enabled", true);
        options.settings->setValue("server/port", port);
        auto app = std::make_unique<TandemApp>(std::move(options));
        app->start();
        app->window()->show();
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(app->server()->state(), ServerController::State::Serving);
        const quint64 firstSerial = app->model()->summary().serial;

        QNetworkAccessManager http;
        gate->holdAtToken = 3;
        QNetworkReply* pending = http.post(request(port, "/v1/chat/completions"), chatBody(kQuestion, false, 64));
        QVERIFY(QTest::qWaitFor([&] { return gate->reached.tryAcquire(); }, 60000));
        // The answer is held inside the engine at its third token; a moment after the reload is asked
        // for, it goes on (and is then cut at its next token).
        std::thread releaser([gate] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            gate->holdAtToken = 0;
            gate->release.release();
        });
        app->model()->loadConfigured();
        releaser.join();
        QCOMPARE(app->server()->state(), ServerController::State::WaitingForModel);
        QCOMPARE(app->window()->serverStatusText(), QStringLiteral("Server: waiting for the model to load"));
        const Reply cut = finish(pending);
        const QJsonObject error = cut.json()["error"].toObject();
        QVERIFY2(!error.isEmpty(), cut.body.constData());
        QCOMPARE(error["code"].toString(), QStringLiteral("model_unavailable"));
        QCOMPARE(error["type"].toString(), QStringLiteral("server_error"));
        QVERIFY2(error["message"].toString().contains("model is being changed"), cut.body.constData());

        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->summary().serial != firstSerial);
        QCOMPARE(app->server()->state(), ServerController::State::Serving);
        const Reply whole = finish(http.post(request(port, "/v1/chat/completions"), chatBody(kQuestion, false, 8)));
        QCOMPARE(whole.status, 200);
        QVERIFY(!whole.json()["choices"].toArray().at(0).toObject()["message"].toObject()["content"].toString().isEmpty());
        app.reset();  // quits with the server on: it stops cleanly
        QVERIFY(!portOpen(port));
    }

    // A port another program holds: the setting stays on, the status bar says why; once the port is free,
    // applying the settings again starts the server.
    void portInUseIsShown() {
        QTcpServer other;
        QVERIFY(other.listen(QHostAddress::LocalHost, 0));
        const int port = other.serverPort();
        QTemporaryDir dir;
        auto options = pocketOptions(dir);
        options.settings->setValue("server/enabled", true);
        options.settings->setValue("server/port", port);
        auto app = std::make_unique<TandemApp>(std::move(options));
        app->start();
        app->window()->show();
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(app->server()->state(), ServerController::State::Failed);
        QVERIFY(app->settings()->server().enabled);
        const QString status = app->window()->serverStatusText();
        QVERIFY2(status.contains(QStringLiteral("Port %1 is in use").arg(port)), qPrintable(status));
        auto* label = app->window()->findChild<QLabel*>("serverStatus");
        QVERIFY(label && label->isVisible());

        other.close();
        app->server()->apply();
        QCOMPARE(app->server()->state(), ServerController::State::Serving);
        QVERIFY(portOpen(port));
    }
};

QTEST_MAIN(AppServerTest)
#include "tst_app_server.moc"
