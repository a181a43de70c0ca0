#pragma once
// The desktop app's OpenAI-compatible server (Settings ▸ Server, issue 27): app/server's OpenAiServer
// over the model the engine worker has loaded, never a second copy of it. The HTTP side runs on
// cpp-httplib's threads; each generation is a task on the engine thread (EngineWorker::post), in turn
// with the chat's answers, through the same LoadedModel and Session. A request whose model is unloaded or
// replaced, waiting or running, ends with a 503 error body (code "model_unavailable"), and new ones are
// refused with a 503 until the server is started on the next model.
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <thread>

#include "ui/worker/engine_worker.h"

namespace tandem::server {
class ModelText;
class OpenAiServer;
}  // namespace tandem::server

namespace tandem::ui {

struct ServerAddress {
    QString host = QStringLiteral("127.0.0.1");
    int port = 8080;
    QString apiKey;  // empty: none asked for (a loopback host only)
};

class AppServer : public QObject {
    Q_OBJECT
public:
    // Whether this build has the server (cpp-httplib was found when it was built).
    static bool available();

    explicit AppServer(EngineWorker* worker, QObject* parent = nullptr);
    // Stops the server; call before the engine thread goes.
    ~AppServer() override;

    // Serves `model`, the one the worker has loaded (its summary, as modelLoaded gave it), at `address`;
    // a server already running is stopped first. Returns empty once it listens, else why it cannot (the
    // port is in use, the address is not this machine's, a remote address without a key).
    QString start(const ModelSummary& model, const ServerAddress& address);
    // Stops accepting connections; requests waiting or running end with a 503 error that says `reason`.
    void stop(const QString& reason = {});

    bool isRunning() const { return server_ != nullptr; }
    int port() const { return port_; }
    // Where clients send requests: "http://127.0.0.1:8080/v1".
    QString url() const { return url_; }

private:
    class Queue;

    EngineWorker* worker_;
    std::shared_ptr<server::ModelText> text_;
    std::shared_ptr<Queue> queue_;
    std::unique_ptr<server::OpenAiServer> server_;
    std::thread thread_;
    std::atomic<bool> serving_{false};  // the HTTP thread is inside run()
    int port_ = 0;
    QString url_;
};

}  // namespace tandem::ui
