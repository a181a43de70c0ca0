// A model on a server (issue 27, "Remote endpoints"): the app talks to an OpenAI-compatible server instead
// of its engine. Against our own `tandem-cli serve` on the Pocket Dictionary (127.0.0.1, a free port):
// added through Add a Server… as a user does (Test Connection lists the model), answers streamed into the
// chat equal to tandem-cli chat's greedy answer (and, for a second turn, to the server's own answer to
// the same conversation), the dashboard's remote tokens/s, the CPU/GPU panels marked remote, reasoning
// (reasoning_content) shown as reasoning; a wrong address, a missing or wrong API key and a server that
// went away give clear messages and keep the conversation. Against a fake server on 127.0.0.1 (what a
// real one does only by accident): stop mid-stream keeps the partial answer, a connection dropped
// mid-answer, 401 and 404 on the chat, an unreadable event, a page that is no API.
// Nothing here reaches beyond 127.0.0.1.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTest>
#include <QTimer>
#include <functional>

#include "../cli/serve_test_support.h"
#include "ui/controllers/chat_controller.h"
#include "ui/controllers/model_controller.h"
#include "ui/models/message_model.h"
#include "ui/models/stats_model.h"
#include "ui/widgets/context_indicator.h"
#include "ui/widgets/dashboard.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/model_picker.h"
#include "ui/widgets/remote_model_dialog.h"
#include "ui/widgets/settings_dialog.h"
#include "ui/worker/remote_api.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

const QString kPocket = QStringLiteral(TANDEM_DEFAULT_MODEL_SOURCE);
const QString kPocketName = QFileInfo(kPocket).fileName();
const QString kQuestion = QStringLiteral("What does serendipity mean?");
const QString kSecond = QStringLiteral("What does river mean?");

template <typename T>
T* byName(QWidget* parent, const QString& accessibleName) {
    for (T* w : parent->findChildren<T*>())
        if (w->accessibleName() == accessibleName) return w;
    return nullptr;
}

// A port nothing listens on now.
int freePort() {
    QTcpServer probe;
    if (!probe.listen(QHostAddress::LocalHost, 0)) return 0;
    return probe.serverPort();
}

QString local(int port) { return QStringLiteral("http://127.0.0.1:%1").arg(port); }

// A server that answers as we tell it: GET /v1/models lists "fake-model"; POST /v1/chat/completions does
// what `chat` says. HTTP/1.1 with "Connection: close" (the body ends with the connection). On this
// (the test's) thread; the app's requests come from its engine thread.
class FakeServer : public QTcpServer {
public:
    enum class Chat { Stream, DropMidStream, Status, Unreadable, NotAnApi };
    Chat chat = Chat::Stream;
    int chunks = 5;          // Stream: content deltas, then finish_reason, usage and [DONE]
    int intervalMs = 0;      // between chunks
    int dropAfter = 3;       // DropMidStream: chunks before the connection is closed
    int status = 500;        // Status: this status with `body`
    QByteArray body;
    bool sendUsage = true;
    // What was seen.
    QByteArray lastChatBody;
    QByteArray lastAuthorization;
    int chunksSent = 0;
    bool clientLeftEarly = false;  // the connection closed before the stream was complete

    FakeServer() { listen(QHostAddress::LocalHost, 0); }
    QString url() const { return local(serverPort()); }
    static QString chunkText(int i) { return QStringLiteral("word%1 ").arg(i); }

protected:
    void incomingConnection(qintptr handle) override {
        auto* socket = new QTcpSocket(this);
        socket->setSocketDescriptor(handle);
        auto buffer = std::make_shared<QByteArray>();
        connect(socket, &QTcpSocket::readyRead, socket, [this, socket, buffer] {
            *buffer += socket->readAll();
            const qsizetype end = buffer->indexOf("\r\n\r\n");
            if (end < 0) return;
            const QByteArray head = buffer->left(end);
            qsizetype length = 0;
            QByteArray auth;
            for (const QByteArray& line : head.split('\n')) {
                const QByteArray l = line.trimmed();
                if (l.toLower().startsWith("content-length:")) length = l.mid(15).trimmed().toLongLong();
                if (l.toLower().startsWith("authorization:")) auth = l.mid(14).trimmed();
            }
            if (buffer->size() < end + 4 + length) return;
            const QByteArray requestBody = buffer->mid(end + 4, length);
            buffer->clear();
            socket->disconnect(this);
            respond(socket, head.left(head.indexOf('\r')), auth, requestBody);
        });
        connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
    }

private:
    static QByteArray head(int status, const QByteArray& type) {
        return "HTTP/1.1 " + QByteArray::number(status) + (status == 200 ? " OK" : " Error") +
               "\r\nContent-Type: " + type + "\r\nConnection: close\r\n\r\n";
    }
    static QByteArray event(const QJsonObject& o) { return "data: " + QJsonDocument(o).toJson(QJsonDocument::Compact) + "\n\n"; }
    static QJsonObject delta(const QJsonObject& d, const QJsonValue& finish = QJsonValue::Null) {
        return QJsonObject{{"object", "chat.completion.chunk"},
                           {"model", "fake-model"},
                           {"choices", QJsonArray{QJsonObject{{"index", 0}, {"delta", d}, {"finish_reason", finish}}}}};
    }

    void respond(QTcpSocket* socket, const QByteArray& requestLine, const QByteArray& auth, const QByteArray& requestBody) {
        if (chat == Chat::NotAnApi) {
            socket->write(head(200, "text/html") + "<html><body>Welcome to nginx!</body></html>");
            socket->disconnectFromHost();
            return;
        }
        if (requestLine.startsWith("GET /v1/models")) {
            const QJsonObject list{{"object", "list"},
                                   {"data", QJsonArray{QJsonObject{{"id", "fake-model"}, {"object", "model"}, {"max_model_len", 2048}}}}};
            socket->write(head(200, "application/json") + QJsonDocument(list).toJson(QJsonDocument::Compact));
            socket->disconnectFromHost();
            return;
        }
        lastChatBody = requestBody;
        lastAuthorization = auth;
        chunksSent = 0;
        clientLeftEarly = false;
        if (chat == Chat::Status) {
            socket->write(head(status, "application/json") + body);
            socket->disconnectFromHost();
            return;
        }
        socket->write(head(200, "text/event-stream"));
        socket->write(event(delta({{"role", "assistant"}, {"content", ""}})));
        auto* timer = new QTimer(socket);
        timer->setInterval(intervalMs);
        connect(socket, &QTcpSocket::disconnected, this, [this, timer] {
            if (timer->isActive()) clientLeftEarly = true;
            timer->stop();
        });
        connect(timer, &QTimer::timeout, socket, [this, socket, timer] {
            if (socket->state() != QAbstractSocket::ConnectedState) return timer->stop();
            if (chat == Chat::DropMidStream && chunksSent == dropAfter) {
                timer->stop();
                socket->abort();  // the server went away mid-answer
                return;
            }
            if (chat == Chat::Unreadable && chunksSent == 2) {
                timer->stop();
                socket->write("data: {this is not json\n\n");
                socket->disconnectFromHost();
                return;
            }
            if (chunksSent < chunks) {
                socket->write(event(delta({{"content", chunkText(chunksSent)}})));
                ++chunksSent;
                return;
            }
            timer->stop();
            socket->write(event(delta(QJsonObject{}, "stop")));
            if (sendUsage)
                socket->write(event(QJsonObject{{"object", "chat.completion.chunk"},
                                                {"choices", QJsonArray{}},
                                                {"usage", QJsonObject{{"prompt_tokens", 11}, {"completion_tokens", chunks},
                                                                      {"total_tokens", 11 + chunks}}}}));
            socket->write("data: [DONE]\n\n");
            socket->disconnectFromHost();
        });
        timer->start();
    }
};

// The app with the tiny fixture as its local model, greedy answers of up to 256 tokens (as tandem-cli's).
std::unique_ptr<TandemApp> startApp(const QTemporaryDir& dir) {
    auto options = test::appOptions(dir);
    auto app = std::make_unique<TandemApp>(std::move(options));
    SamplingDefaults s = app->settings()->sampling();
    s.useModelRecommendation = false;
    s.sampling = {};  // temperature 0: greedy
    s.maxNewTokens = 256;
    app->settings()->setSampling(s);
    app->start();
    app->window()->show();
    return app;
}

// Drives Add a Server… (or, with `edit` a model's key, Edit Server) as a user does: `fill` edits the
// dialog, then OK.
bool throughDialog(MainWindow* window, const QString& edit, const std::function<void(RemoteModelDialog*)>& fill) {
    bool seen = false;
    QTimer::singleShot(0, window, [&] {
        auto* dialog = qobject_cast<RemoteModelDialog*>(QApplication::activeModalWidget());
        if (!dialog) return;
        seen = true;
        fill(dialog);
        if (dialog->isVisible()) dialog->accept();
        if (dialog->isVisible()) dialog->reject();  // refused: close it anyway, the test says why
    });
    if (!edit.isEmpty()) window->editRemoteModel(edit);
    else window->addRemoteModel();
    return seen;
}

void typeInto(RemoteModelDialog* dialog, const QString& name, const QString& url, const QString& key) {
    byName<QLineEdit>(dialog, "Name")->setText(name);
    byName<QLineEdit>(dialog, "Server address")->setText(url);
    byName<QLineEdit>(dialog, "API key")->setText(key);
}

// Presses Test Connection and waits for its answer; returns whether the server listed its models.
bool pressTest(RemoteModelDialog* dialog) {
    bool ok = false, done = false;
    auto c = QObject::connect(dialog, &RemoteModelDialog::tested, dialog, [&](bool listed) {
        ok = listed;
        done = true;
    });
    QTest::mouseClick(byName<QPushButton>(dialog, "Test connection"), Qt::LeftButton);
    const bool answered = QTest::qWaitFor([&] { return done; }, 30000);
    QObject::disconnect(c);
    return answered && ok;
}

const ChatMessage& lastMessage(TandemApp& app) { return app.messages()->message(app.messages()->rowCount() - 1); }

// Adds a model on a server straight into the settings and switches to it, as the picker does.
void useRemote(TandemApp& app, const RemoteEndpoint& e) {
    const QString id = app.settings()->saveRemoteModel(e);
    app.window()->chooseModel(remoteModelKey(id));
}

// Types and sends `text` (the answer starts at once) and waits for the answer to end.
QString sendAndWait(TandemApp& app, const QString& text) {
    test::typeAndSend(app, text);
    test::waitForIdle(app);
    return lastMessage(app).content;
}

}  // namespace

class RemoteModelTest : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        // Only 127.0.0.1 is spoken to: no proxy from the environment gets a say.
        qunsetenv("http_proxy");
        qunsetenv("https_proxy");
        qunsetenv("HTTP_PROXY");
        qunsetenv("HTTPS_PROXY");
        qunsetenv("all_proxy");
        qunsetenv("ALL_PROXY");
        QVERIFY2(QFileInfo::exists(kPocket + "/config.json"), qPrintable(kPocket));
    }

    // The protocol's pieces on their own.
    void urlsAndRequestBody() {
        QCOMPARE(remoteApiBase("http://h:8000"), QStringLiteral("http://h:8000/v1"));
        QCOMPARE(remoteApiBase(" http://h:8000/v1/ "), QStringLiteral("http://h:8000/v1"));
        QCOMPARE(remoteApiBase("https://api.example/openai/v1"), QStringLiteral("https://api.example/openai/v1"));
        QCOMPARE(remoteApiUrl("http://h:8000", "/models").toString(), QStringLiteral("http://h:8000/v1/models"));
        QCOMPARE(remoteServerName("http://10.0.0.5:8000/v1"), QStringLiteral("10.0.0.5:8000"));
        QVERIFY(remoteUrlProblem("http://127.0.0.1:8000").isEmpty());
        QVERIFY(!remoteUrlProblem("").isEmpty());
        QVERIFY(!remoteUrlProblem("127.0.0.1:8000").isEmpty());
        QVERIFY(!remoteUrlProblem("ftp://h/").isEmpty());
        QVERIFY(remoteKeyTravelsInClear("http://10.0.0.5:8000", "k"));
        QVERIFY(!remoteKeyTravelsInClear("http://127.0.0.1:8000", "k"));
        QVERIFY(!remoteKeyTravelsInClear("https://10.0.0.5", "k"));
        QVERIFY(!remoteKeyTravelsInClear("http://10.0.0.5", ""));

        GenerationRequest r;
        r.messages = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!", "thinking"}, {"user", "And?"}};
        r.options.maxNewTokens = 77;
        r.options.sampling.temperature = 0.6f;
        r.options.sampling.topP = 0.95f;
        r.options.sampling.topK = 20;
        r.options.sampling.seed = 0x1234567890ULL;
        r.stopStrings = {"END", ""};
        const QJsonObject body = QJsonDocument::fromJson(chatCompletionBody("m1", r)).object();
        QCOMPARE(body["model"].toString(), QStringLiteral("m1"));
        QCOMPARE(body["stream"].toBool(), true);
        QCOMPARE(body["stream_options"].toObject()["include_usage"].toBool(), true);
        QCOMPARE(body["max_tokens"].toInt(), 77);
        QCOMPARE(body["temperature"].toDouble(), double(0.6f));
        QCOMPARE(body["top_p"].toDouble(), double(0.95f));
        QCOMPARE(body["top_k"].toInt(), 20);
        QVERIFY(!body.contains("min_p") && !body.contains("repetition_penalty"));  // not set: not sent
        QCOMPARE(body["seed"].toInteger(), qint64(0x1234567890ULL & 0x7fffffff));
        QCOMPARE(body["stop"].toArray(), QJsonArray{"END"});
        const QJsonArray messages = body["messages"].toArray();
        QCOMPARE(messages.size(), 4);
        QCOMPARE(messages[2].toObject(), (QJsonObject{{"role", "assistant"}, {"content", "Hello!"}}));  // no reasoning sent back
        r.samplingFromServer = true;
        const QJsonObject server = QJsonDocument::fromJson(chatCompletionBody("m1", r)).object();
        QVERIFY(!server.contains("temperature") && !server.contains("top_p") && !server.contains("top_k"));
        QCOMPARE(server["max_tokens"].toInt(), 77);
        QVERIFY(server.contains("seed"));
    }

    void eventStreamAndChunks() {
        SseParser p;
        QList<QByteArray> events = p.feed("data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\"");
        QCOMPARE(events, QList<QByteArray>{"{\"a\":1}"});
        events = p.feed(":2}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]");
        QCOMPARE(events, (QList<QByteArray>{"{\"b\":2}", "line1\nline2"}));
        QCOMPARE(p.finish(), QList<QByteArray>{"[DONE]"});

        auto c = parseStreamChunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})");
        QVERIFY(c && c->content == "Hi" && c->reasoning.isEmpty() && c->finishReason.isEmpty());
        c = parseStreamChunk(R"({"choices":[{"delta":{"reasoning_content":"hmm","content":null}}]})");
        QVERIFY(c && c->reasoning == "hmm" && c->content.isEmpty());
        c = parseStreamChunk(R"({"choices":[{"delta":{"reasoning":"also"}}]})");
        QVERIFY(c && c->reasoning == "also");
        c = parseStreamChunk(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"prompt_tokens_details":{"cached_tokens":5}}})");
        QVERIFY(c && c->promptTokens == 12 && c->completionTokens == 34 && c->cachedTokens == 5);
        c = parseStreamChunk(R"({"error":{"message":"the generation failed: out of memory","type":"server_error"}})");
        QVERIFY(c && c->error.contains("out of memory"));
        QVERIFY(parseStreamChunk("[DONE]")->done);
        QVERIFY(!parseStreamChunk("{not json"));
        QVERIFY(!parseStreamChunk("[1,2]"));

        QCOMPARE(serverErrorMessage(R"({"error":{"message":"Invalid API key"}})"), QStringLiteral("Invalid API key"));
        QCOMPARE(serverErrorMessage(R"({"object":"error","message":"The model `x` does not exist.","code":404})"),
                 QStringLiteral("The model `x` does not exist."));
        QCOMPARE(serverErrorMessage(R"({"detail":"Not Found"})"), QStringLiteral("Not Found"));
        QCOMPARE(serverErrorMessage("<html>"), QString());
        const auto list = parseModelList(R"({"object":"list","data":[{"id":"a","max_model_len":4096},{"id":"b","context_length":512}]})");
        QVERIFY(list);
        QCOMPARE(list->ids, (QStringList{"a", "b"}));
        QCOMPARE(list->contextLengths["a"], 4096);
        QCOMPARE(list->contextLengths["b"], 512);
        QVERIFY(!parseModelList("<html></html>"));
        QVERIFY(!parseModelList(R"({"models":[]})"));
    }

    // Added through the dialog as a user does, then a conversation with it: the same answers as tandem-cli
    // chat and the server itself give, streamed into the chat; the dashboard shows the server's speed.
    void chatsWithOurOwnServe() {
        QTemporaryDir tmp;
        test::Serve serve({"--model", kPocket}, tmp.filePath("serve.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        QVERIFY(!app->model()->summary().remote);

        QStringList listed;
        QString status;
        QLineEdit::EchoMode echo = QLineEdit::Normal;
        QVERIFY(throughDialog(app->window(), {}, [&](RemoteModelDialog* dialog) {
            typeInto(dialog, "Pocket over HTTP", local(serve.port()), "");
            echo = byName<QLineEdit>(dialog, "API key")->echoMode();
            // Enter with no model chosen yet tests the connection rather than closing the dialog.
            QTest::keyClick(byName<QLineEdit>(dialog, "Server address"), Qt::Key_Return);
            QVERIFY(dialog->isVisible());
            QVERIFY(QTest::qWaitFor([&] { return !dialog->isTesting(); }, 30000));
            listed = dialog->listedModels();
            status = dialog->statusText();
        }));
        QCOMPARE(echo, QLineEdit::Password);  // the key is never shown
        QCOMPARE(listed, QStringList{kPocketName});
        QVERIFY2(status.startsWith("Connected") && status.contains(kPocketName), qPrintable(status));
        QVERIFY(test::waitForModel(*app));
        const ModelSummary& s = app->model()->summary();
        QVERIFY(s.remote);
        QCOMPARE(s.name, QStringLiteral("Pocket over HTTP"));
        QCOMPARE(s.remoteModel, kPocketName);
        QCOMPARE(s.remoteUrl, local(serve.port()) + "/v1");
        QVERIFY(s.contextLength > 0);  // from the server's /v1/models
        QVERIFY(isRemoteModelKey(app->settings()->engine().modelDir));  // the model of the next start
        {
            // Settings' Model folder shows its name, and gives its key back untouched.
            SettingsDialog settings(SettingsValues::read(*app->settings()), {});
            QVERIFY(byName<QLineEdit>(&settings, "Model folder")->text().startsWith("Pocket over HTTP (on a server"));
            QCOMPARE(settings.values().engine.modelDir, app->settings()->engine().modelDir);
        }
        QCOMPARE(app->window()->modelPicker()->currentText().trimmed(), QStringLiteral("Pocket over HTTP"));
        QVERIFY(app->window()->modelStatusText().contains("on 127.0.0.1"));
        // The worker's count comes back queued.
        QTRY_VERIFY2_WITH_TIMEOUT(app->window()->contextIndicator()->text().contains("counted by the server"),
                                  qPrintable(app->window()->contextIndicator()->text()), 10000);

        // The answer, streamed into the chat, is tandem-cli chat's greedy answer.
        int pieces = 0;
        QString streamed;
        connect(app->messages(), &QAbstractItemModel::dataChanged, this, [&] {
            if (app->chat()->isGenerating() && app->messages()->rowCount() > 0) {
                const QString now = lastMessage(*app).content;
                if (now != streamed) ++pieces;
                streamed = now;
            }
        });
        const QString cli = QString::fromStdString(test::cliAnswer(kPocket, kQuestion.toStdString(), 256));
        QVERIFY2(!cli.isEmpty() && !cli.startsWith("(tandem-cli chat failed"), qPrintable(cli));
        QCOMPARE(sendAndWait(*app, kQuestion), cli);
        QCOMPARE(toString(lastMessage(*app).state), toString(MessageState::Complete));
        QCOMPARE(lastMessage(*app).model, QStringLiteral("Pocket over HTTP"));
        QVERIFY(pieces >= 1);
        QVERIFY(lastMessage(*app).metrics.generatedTokens > 0);
        QVERIFY(lastMessage(*app).metrics.tokensPerSecond > 0);
        // The usage of the last chunk counted the context.
        QVERIFY(app->chat()->contextUsed() > lastMessage(*app).metrics.generatedTokens);

        // The dashboard: the server's speed; this computer's CPU and GPU are not what answered.
        QVERIFY(app->stats()->latestDecodeRate() > 0);
        app->stats()->addSample(SystemSample{});
        Dashboard* dashboard = app->window()->dashboard();
        QVERIFY2(dashboard->decodeReading().contains("tokens/s (remote"), qPrintable(dashboard->decodeReading()));
        QVERIFY2(dashboard->cpuReading().contains("not applicable (remote)"), qPrintable(dashboard->cpuReading()));
        QVERIFY2(dashboard->gpuReading().contains("not applicable (remote)"), qPrintable(dashboard->gpuReading()));
        QVERIFY2(dashboard->layerSplitReading().contains("Not applicable"), qPrintable(dashboard->layerSplitReading()));

        // A second turn sends the whole conversation: the answer is the server's own to the same messages.
        const QString second = sendAndWait(*app, kSecond);
        QCOMPARE(toString(lastMessage(*app).state), toString(MessageState::Complete));
        QNetworkAccessManager http;
        QNetworkRequest request(QUrl(local(serve.port()) + "/v1/chat/completions"));
        request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
        const QJsonObject same{{"model", kPocketName},
                               {"messages", QJsonArray{QJsonObject{{"role", "user"}, {"content", kQuestion}},
                                                       QJsonObject{{"role", "assistant"}, {"content", cli}},
                                                       QJsonObject{{"role", "user"}, {"content", kSecond}}}},
                               {"temperature", 0},
                               {"max_tokens", 256}};
        QNetworkReply* reply = http.post(request, QJsonDocument(same).toJson());
        QVERIFY(QTest::qWaitFor([&] { return reply->isFinished(); }, 60000));
        const QJsonObject whole = QJsonDocument::fromJson(reply->readAll()).object();
        reply->deleteLater();
        QCOMPARE(second, whole["choices"].toArray()[0].toObject()["message"].toObject()["content"].toString());

        // Branches work the same: regenerating gives a second version (greedy: the same text).
        app->chat()->regenerate();
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(lastMessage(*app).versions, 2);
        QCOMPARE(lastMessage(*app).content, second);

        // The server goes away: the next message fails with the reason, the conversation stays whole.
        QCOMPARE(serve.stop(), 0);
        const int rows = app->messages()->rowCount();
        sendAndWait(*app, "Still there?");
        QCOMPARE(app->messages()->rowCount(), rows + 2);
        QCOMPARE(toString(lastMessage(*app).state), toString(MessageState::Failed));
        QVERIFY2(lastMessage(*app).error.contains("Nothing answers at 127.0.0.1:" + QString::number(serve.port())),
                 qPrintable(lastMessage(*app).error));
        QCOMPARE(app->messages()->message(1).content, cli);
        QVERIFY(app->model()->isReady());

        // Back to the local model, and the picker still offers the server.
        QVERIFY(app->window()->modelPicker()->modelNames().contains("Pocket over HTTP"));
        app->window()->chooseModel(app->model()->embeddedModelDir());
        QVERIFY(test::waitForModel(*app));
        QVERIFY(!app->model()->summary().remote);
        app->stats()->addSample(SystemSample{});
        QVERIFY(!dashboard->cpuReading().contains("remote"));
    }

    // A model that reasons: its reasoning_content deltas are the answer's reasoning, as a local model's
    // thinking is.
    void reasoningComesApart() {
        const QString model = test::fixturePath("tiny-deepseekv3-fp8");
        QTemporaryDir tmp;
        test::Serve serve({"--model", model}, tmp.filePath("serve.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        SamplingDefaults s = app->settings()->sampling();
        s.maxNewTokens = 20;
        app->settings()->setSampling(s);
        useRemote(*app, {{}, "reasoner", local(serve.port()) + "/v1", {}, "tiny-deepseekv3-fp8"});
        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->summary().remote);
        sendAndWait(*app, "hi");
        const ChatMessage& m = lastMessage(*app);
        QCOMPARE(toString(m.state), toString(MessageState::Complete));
        QVERIFY(!m.reasoning.isEmpty());
        QCOMPARE(m.reasoning, QString::fromStdString(test::cliAnswer(model, "hi", 20)));  // as tst_serve_cli checks it
    }

    // Add a Server's Test Connection: each way to get it wrong says what is wrong.
    void testConnectionSaysWhatIsWrong() {
        QTemporaryDir tmp;
        test::Serve serve({"--model", kPocket, "--api-key", "s3cret"}, tmp.filePath("key.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        FakeServer page;
        page.chat = FakeServer::Chat::NotAnApi;
        const int nothing = freePort();

        RemoteModelDialog dialog(RemoteEndpoint{});
        dialog.show();
        const auto tryWith = [&](const QString& url, const QString& key) {
            typeInto(&dialog, "x", url, key);
            const bool ok = pressTest(&dialog);
            return std::make_pair(ok, dialog.statusText());
        };
        auto [ok, text] = tryWith(local(nothing), "");
        QVERIFY(!ok);
        QVERIFY2(text.contains(QStringLiteral("Nothing answers at 127.0.0.1:%1 (connection refused)").arg(nothing)), qPrintable(text));
        std::tie(ok, text) = tryWith("127.0.0.1:8000", "");
        QVERIFY(!ok);
        QVERIFY2(text.contains("http://"), qPrintable(text));
        std::tie(ok, text) = tryWith(page.url(), "");
        QVERIFY(!ok);
        QVERIFY2(text.contains("not as an OpenAI-compatible server does") && text.contains("nginx"), qPrintable(text));
        std::tie(ok, text) = tryWith(local(serve.port()) + "/api", "");
        QVERIFY(!ok);
        QVERIFY2(text.contains("does not look like an OpenAI-compatible server") && text.contains("404"), qPrintable(text));
        std::tie(ok, text) = tryWith(local(serve.port()), "");
        QVERIFY(!ok);
        QVERIFY2(text.contains("needs an API key") && text.contains("401"), qPrintable(text));
        std::tie(ok, text) = tryWith(local(serve.port()), "wrong");
        QVERIFY(!ok);
        QVERIFY2(text.contains("did not accept the API key"), qPrintable(text));
        std::tie(ok, text) = tryWith(local(serve.port()), "s3cret");
        QVERIFY2(ok, qPrintable(text));
        QCOMPARE(dialog.listedModels(), QStringList{kPocketName});
        QCOMPARE(dialog.endpoint().model, kPocketName);
        // Over plain http to another computer the key would travel in clear: the dialog says so.
        typeInto(&dialog, "x", "http://192.0.2.1:8000", "s3cret");
        QLabel* warning = nullptr;
        for (QLabel* l : dialog.findChildren<QLabel*>())
            if (l->text().contains("unencrypted")) warning = l;
        QVERIFY(warning && warning->isVisibleTo(&dialog));
    }

    // A model on a server whose key is wrong does not load: the app says why and goes back to the model
    // it had; the conversation is untouched. With the right key it answers.
    void wrongKeyKeepsTheModelInUse() {
        QTemporaryDir tmp;
        test::Serve serve({"--model", kPocket, "--api-key", "s3cret"}, tmp.filePath("key.log"));
        QVERIFY2(serve.port() > 0, qPrintable(serve.log()));
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        SamplingDefaults s = app->settings()->sampling();
        s.maxNewTokens = 8;
        app->settings()->setSampling(s);
        sendAndWait(*app, "Hello");
        QCOMPARE(app->messages()->rowCount(), 2);
        const QString localDir = app->model()->summary().dir;

        QSignalSpy failed(app->model(), &ModelController::switchFailed);
        useRemote(*app, {{}, "locked", local(serve.port()), "wrong", kPocketName});
        QVERIFY(failed.wait(30000));
        const QString message = failed.first().first().toString();
        QVERIFY2(message.contains("Could not use locked") && message.contains("did not accept the API key") &&
                     message.contains("went back to"),
                 qPrintable(message));
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(app->model()->summary().dir, localDir);
        QCOMPARE(app->messages()->rowCount(), 2);

        // File ▸ Edit Server ▸ locked: the key fixed there (typed masked), saved, the server is used.
        const RemoteEndpoint saved = app->settings()->remoteModels().first();
        QLineEdit::EchoMode echo = QLineEdit::Normal;
        QString keyShown;
        QVERIFY(throughDialog(app->window(), remoteModelKey(saved.id), [&](RemoteModelDialog* dialog) {
            auto* key = byName<QLineEdit>(dialog, "API key");
            echo = key->echoMode();
            keyShown = key->displayText();
            key->setText("s3cret");
        }));
        QCOMPARE(echo, QLineEdit::Password);
        QVERIFY(!keyShown.contains("wrong"));
        QCOMPARE(app->settings()->remoteModel(saved.id).apiKey, QStringLiteral("s3cret"));
        QVERIFY(test::waitForModel(*app));
        QVERIFY(app->model()->summary().remote);
        QVERIFY(!sendAndWait(*app, "Hello again").isEmpty());
        QCOMPARE(toString(lastMessage(*app).state), toString(MessageState::Complete));
        QCOMPARE(app->messages()->rowCount(), 4);
    }

    // Stop mid-stream: the request is cut at once, the partial answer stays (state stopped).
    void stopKeepsThePartialAnswer() {
        FakeServer fake;
        fake.chunks = 400;
        fake.intervalMs = 20;
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        useRemote(*app, {{}, "slow", fake.url(), "k3y", "fake-model"});
        QVERIFY(test::waitForModel(*app));
        QCOMPARE(app->model()->summary().contextLength, 2048);  // vLLM's max_model_len
        test::typeAndSend(*app, "Tell me a long story");
        QVERIFY(QTest::qWaitFor([&] { return app->messages()->rowCount() == 2 && lastMessage(*app).content.size() > 30; }, 30000));
        QVERIFY(app->chat()->isGenerating());
        // What the app sent: the conversation and the app's sampling, the key as a bearer token.
        const QJsonObject sent = QJsonDocument::fromJson(fake.lastChatBody).object();
        QCOMPARE(sent["model"].toString(), QStringLiteral("fake-model"));
        QCOMPARE(sent["temperature"].toDouble(), 0.0);
        QCOMPARE(sent["top_p"].toDouble(), 1.0);
        QCOMPARE(sent["max_tokens"].toInt(), 256);
        QVERIFY(sent.contains("seed"));
        QCOMPARE(sent["messages"].toArray().last().toObject()["content"].toString(), QStringLiteral("Tell me a long story"));
        QCOMPARE(fake.lastAuthorization, QByteArray("Bearer k3y"));

        app->window()->stopAction()->trigger();
        QVERIFY(test::waitForIdle(*app));
        const ChatMessage& m = lastMessage(*app);
        QCOMPARE(toString(m.state), toString(MessageState::Stopped));
        QVERIFY(m.content.size() > 30);
        QVERIFY(m.content.startsWith(FakeServer::chunkText(0) + FakeServer::chunkText(1)));
        QVERIFY(QTest::qWaitFor([&] { return fake.clientLeftEarly; }, 10000));  // the request was aborted
        QVERIFY(fake.chunksSent < fake.chunks);
        QVERIFY(app->stats()->latestDecodeRate() > 0);
        // Kept in the store as it is shown.
        const QList<ChatMessage> stored = app->store()->messages(app->chat()->currentConversationId());
        QCOMPARE(stored.last().content, m.content);
        QCOMPARE(toString(stored.last().state), toString(MessageState::Stopped));

        // A whole answer, and a server without usage: the tokens are the deltas counted.
        fake.chunks = 6;
        fake.intervalMs = 5;
        fake.sendUsage = false;
        QString whole;
        for (int i = 0; i < 6; ++i) whole += FakeServer::chunkText(i);
        QCOMPARE(sendAndWait(*app, "Short one"), whole);
        QCOMPARE(lastMessage(*app).metrics.generatedTokens, 6);
        QVERIFY(lastMessage(*app).metrics.tokensPerSecond > 0);
    }

    // What a server can do wrong mid-answer or on the chat call: each is a clear failure in the chat,
    // the text that arrived is kept, and the conversation goes on.
    void serverFailuresAreClear() {
        FakeServer fake;
        QTemporaryDir dir;
        auto app = startApp(dir);
        QVERIFY(test::waitForModel(*app));
        useRemote(*app, {{}, "flaky", fake.url(), "k3y", "fake-model"});
        QVERIFY(test::waitForModel(*app));

        // The connection drops after three chunks.
        fake.chat = FakeServer::Chat::DropMidStream;
        fake.intervalMs = 10;
        sendAndWait(*app, "one");
        ChatMessage m = lastMessage(*app);
        QCOMPARE(toString(m.state), toString(MessageState::Failed));
        QCOMPARE(m.content, FakeServer::chunkText(0) + FakeServer::chunkText(1) + FakeServer::chunkText(2));
        QVERIFY2(m.error.contains("before the answer was complete") && m.error.contains("kept"), qPrintable(m.error));

        // 401 on the chat call (a key revoked since).
        fake.chat = FakeServer::Chat::Status;
        fake.status = 401;
        fake.body = R"({"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}})";
        sendAndWait(*app, "two");
        m = lastMessage(*app);
        QCOMPARE(toString(m.state), toString(MessageState::Failed));
        QVERIFY2(m.error.contains("did not accept the API key (HTTP 401)") && m.error.contains("Invalid API key"), qPrintable(m.error));

        // 404: the model is gone from the server (vLLM's error shape).
        fake.status = 404;
        fake.body = R"({"object":"error","message":"The model `fake-model` does not exist.","type":"NotFoundError","code":404})";
        sendAndWait(*app, "three");
        m = lastMessage(*app);
        QVERIFY2(m.error.contains("has no model “fake-model”") && m.error.contains("does not exist"), qPrintable(m.error));

        // 500 with a message.
        fake.status = 500;
        fake.body = R"({"error":{"message":"CUDA out of memory"}})";
        sendAndWait(*app, "four");
        QVERIFY2(lastMessage(*app).error.contains("failed (HTTP 500)") && lastMessage(*app).error.contains("CUDA out of memory"),
                 qPrintable(lastMessage(*app).error));

        // An event that is not JSON.
        fake.chat = FakeServer::Chat::Unreadable;
        sendAndWait(*app, "five");
        m = lastMessage(*app);
        QCOMPARE(toString(m.state), toString(MessageState::Failed));
        QCOMPARE(m.content, FakeServer::chunkText(0) + FakeServer::chunkText(1));
        QVERIFY2(m.error.contains("cannot read") && m.error.contains("this is not json"), qPrintable(m.error));

        // A page that is no API.
        fake.chat = FakeServer::Chat::NotAnApi;
        sendAndWait(*app, "six");
        QVERIFY2(lastMessage(*app).error.contains("OpenAI-compatible"), qPrintable(lastMessage(*app).error));

        // And then it works again; all twelve questions and answers are there.
        fake.chat = FakeServer::Chat::Stream;
        fake.chunks = 2;
        QCOMPARE(sendAndWait(*app, "seven"), FakeServer::chunkText(0) + FakeServer::chunkText(1));
        QCOMPARE(app->messages()->rowCount(), 14);
        QVERIFY(app->model()->isReady());
    }
};

QTEST_MAIN(RemoteModelTest)
#include "tst_remote_model.moc"
