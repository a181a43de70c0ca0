#include "ui/worker/engine_worker.h"

#include <QCoreApplication>
#include <QDir>
#include <QNetworkAccessManager>
#include <QLocale>
#include <QFileInfo>
#include <algorithm>
#include <cmath>
#include <new>

#include "tandem/convert.h"
#include "tandem/error.h"
#include "ui/text/prompt_fit.h"
#include "ui/worker/remote_answer.h"

namespace tandem::ui {

QString cpuExpectation(std::uint64_t bytesPerToken, double gbps) {
    if (bytesPerToken == 0) return {};
    if (gbps < 0) gbps = tandem::measureMemoryBandwidthGbps();
    if (gbps <= 0) return {};
    const double ceiling = gbps * 1e9 / static_cast<double>(bytesPerToken);
    const QLocale locale;
    const double bytes = static_cast<double>(bytesPerToken);
    const QString size = bytes >= 1e9   ? QCoreApplication::translate("Dashboard", "%1 GB").arg(locale.toString(bytes / 1e9, 'f', 2))
                         : bytes >= 1e7 ? QCoreApplication::translate("Dashboard", "%1 MB").arg(locale.toString(bytes / 1e6, 'f', 0))
                                        : QCoreApplication::translate("Dashboard", "%1 MB").arg(locale.toString(bytes / 1e6, 'f', 1));
    return QCoreApplication::translate("Dashboard",
                                       "On the CPU: each token reads %1 of weights, so this computer's memory (%2 GB/s) "
                                       "allows at most about %3 tokens/s; expect less in long conversations.")
        .arg(size, locale.toString(std::lround(gbps)), locale.toString(ceiling, 'f', ceiling < 10 ? 1 : 0));
}
namespace {

// The first text is shown at once; later text is gathered for this long, which is smooth to the eye
// and keeps a model producing thousands of tokens a second from flooding the UI thread.
constexpr qint64 kTextBatchMs = 40;
// How often decode speed is reported while an answer streams.
constexpr qint64 kLiveStatsMs = 250;

QString messageOf(const std::exception& e) {
    if (dynamic_cast<const std::bad_alloc*>(&e))
        return QStringLiteral("Out of memory. Close other programs, lower the context length in Settings, or "
                              "choose a smaller model.");
    return QString::fromStdString(e.what());
}

}  // namespace

EngineWorker::EngineWorker(ModelLoader loader, QObject* parent) : QObject(parent), loader_(std::move(loader)) {}

EngineWorker::~EngineWorker() = default;

void EngineWorker::loadModel(const LoadRequest& request) {
    emit modelLoading(request.modelDir);
    // Free the old model first: two large models rarely fit in memory together.
    formatter_.reset();
    model_.reset();
    ++serial_;
    requestedDeferral_ = -1;
    dropRemote(QStringLiteral("The model was changed before the answer was complete."));
    if (request.remote.isValid()) {
        loadRemote(request);
        return;
    }
    try {
        if (!QFileInfo(request.modelDir).isDir())
            throw Error(QStringLiteral("The model folder %1 does not exist.").arg(QDir::toNativeSeparators(request.modelDir)).toStdString());
        auto model = loader_(request);
        auto formatter = makeChatFormatter(request.modelDir, QString::fromStdString(model->info().modelType));
        formatter->setCancelFlag(&cancelRender_);
        model->setDeferredExperts(request.deferredExperts);
        const auto& info = model->info();
        summary_ = ModelSummary{};
        summary_.serial = serial_;
        summary_.dir = request.modelDir;
        summary_.name = QFileInfo(request.modelDir).fileName();
        summary_.modelType = QString::fromStdString(info.modelType);
        summary_.layers = info.numLayers;
        summary_.experts = info.numExperts;
        summary_.expertsPerToken = info.expertsPerToken;
        summary_.contextLength = info.contextLength;
        summary_.maxContextLength = info.maxContextLength;
        summary_.kvBytesPerPosition = info.kvBytesPerPosition;
        summary_.kvBytesPerPositionFloat32 = info.kvBytesPerPositionFloat32;
        summary_.kvBytesPerPositionInt8 = info.kvBytesPerPositionInt8;
        summary_.kvCache = QString::fromStdString(info.kvCache);
        summary_.kvCacheNotice = QString::fromStdString(info.kvCacheNotice);
        summary_.onGpu = info.device != "CPU";
        summary_.gpuDevice = info.gpuDevice;
        summary_.gpuSessions = std::max(1, info.gpuSessions);
        summary_.gpuSessionsNotice = QString::fromStdString(info.gpuSessionsNotice);
        summary_.threads = model->threads();
        summary_.weightBytes = info.weightBytes;
        summary_.recommendedSampling = info.defaultSampling;
        summary_.textHandling = formatter->description();
        summary_.store = info.store;
        summary_.storeNotice = QString::fromStdString(info.storeNotice);
        if (info.device != "CPU") {
            summary_.placement = QString::fromStdString(info.placement);
            for (const std::string& stage : info.gpuStages) summary_.gpuStages << QString::fromStdString(stage);
        }
        summary_.expertLayers = QString::fromStdString(info.expertLayers);
        summary_.cpuExpectation = cpuExpectation(info.cpuBytesPerToken);
        model_ = std::move(model);
        formatter_ = std::move(formatter);
    } catch (const std::exception& e) {
        emit modelLoadFailed(request.modelDir, messageOf(e));
        return;
    }
    emit modelLoaded(summary_);
    emit deferralApplied(model_->deferredExperts());
}

void EngineWorker::unloadModel() {
    dropRemote(QStringLiteral("The model was unloaded before the answer was complete."));
    formatter_.reset();
    model_.reset();
    ++serial_;
    emit modelUnloaded();
}

void EngineWorker::stop(quint64 requestId) {
    stoppedRequest_ = requestId;
    cancelRender_ = true;
    // A remote answer runs while this thread's event loop turns: the queued call reaches it at once.
    QMetaObject::invokeMethod(
        this,
        [this, requestId] {
            if (remoteAnswer_ && (requestId == kAnyRequest || remoteAnswer_->requestId() == requestId)) remoteAnswer_->stop();
        },
        Qt::QueuedConnection);
}

QNetworkAccessManager* EngineWorker::network() {
    if (!network_) network_ = new QNetworkAccessManager(this);
    return network_;
}

void EngineWorker::dropRemote(const QString& why) {
    if (remoteLister_) remoteLister_->deleteLater();
    remoteLister_ = nullptr;
    if (RemoteAnswer* answer = remoteAnswer_) {
        remoteAnswer_ = nullptr;
        answer->cancel(why);  // the chat hears of it through the answer's own failed()
        answer->deleteLater();
    }
    remote_ = {};
}

void EngineWorker::loadRemote(const LoadRequest& request) {
    const RemoteEndpoint endpoint = request.remote;
    const quint64 serial = serial_;
    auto* lister = new RemoteModelLister(network(), this);
    remoteLister_ = lister;
    connect(lister, &RemoteModelLister::failed, this, [this, lister, serial, dir = request.modelDir](const QString& message) {
        lister->deleteLater();
        if (serial != serial_) return;  // another load came since
        emit modelLoadFailed(dir, message);
    });
    connect(lister, &RemoteModelLister::listed, this, [this, lister, serial, endpoint, dir = request.modelDir](const RemoteModelList& list) {
        lister->deleteLater();
        if (serial != serial_) return;
        RemoteEndpoint used = endpoint;
        if (used.model.isEmpty()) used.model = list.ids.first();
        if (!list.ids.contains(used.model)) {
            QStringList shown = list.ids.mid(0, 5);
            if (list.ids.size() > shown.size()) shown << QStringLiteral("…");
            emit modelLoadFailed(dir, QStringLiteral("The server at %1 has no model “%2”; it lists %3. Choose one of them "
                                                     "(File ▸ Edit Server).")
                                          .arg(remoteServerName(used.baseUrl), used.model, shown.join(QStringLiteral(", "))));
            return;
        }
        summary_ = ModelSummary{};
        summary_.serial = serial_;
        summary_.dir = dir;
        summary_.name = used.name.isEmpty() ? used.model : used.name;
        summary_.remote = true;
        summary_.remoteUrl = remoteApiBase(used.baseUrl);
        summary_.remoteModel = used.model;
        summary_.contextLength = list.contextLengths.value(used.model, 0);
        summary_.maxContextLength = summary_.contextLength;
        summary_.textHandling = QStringLiteral("the server's own chat template");
        remote_ = used;
        emit modelLoaded(summary_);
        emit deferralApplied(0);
    });
    lister->start(endpoint);
}

void EngineWorker::generateRemote(const GenerationRequest& request) {
    const quint64 id = request.id;
    if (remoteAnswer_) {
        emit answerFailed(id, QStringLiteral("Another answer is still streaming from the server; wait for it or stop it."));
        return;
    }
    if (isStopped(id)) {  // stopped before it started
        AnswerStats stopped;
        stopped.contextLength = summary_.contextLength;
        stopped.stoppedByUser = true;
        stopped.promptCounted = false;
        emit answerFinished(id, stopped);
        return;
    }
    auto* answer = new RemoteAnswer(network(), remote_, request, summary_.contextLength, this);
    remoteAnswer_ = answer;
    const auto done = [this, answer] {
        if (remoteAnswer_ == answer) remoteAnswer_ = nullptr;
        answer->deleteLater();
    };
    connect(answer, &RemoteAnswer::textArrived, this,
            [this, id](const QString& text, const QString& reasoning) { emit answerTextArrived(id, text, reasoning); });
    connect(answer, &RemoteAnswer::liveStatsMeasured, this, &EngineWorker::liveStatsMeasured);
    connect(answer, &RemoteAnswer::finished, this, [this, id, done](const AnswerStats& stats) {
        done();
        emit answerFinished(id, stats);
    });
    connect(answer, &RemoteAnswer::failed, this, [this, id, done](const QString& message) {
        done();
        emit answerFailed(id, message);
    });
    emit answerStarted(id, 0);
    answer->start();
}

void EngineWorker::post(ModelTask task) {
    QMetaObject::invokeMethod(
        this, [this, task = std::move(task)] { task(model_.get(), serial_); }, Qt::QueuedConnection);
}

bool EngineWorker::isStopped(quint64 requestId) const {
    const quint64 stopped = stoppedRequest_;
    return stopped == requestId || stopped == kAnyRequest;
}

void EngineWorker::setDeferral(int experts) {
    requestedDeferral_ = std::max(0, experts);
    // When idle, the queued call applies it now; while generating, the token loop gets there first.
    QMetaObject::invokeMethod(this, &EngineWorker::applyRequestedDeferral, Qt::QueuedConnection);
}

void EngineWorker::applyRequestedDeferral() {
    const int requested = requestedDeferral_.exchange(-1);
    if (requested < 0 || !model_) return;
    model_->setDeferredExperts(requested);
    emit deferralApplied(model_->deferredExperts());
}

void EngineWorker::countTokens(quint64 requestId, const QList<PromptMessage>& messages, int promptBudget) {
    if (remote_.isValid()) {
        // The server's tokenizer counts; the indicator says so (-1) until an answer's usage tells.
        emit tokensCounted(requestId, -1, summary_.contextLength, 0);
        return;
    }
    if (!formatter_ || !model_) return;
    FittedPrompt fitted;
    cancelRender_ = false;
    try {
        fitted = fitPrompt(*formatter_, messages, promptBudget);
    } catch (const std::exception&) {
        // A template may refuse a conversation that is not complete yet (no user message, say);
        // the indicator keeps its last count until there is one it renders.
        return;
    }
    emit tokensCounted(requestId, fitted.tokens, model_->info().contextLength, fitted.omitted);
}

void EngineWorker::reportLive(const QElapsedTimer& decodeClock, int decodedTokens, bool force) {
    const qint64 now = decodeClock.elapsed();
    if (!force && now - lastLiveReportMs_ < kLiveStatsMs) return;
    // Speed over the tokens since the last report, so a change (deferral, a busy machine) shows at once.
    const qint64 spanMs = now - lastLiveReportMs_;
    const int spanTokens = decodedTokens - lastLiveReportTokens_;
    lastLiveReportMs_ = now;
    lastLiveReportTokens_ = decodedTokens;
    const EngineTelemetry telemetry = model_->telemetry();
    LiveEngineStats live;
    live.generatedTokens = decodedTokens;
    live.decodeTokensPerSecond = spanMs > 0 ? spanTokens * 1000.0 / static_cast<double>(spanMs) : 0.0;
    live.expertPoolBusy = telemetry.expertPoolBusy;
    live.gpuBusy = telemetry.gpuBusy;
    emit liveStatsMeasured(live);
}

// The turn itself (prompt, end of turn, text, reasoning, stop strings) is the engine's tandem::Chat::reply,
// as in tandem-cli; around it, the generator below does this thread's part: the context check, the user's
// stop, deferral changes, timing and live statistics.
void EngineWorker::generate(const GenerationRequest& request) {
    const quint64 id = request.id;
    if (remote_.isValid()) {
        generateRemote(request);
        return;
    }
    if (!model_ || !formatter_) {
        emit answerFailed(id, QStringLiteral("No model is loaded. Open a model folder first."));
        return;
    }
    TextDelta pending;
    cancelRender_ = isStopped(id);
    try {
        QElapsedTimer clock;
        clock.start();
        const int contextLength = model_->info().contextLength;
        AnswerStats result;
        result.contextLength = contextLength;
        int room = 0;
        bool limitedByRoom = false;
        bool ran = false;
        QElapsedTimer decodeClock;
        int tokens = 0;

        // The context policy leaves out earlier turns; what is left must still fit.
        const FittedPrompt fitted = fitPrompt(*formatter_, request.messages, request.promptBudget);
        result.omittedMessages = fitted.omitted;

        const AnswerGenerator runModel = [&](std::span<const int> prompt, const tandem::GenerateOptions& answerOptions,
                                             const std::function<bool(int)>& onToken) {
            const int promptTokens = static_cast<int>(prompt.size());
            room = contextLength - promptTokens;
            if (room < 1 && request.promptBudget > 0)
                throw Error(QStringLiteral("Your message takes %1 tokens, more than the %2 the context holds, even with "
                                           "the earlier messages left out. Shorten it or delete it, or raise the context "
                                           "length in Settings.")
                                .arg(promptTokens).arg(contextLength).toStdString());
            if (room < 1)
                throw Error(QStringLiteral("This conversation takes %1 tokens, more than the %2 the context holds. Start "
                                           "a new chat, or raise the context length in Settings.")
                                .arg(promptTokens).arg(contextLength).toStdString());
            tandem::GenerateOptions options = answerOptions;
            options.maxNewTokens = std::clamp(options.maxNewTokens, 1, room);
            limitedByRoom = options.maxNewTokens == room;
            emit answerStarted(id, promptTokens);
            applyRequestedDeferral();
            if (isStopped(id)) {
                tandem::GenerationStats none;
                none.promptTokens = promptTokens;
                return none;
            }
            ran = true;
            lastLiveReportMs_ = 0;
            lastLiveReportTokens_ = 1;  // the decode clock starts at the first token
            return model_->generate(prompt, options, [&](int token) {
                if (tokens++ == 0) {
                    result.timeToFirstTokenSeconds = static_cast<double>(clock.nsecsElapsed()) / 1e9;
                    decodeClock.start();
                }
                const bool more = onToken(token);
                reportLive(decodeClock, tokens, false);
                applyRequestedDeferral();
                return more && !isStopped(id);
            });
        };

        qint64 lastFlushMs = 0;
        bool shownAny = false;
        const auto flush = [&] {
            if (pending.isEmpty()) return;
            emit answerTextArrived(id, pending.answer, pending.reasoning);
            pending = {};
            shownAny = true;
        };
        const ChatAnswer answer =
            formatter_->answer(fitted.messages, request.options, request.stopStrings, runModel, [&](const TextDelta& text) {
                pending += text;
                // The first text shows at once; later text is gathered for a moment.
                if (!shownAny || clock.elapsed() - lastFlushMs >= kTextBatchMs) {
                    flush();
                    lastFlushMs = clock.elapsed();
                }
            });
        flush();
        if (tokens > 0) reportLive(decodeClock, tokens, true);

        const tandem::GenerationStats& stats = answer.stats;
        result.promptTokens = stats.promptTokens;
        result.reusedTokens = stats.reusedTokens;
        result.generatedTokens = stats.generatedTokens;
        result.decodeTokensPerSecond = stats.decodeTokensPerSecond();
        result.prefillTokensPerSecond = stats.prefillTokensPerSecond();
        result.stoppedAtEos = stats.stoppedAtEos;
        result.stoppedByUser = isStopped(id);
        result.stoppedByStopString = answer.stoppedByStopString;
        result.filledContext = !stats.stoppedAtEos && !result.stoppedByUser && !result.stoppedByStopString &&
                               limitedByRoom && stats.generatedTokens == room;
        if (stats.fellBackToCpu) result.gpuFailure = QString::fromStdString(model_->info().deviceNotice);
        if (ran) result.layerSplit = model_->telemetry().layerSplit;
        emit answerFinished(id, result);
    } catch (const std::exception& e) {
        if (!pending.isEmpty()) emit answerTextArrived(id, pending.answer, pending.reasoning);
        if (isStopped(id)) {
            // Stopped while the prompt was being made (the render was cancelled): an answer the user
            // stopped, not a failure.
            AnswerStats stopped;
            stopped.contextLength = model_->info().contextLength;
            stopped.stoppedByUser = true;
            emit answerFinished(id, stopped);
            return;
        }
        emit answerFailed(id, messageOf(e));
    }
}

}  // namespace tandem::ui
