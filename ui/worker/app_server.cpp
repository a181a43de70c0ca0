#include "ui/worker/app_server.h"

#include <QCoreApplication>
#include <QHostAddress>
#include <QTcpServer>
#include <chrono>

#if TANDEM_APP_SERVER
#include <atomic>
#include <csignal>
#include <deque>
#include <mutex>

#include "server/api_error.h"
#include "server/generation_queue.h"
#include "server/generation_scheduler.h"
#include "server/model_text.h"
#include "server/openai_server.h"
#include "tandem/error.h"
#endif

namespace tandem::ui {
namespace {

QString tr(const char* text) { return QCoreApplication::translate("AppServer", text); }

// Why binding failed, in words: the port is taken, or the address is not this machine's.
QString bindProblem(const QString& host, int port) {
    QTcpServer probe;
    const QHostAddress address(host == QLatin1String("localhost") ? QStringLiteral("127.0.0.1") : host);
    if (!address.isNull() && !probe.listen(address, static_cast<quint16>(port))) {
        if (probe.serverError() == QAbstractSocket::AddressInUseError)
            return tr("Port %1 is in use by another program: choose another port in Settings ▸ Server.").arg(port);
        if (probe.serverError() == QAbstractSocket::SocketAccessError)
            return tr("Port %1 needs administrator rights: choose a port above 1023 in Settings ▸ Server.").arg(port);
        return tr("Cannot listen on %1 port %2: %3.").arg(host).arg(port).arg(probe.errorString());
    }
    return tr("Cannot listen on %1 port %2: the port may be in use, or the address is not one of this computer's.")
        .arg(host)
        .arg(port);
}

}  // namespace

#if TANDEM_APP_SERVER

// What the server keeps on a model between its requests (LoadedModel::serverState): a scheduler with its
// kept sessions, made by the queue numbered `owner` (a server started again makes its own).
class AppServerState {
public:
    AppServerState(tandem::Engine& engine, std::shared_ptr<server::ModelText> text, quint64 owner, int batch, int conversations)
        : owner(owner), text(std::move(text)),
          scheduler(engine, *this->text, conversations, batch, server::GenerationQueue::defaultPrefillChunk(batch)) {}

    // On the CPU path four generations decode together, as tandem-cli serve's default; two conversations'
    // caches are kept between requests (serve keeps four): each KV cache grows in RAM with its context,
    // beside the chat's own, and they are let go when the server stops. On the GPU path the plan's reserved
    // sessions beyond the chat's (Settings ▸ Server, EngineSettings::serverGpuBatch) are the batch and the
    // conversations kept alike, so the sessions never outnumber what was reserved.
    static constexpr int kBatch = 4;
    static constexpr int kConversations = 2;

    const quint64 owner;
    const std::shared_ptr<server::ModelText> text;  // the scheduler's, so declared before it
    server::GenerationScheduler scheduler;
};

// The server's line of requests, run on the engine thread: each submit posts one task. On the CPU path
// (the model gives its engine) a task runs the requests waiting then, and those that come while they run,
// together through the model's AppServerState (sessions of the server's own: the chat's cache is left
// alone), until none runs; at most kDrainAdmissions requests a task, so that the chat's next answer is
// not held up for ever by a busy server. So does the GPU path where its plan reserved sessions for the server
// (tandem::ModelInfo::gpuSessions above 1). Otherwise (the GPU path, whose plan holds one session's KV cache) a
// task takes the first request waiting and answers it through the chat's session. Tasks hold the queue
// (and, through it, the model's text) alive, so a task that runs after the server stopped finds the queue
// closed and does nothing.
class AppServer::Queue : public server::JobQueue, public std::enable_shared_from_this<AppServer::Queue> {
public:
    Queue(EngineWorker* worker, quint64 serial, std::shared_ptr<server::ModelText> text)
        : worker_(worker), serial_(serial), text_(std::move(text)) {}

    static constexpr int kDrainAdmissions = 16;

    bool submit(std::shared_ptr<server::GenerationJob> job, int limit) override {
        const std::lock_guard lock(mutex_);
        if (closed_) throw server::ApiError(503, closedReason_, "", "model_unavailable");
        if (waitingLocked() + static_cast<int>(running_.size()) >= limit) return false;
        waiting_.push_back(std::move(job));
        // Posted under the lock: once close() has run, nothing more reaches the worker.
        worker_->post([self = shared_from_this()](LoadedModel* model, quint64 serial) { self->runNext(model, serial); });
        return true;
    }
    int waiting() const override {
        const std::lock_guard lock(mutex_);
        return waitingLocked();
    }
    bool running() const override {
        const std::lock_guard lock(mutex_);
        return !running_.empty();
    }
    int runningCount() const override {
        const std::lock_guard lock(mutex_);
        return static_cast<int>(running_.size());
    }
    DecodeSteps decodeSteps() const override {
        const std::lock_guard lock(mutex_);
        return steps_;
    }
    PrefillChunks prefillChunks() const override {
        const std::lock_guard lock(mutex_);
        return prefills_;
    }
    void stop() override { close("the server is stopping"); }

    // Ends the line: waiting requests end now with `reason`, the running ones at their next token; the
    // sessions it kept on the model are let go.
    void close(const std::string& reason) {
        const std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        closedReason_ = reason;
        for (auto& job : waiting_) {
            fail(*job, reason);
            job->finish();
        }
        waiting_.clear();
        for (const auto& job : running_) job->cancel();
        worker_->post([owner = id_, serial = serial_](LoadedModel* model, quint64 loaded) {
            if (model && loaded == serial && model->serverState() && model->serverState()->owner == owner)
                model->setServerState(nullptr);
        });
    }

private:
    static quint64 nextId() {
        static std::atomic<quint64> last{0};
        return ++last;
    }

    static void fail(server::GenerationJob& job, const std::string& reason) {
        job.error = reason;
        job.errorStatus = 503;
        job.errorCode = "model_unavailable";
    }

    int waitingLocked() const {
        int n = 0;
        for (const auto& job : waiting_) n += job->cancelled() ? 0 : 1;
        return n;
    }

    // On the engine thread, between (or instead of) the chat's answers.
    void runNext(LoadedModel* model, quint64 serial) {
        const bool current = model && serial == serial_;
        const bool cpu = current && model->info().device == "CPU";
        // The GPU's sessions beyond the chat's (tandem::ModelInfo::gpuSessions: what the plan reserved).
        const int reserved = current && !cpu ? model->info().gpuSessions - 1 : 0;
        tandem::Engine* engine = current && (cpu || reserved > 1) ? model->engine() : nullptr;
        if (engine)
            runTogether(*model, *engine, cpu ? AppServerState::kBatch : reserved, cpu ? AppServerState::kConversations : reserved);
        else
            runOne(model, serial);
    }

    void runTogether(LoadedModel& model, tandem::Engine& engine, int batch, int conversations) {
        std::shared_ptr<AppServerState> state = model.serverState();
        if (!state || state->owner != id_) {
            state = std::make_shared<AppServerState>(engine, text_, id_, batch, conversations);
            model.setServerState(state);
        }
        server::GenerationScheduler& scheduler = state->scheduler;
        scheduler.setDeferral(model.deferredExperts());  // the slider's, as the chat's answers have
        // The queue may go before the state does: its hook is the drain's only.
        struct Unhook {
            server::GenerationScheduler& s;
            ~Unhook() { s.onEnd = nullptr; }
        } unhook{scheduler};
        scheduler.onEnd = [this](server::GenerationJob& job) {
            const std::lock_guard lock(mutex_);
            std::erase_if(running_, [&](const auto& j) { return j.get() == &job; });
            // Cut short because the model is going: an error, not an answer that merely ended early.
            if (closed_ && job.error.empty()) fail(job, closedReason_);
        };
        int admitted = 0;
        while (true) {
            std::shared_ptr<server::GenerationJob> job;
            {
                const std::lock_guard lock(mutex_);
                if (!waiting_.empty() && scheduler.canAdmit() && admitted < kDrainAdmissions) {
                    job = std::move(waiting_.front());
                    waiting_.pop_front();
                    running_.push_back(job);
                    ++admitted;
                }
            }
            if (job) scheduler.admit(std::move(job));
            if (!scheduler.busy()) {
                if (job) continue;  // it ended at once (cancelled): look for another
                break;
            }
            scheduler.turn();
            const std::lock_guard lock(mutex_);
            steps_ = scheduler.decodeSteps();
            prefills_ = scheduler.prefillChunks();
        }
    }

    void runOne(LoadedModel* model, quint64 serial) {
        std::shared_ptr<server::GenerationJob> job;
        {
            const std::lock_guard lock(mutex_);
            if (waiting_.empty()) return;  // closed meanwhile, or taken by a task before this one
            job = std::move(waiting_.front());
            waiting_.pop_front();
            if (job->cancelled()) {  // its client went away while it waited
                job->finish();
                return;
            }
            running_.push_back(job);
        }
        try {
            if (!model || serial != serial_) {
                fail(*job, "the model this request was made for is no longer loaded; send it again");
            } else {
                server::runGenerationJob(*job, text_->tokenizer(),
                                         [&](std::span<const int> prompt, const GenerateOptions& options,
                                             const std::function<bool(int)>& onToken) {
                                             return model->generate(prompt, options, onToken);
                                         });
            }
        } catch (const std::exception& e) {
            job->error = e.what();
        }
        {
            const std::lock_guard lock(mutex_);
            running_.clear();
            // Cut short because the model is going: an error, not an answer that merely ended early.
            if (closed_ && job->error.empty()) fail(*job, closedReason_);
        }
        job->finish();
    }

    EngineWorker* worker_;
    const quint64 serial_;
    const quint64 id_ = nextId();  // names the AppServerState it makes
    const std::shared_ptr<server::ModelText> text_;
    mutable std::mutex mutex_;
    std::deque<std::shared_ptr<server::GenerationJob>> waiting_;
    std::vector<std::shared_ptr<server::GenerationJob>> running_;
    DecodeSteps steps_;
    PrefillChunks prefills_;
    bool closed_ = false;
    std::string closedReason_;
};

bool AppServer::available() { return true; }

#else

class AppServer::Queue {};

bool AppServer::available() { return false; }

#endif

AppServer::AppServer(EngineWorker* worker, QObject* parent) : QObject(parent), worker_(worker) {}

AppServer::~AppServer() { stop(tr("Tandem is closing")); }

QString AppServer::start(const ModelSummary& model, const ServerAddress& address) {
    stop(tr("the server is restarting"));
#if TANDEM_APP_SERVER
    if (address.port < 1 || address.port > 65535) return tr("The port must be from 1 to 65535.");
    if (!server::isLoopbackHost(address.host.toStdString()) && address.apiKey.isEmpty())
        return tr("Serving on %1 lets other computers reach the model, so it needs an API key (Settings ▸ Server).")
            .arg(address.host);
    // A client that closes its connection must not end the app with SIGPIPE: the write fails instead
    // (Debian's cpp-httplib sends without MSG_NOSIGNAL).
    std::signal(SIGPIPE, SIG_IGN);
    std::shared_ptr<server::ModelText> text;
    try {
        text = std::make_shared<server::ModelText>(model.dir.toStdString(), model.modelType.toStdString());
    } catch (const std::exception& e) {
        return tr("Cannot serve %1: %2").arg(model.name, QString::fromStdString(e.what()));
    }
    tandem::ModelInfo info;
    info.modelType = model.modelType.toStdString();
    info.contextLength = model.contextLength;
    info.maxContextLength = model.maxContextLength;
    info.defaultSampling = model.recommendedSampling;
    server::ServerOptions options;
    options.host = address.host.toStdString();
    options.port = address.port;
    options.apiKey = address.apiKey.toStdString();
    options.modelName = model.name.toStdString();
    // Fewer than tandem-cli serve's: the app's server decodes at most four requests together on the CPU (up
    // to kMaxServerGpuBatch on the GPU, as Settings reserves).
    options.maxRequests = 16;
    auto queue = std::make_shared<Queue>(worker_, model.serial, text);
    auto httpServer = std::make_unique<server::OpenAiServer>(info, *text, options, queue);
    int port = 0;
    try {
        port = httpServer->bind();
    } catch (const std::exception&) {
        queue->close("the server did not start");
        return bindProblem(address.host, address.port);
    }
    text_ = std::move(text);
    queue_ = std::move(queue);
    server_ = std::move(httpServer);
    port_ = port;
    const QString shownHost = address.host.contains(QLatin1Char(':')) && !address.host.startsWith(QLatin1Char('['))
                                  ? QStringLiteral("[%1]").arg(address.host)
                                  : address.host;
    url_ = QStringLiteral("http://%1:%2/v1").arg(shownHost).arg(port);
    serving_ = true;
    thread_ = std::thread([this, s = server_.get()] {
        s->run();
        serving_ = false;
    });
    return {};
#else
    (void)model;
    (void)address;
    (void)worker_;
    return tr("This Tandem was built without its server (cpp-httplib was missing when it was built).");
#endif
}

void AppServer::stop(const QString& reason) {
#if TANDEM_APP_SERVER
    if (!server_) return;
    // Waiting and running requests end first, with the reason, and their clients are given a moment to
    // read it; then the connections close.
    queue_->close((reason.isEmpty() ? tr("the server was stopped") : reason).toStdString());
    server_->drain(std::chrono::milliseconds(2000));
    // stop() has no effect before the server's loop has started: repeat until the loop has ended.
    while (serving_) {
        server_->stop();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    thread_.join();
    server_.reset();
    queue_.reset();
    text_.reset();
    port_ = 0;
    url_.clear();
#else
    (void)reason;
#endif
}

}  // namespace tandem::ui
