#include "ui/controllers/model_controller.h"

#include <QDir>
#include <QFileInfo>

namespace tandem::ui {

ModelController::ModelController(EngineWorker* worker, AppSettings* settings, QString embeddedModelDir, QObject* parent,
                                 StoreVerifyFunction verify)
    : QObject(parent), worker_(worker), settings_(settings), embeddedModelDir_(std::move(embeddedModelDir)),
      verifier_(new StoreVerifier(std::move(verify), this)) {
    connect(this, &ModelController::loadRequested, worker_, &EngineWorker::loadModel);
    connect(this, &ModelController::unloadRequested, worker_, &EngineWorker::unloadModel);
    connect(verifier_, &StoreVerifier::progressed, this, [this](const QString& dir, double fraction) {
        if (dir != summary_.dir) return;
        verificationProgress_ = fraction;
        emit verificationProgressed(summary_.name, fraction);
    });
    connect(verifier_, &StoreVerifier::finished, this, &ModelController::onVerified);
    connect(verifier_, &StoreVerifier::failed, this, [this](const QString& dir, const QString& message) {
        if (dir != summary_.dir) return;
        emit verificationFailed(tr("Tandem could not check the files of %1: %2").arg(summary_.name, message));
    });
    connect(worker_, &EngineWorker::modelLoading, this, &ModelController::onLoading);
    connect(worker_, &EngineWorker::modelLoaded, this, &ModelController::onLoaded);
    connect(worker_, &EngineWorker::modelLoadFailed, this, &ModelController::onLoadFailed);
    connect(worker_, &EngineWorker::deferralApplied, this, [this](int experts) {
        deferral_ = experts;
        emit deferralChanged(experts);
    });
}

int ModelController::maxDeferral() const { return isReady() ? std::max(0, summary_.expertsPerToken - 1) : 0; }

bool ModelController::isEmbeddedModelReady() const {
    if (!isReady() || embeddedModelDir_.isEmpty()) return false;
    return QFileInfo(summary_.dir).canonicalFilePath() == QFileInfo(embeddedModelDir_).canonicalFilePath();
}

QString ModelController::configuredModelDir() const {
    const QString dir = settings_->engine().modelDir;
    return dir.isEmpty() ? embeddedModelDir_ : dir;
}

void ModelController::loadConfigured() {
    const QString dir = configuredModelDir();
    if (dir.isEmpty() || !QFileInfo::exists(dir)) {
        // Nothing to load is not a failure: the window offers to get a model instead of an error.
        lastError_ = dir.isEmpty() ? QString()
                                   : tr("The model folder %1 is gone (moved or deleted).").arg(QDir::toNativeSeparators(dir));
        summary_ = {};
        setState(State::NoModel);
        emit modelMissing(dir);
        return;
    }
    const EngineSettings e = settings_->engine();
    LoadRequest request;
    request.modelDir = dir;
    request.threads = e.threads;
    request.numaPolicy = e.numaPolicy;
    request.cpuKernel = e.cpuKernel;
    request.gpuDevice = e.gpuDevice;
    request.contextLength = e.contextLength;
    request.deferredExperts = settings_->deferralForModel(dir);
    // Shown at once; the worker's own modelLoading confirms it when it starts.
    onLoading(dir);
    emit loadRequested(request);
}

void ModelController::loadModelFolder(const QString& dir) {
    EngineSettings e = settings_->engine();
    e.modelDir = QDir::cleanPath(dir);
    settings_->setEngine(e);
    loadConfigured();
}

void ModelController::setDeferral(int experts) {
    if (!isReady()) return;
    experts = std::clamp(experts, 0, maxDeferral());
    settings_->setDeferralForModel(summary_.dir, experts);
    worker_->setDeferral(experts);
}

void ModelController::onLoading(const QString& dir) {
    verifier_->cancel();  // the model it checks is being replaced (or reloaded, and checked again then)
    loadingDir_ = dir;
    setState(State::Loading);
}

void ModelController::onLoaded(const ModelSummary& summary) {
    summary_ = summary;
    lastError_.clear();
    setState(State::Ready);
    emit modelReady(summary_);
    if (summary_.store == tandem::StoreState::Unverified) {
        // Never read in full, or changed since: read it now, while it is in use. A 500 GB store takes
        // minutes; the chat goes on meanwhile.
        verificationProgress_ = 0;
        verifier_->start(summary_.dir);
        emit verificationStarted(summary_.name);
    }
}

void ModelController::onVerified(const QString& dir, const tandem::StoreCheck& result) {
    if (dir != summary_.dir || state_ != State::Ready) return;
    if (result.state == tandem::StoreState::Unverified) {  // it did not get to the end
        emit verificationFailed(tr("Tandem could not finish checking the files of %1: %2")
                                    .arg(summary_.name, QString::fromStdString(result.message)));
        return;
    }
    if (result.state != tandem::StoreState::Damaged) {
        verificationProgress_ = 1;
        summary_.store = tandem::StoreState::Verified;
        emit verificationFinished(summary_.name, QString::fromStdString(result.recordProblem));
        return;
    }
    // Damaged: stop using it. The chat controller stops an answer in progress (it keeps what it has),
    // then the engine thread unloads the model. Nothing is deleted.
    summary_ = {};
    lastError_ = QString::fromStdString(result.message);
    setState(State::Failed);
    emit storeDamaged(lastError_);
    emit unloadRequested();
}

void ModelController::onLoadFailed(const QString& dir, const QString& message) {
    summary_ = {};
    lastError_ = QStringLiteral("Could not load the model in %1: %2").arg(QDir::toNativeSeparators(dir), message);
    setState(State::Failed);
    emit loadFailed(lastError_);
}

void ModelController::setState(State state) {
    if (state == state_ && state != State::Loading) return;
    state_ = state;
    emit stateChanged(state_);
}

}  // namespace tandem::ui
