#pragma once
// Owns the model on the engine thread. The UI talks to it through queued signals and slots only; the
// two exceptions, stop() and setDeferral(), are thread-safe on purpose: they must reach an answer that
// is being generated, while this thread is busy inside the engine and runs no queued slot.
#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <atomic>
#include <functional>
#include <memory>

#include "ui/worker/engine_types.h"
#include "ui/worker/loaded_model.h"

class QNetworkAccessManager;

namespace tandem::ui {

class RemoteAnswer;
class RemoteModelLister;

// What a model on the CPU only can be expected to do: "On the CPU: each token reads 2.10 GB of weights, so
// this computer's memory (40 GB/s) allows at most about 19 tokens/s; ...", from the bytes a decode step
// reads (tandem::ModelInfo::cpuBytesPerToken) and the memory speed in GB/s (< 0: measured here, once).
// Empty when there is nothing to say (bytesPerToken 0: the model runs on the GPU).
QString cpuExpectation(std::uint64_t bytesPerToken, double gbps = -1);

class EngineWorker : public QObject {
    Q_OBJECT
public:
    static constexpr quint64 kAnyRequest = ~quint64{0};

    explicit EngineWorker(ModelLoader loader = loadEngineModel, QObject* parent = nullptr);
    ~EngineWorker() override;

    // Thread-safe. Runs `task` on the engine thread, in turn with the chat's requests (first come, first
    // served), with the model loaded then (null: none) and the serial of its load (ModelSummary::serial),
    // so a task made for one model can tell that another has replaced it. The app's server runs its
    // requests this way, on the model the chat uses.
    using ModelTask = std::function<void(LoadedModel* model, quint64 serial)>;
    void post(ModelTask task);

public slots:
    void loadModel(const tandem::ui::LoadRequest& request);
    void unloadModel();
    void generate(const tandem::ui::GenerationRequest& request);
    // How many tokens `messages` take as a prompt, for the context indicator: fitted to `promptBudget`
    // as GenerationRequest::promptBudget says, so it is what an answer would be sent.
    void countTokens(quint64 requestId, const QList<tandem::ui::PromptMessage>& messages, int promptBudget = 0);

    // Thread-safe. Stops answer `requestId` at its next token (or before it starts); kAnyRequest stops
    // whichever answer is running. A model on a server: its request is aborted, what arrived is kept.
    void stop(quint64 requestId);
    // Thread-safe. Deferred experts per token, applied before the next token (or at once when idle).
    void setDeferral(int experts);

signals:
    void modelLoading(const QString& dir);
    void modelLoaded(const tandem::ui::ModelSummary& summary);
    void modelLoadFailed(const QString& dir, const QString& message);
    void modelUnloaded();
    void answerStarted(quint64 requestId, int promptTokens);
    // New text of the answer since the last signal; batched so a fast model does not flood the UI.
    void answerTextArrived(quint64 requestId, const QString& answer, const QString& reasoning);
    void liveStatsMeasured(const tandem::ui::LiveEngineStats& stats);
    void answerFinished(quint64 requestId, const tandem::ui::AnswerStats& stats);
    void answerFailed(quint64 requestId, const QString& message);
    void tokensCounted(quint64 requestId, int tokens, int contextLength, int omittedMessages);
    // The deferral the engine now uses, read back from it.
    void deferralApplied(int experts);

private:
    // A model on a server (LoadRequest::remote): nothing is loaded here. Its "load" asks the server for
    // its models (GET /v1/models) and fails, with the reason, when it cannot be reached, refuses the key
    // or does not have the model; its answers are RemoteAnswers, which run while this thread's event loop
    // turns (so a stop or another load reaches them at once).
    void loadRemote(const LoadRequest& request);
    void generateRemote(const GenerationRequest& request);
    // Ends the remote answer in progress (the model is going) and forgets the remote model.
    void dropRemote(const QString& why);
    QNetworkAccessManager* network();
    void applyRequestedDeferral();
    void reportLive(const QElapsedTimer& decodeClock, int decodedTokens, bool force);
    bool isStopped(quint64 requestId) const;

    ModelLoader loader_;
    std::unique_ptr<LoadedModel> model_;
    std::unique_ptr<ChatFormatter> formatter_;
    ModelSummary summary_;
    quint64 serial_ = 0;  // counts loads and unloads (engine thread only)
    std::atomic<quint64> stoppedRequest_{0};
    // Ends a chat-template render in progress: a hostile template must not keep an answer (or the
    // shutdown) waiting for its render's limits.
    std::atomic<bool> cancelRender_{false};
    std::atomic<int> requestedDeferral_{-1};  // -1: nothing new to apply
    RemoteEndpoint remote_;      // the model on a server in use (isValid), once its load succeeded
    QNetworkAccessManager* network_ = nullptr;
    QPointer<RemoteModelLister> remoteLister_;
    QPointer<RemoteAnswer> remoteAnswer_;
    qint64 lastLiveReportMs_ = 0;
    int lastLiveReportTokens_ = 0;
};

}  // namespace tandem::ui
