#include "ui/controllers/model_controller.h"

#include <QDir>
#include <QFileInfo>
#include <algorithm>
#include <utility>

#include "ui/settings/app_paths.h"
#include "ui/text/sentence.h"
#include "ui/worker/remote_api.h"

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

bool ModelController::isEmbedded(const QString& dir) const { return paths::sameFolder(dir, embeddedModelDir_); }

QString ModelController::checkModelFolder(const QString& dir) {
    const QString shown = QDir::toNativeSeparators(dir);
    if (dir.trimmed().isEmpty()) return tr("No model folder was chosen.");
    const QFileInfo info(dir);
    if (!info.exists()) return tr("The model folder %1 is gone (moved or deleted).").arg(shown);
    if (!info.isDir())
        return info.suffix().compare(QLatin1String("gguf"), Qt::CaseInsensitive) == 0
                   ? tr("%1 is a GGUF file, which Tandem converts before it can load it: use Get a Model… and "
                        "choose it as a local model.").arg(shown)
                   : tr("%1 is a file, not a model folder.").arg(shown);
    if (dir.endsWith(QLatin1String(".partial")))
        return tr("%1 is a conversion that has not finished: carry it on with Get a Model….").arg(shown);
    const QDir d(dir);
    if (d.exists(QStringLiteral("tandem-store.json"))) return {};
    if (!d.exists(QStringLiteral("config.json")))
        return tr("%1 is not a model folder: it has no config.json (a Hugging Face model) and no tandem-store.json "
                  "(a model Tandem converted).").arg(shown);
    if (d.entryList({QStringLiteral("*.safetensors")}, QDir::Files).isEmpty())
        return tr("%1 has a config.json but no *.safetensors weights: a download that has not finished, or a model "
                  "that needs converting first (Get a Model…).").arg(shown);
    return {};
}

QString ModelController::checkModel(const QString& dir) const {
    if (!isRemoteModelKey(dir)) return checkModelFolder(dir);
    if (!settings_->remoteModel(remoteModelId(dir)).isValid())
        return tr("That model on a server was removed from Tandem (File ▸ Add a Server… adds it again).");
    return {};
}

RemoteEndpoint ModelController::remoteModel(const QString& dir) const {
    return isRemoteModelKey(dir) ? settings_->remoteModel(remoteModelId(dir)) : RemoteEndpoint{};
}

QString ModelController::nameOf(const QString& dir) const {
    if (!isRemoteModelKey(dir)) return QFileInfo(dir).fileName();
    if (summary_.dir == dir && !summary_.name.isEmpty()) return summary_.name;
    const RemoteEndpoint e = settings_->remoteModel(remoteModelId(dir));
    return e.name.isEmpty() ? e.model : e.name;
}

bool ModelController::exists(const QString& dir) const {
    return isRemoteModelKey(dir) ? checkModel(dir).isEmpty() : QFileInfo::exists(dir);
}

QList<ModelChoice> ModelController::modelChoices() const {
    QList<ModelChoice> choices;
    const auto listed = [&](const QString& dir) {
        return std::any_of(choices.begin(), choices.end(), [&](const ModelChoice& c) { return paths::sameFolder(c.dir, dir); });
    };
    if (!embeddedModelDir_.isEmpty() && checkModelFolder(embeddedModelDir_).isEmpty())
        choices.append({QFileInfo(embeddedModelDir_).fileName(), embeddedModelDir_, ModelChoice::Source::Shipped});
    const QDir models(settings_->modelsFolder());
    QStringList names = models.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name | QDir::IgnoreCase);
    for (const QString& name : names) {
        const QString dir = models.filePath(name);
        if (!listed(dir) && checkModelFolder(dir).isEmpty()) choices.append({name, dir, ModelChoice::Source::ModelsFolder});
    }
    for (const QString& dir : settings_->recentModelFolders())
        if (!listed(dir) && checkModelFolder(dir).isEmpty())
            choices.append({QFileInfo(dir).fileName(), QDir::cleanPath(dir), ModelChoice::Source::Recent});
    for (const RemoteEndpoint& e : settings_->remoteModels())
        choices.append({e.name.isEmpty() ? e.model : e.name, remoteModelKey(e.id), ModelChoice::Source::Remote});
    return choices;
}

void ModelController::loadConfigured() {
    const bool first = !std::exchange(started_, true);
    const QString saved = settings_->engine().modelDir;
    if (first && !saved.isEmpty() && !embeddedModelDir_.isEmpty() && !isEmbedded(saved)) {
        // The start: a saved model that is gone or fails gives way to the shipped one.
        startupLoad_ = true;
        remember_.clear();
        if (const QString problem = checkModel(saved); !problem.isEmpty()) {
            fallBack(problem, saved, embeddedModelDir_);
            return;
        }
        load(saved, embeddedModelDir_);
        return;
    }
    const QString dir = configuredModelDir();
    if (dir.isEmpty() || !exists(dir)) {
        // Nothing to load is not a failure: the window offers to get a model instead of an error.
        lastError_ = dir.isEmpty()            ? QString()
                     : isRemoteModelKey(dir) ? checkModel(dir)
                                             : tr("The model folder %1 is gone (moved or deleted).").arg(QDir::toNativeSeparators(dir));
        summary_ = {};
        setState(State::NoModel);
        emit modelMissing(dir);
        return;
    }
    startupLoad_ = first;
    if (isReady() && !paths::sameFolder(dir, summary_.dir)) {
        // Settings name another model than the one in use: a switch, checked first.
        const QString previous = summary_.dir;
        if (const QString problem = checkModel(dir); !problem.isEmpty()) {
            rememberAsConfigured(previous);
            emit switchFailed(tr("%1 %2 is still in use.").arg(sentence(problem), summary_.name));
            return;
        }
        remember_ = dir;
        load(dir, previous);
        return;
    }
    remember_.clear();
    load(dir, QString());
}

QString ModelController::loadModelFolder(const QString& dir) {
    const QString clean = isRemoteModelKey(dir) ? dir : QDir::cleanPath(QDir::fromNativeSeparators(dir));
    if (const QString problem = checkModel(clean); !problem.isEmpty()) {
        const QString message = isReady() ? tr("%1 %2 is still in use.").arg(sentence(problem), summary_.name) : problem;
        emit switchFailed(message);
        return message;
    }
    started_ = true;  // chosen before the start-up load (by the wizard): it is the start's model
    startupLoad_ = false;
    remember_ = clean;
    load(clean, isReady() ? summary_.dir : QString());
    return {};
}

void ModelController::load(const QString& dir, const QString& fallback) {
    fallbackDir_ = fallback;
    const EngineSettings e = settings_->engine();
    LoadRequest request;
    request.modelDir = dir;
    request.threads = e.threads;
    request.numaPolicy = e.numaPolicy;
    request.cpuKernel = e.cpuKernel;
    request.gpuDevice = e.gpuDevice;
    request.contextLength = e.contextLength;
    request.gpuExpertMemoryGb = e.gpuExpertMemoryGb;
    request.int8Dense = e.int8Dense;
    request.int8KvCache = e.int8KvCache;
    request.gpuSessions = gpuSessionsFor(e, settings_->server());
    request.deferredExperts = settings_->deferralForModel(dir);
    // A model on a server: what the user entered for it (nothing is loaded here).
    if (isRemoteModelKey(dir)) request.remote = settings_->remoteModel(remoteModelId(dir));
    // Shown at once; the worker's own modelLoading confirms it when it starts.
    onLoading(dir);
    emit loadRequested(request);
}

void ModelController::rememberAsConfigured(const QString& dir) {
    EngineSettings e = settings_->engine();
    e.modelDir = isEmbedded(dir) ? QString() : isRemoteModelKey(dir) ? dir : QDir::cleanPath(dir);
    if (e == settings_->engine()) return;
    settings_->setEngine(e);
}

void ModelController::fallBack(const QString& problem, const QString& failedDir, QString fallback) {
    QString message = sentence(problem) + QLatin1Char(' ');
    message += isEmbedded(fallback) && startupLoad_
                   ? tr("Tandem uses %1, the model that ships with Tandem, meanwhile.").arg(nameOf(fallback))
                   : tr("Tandem went back to %1.").arg(nameOf(fallback));
    // A folder that failed is not the model of the next start, unless it was saved before (a disk that is
    // not there today may be tomorrow).
    if (!startupLoad_ && paths::sameFolder(settings_->engine().modelDir, failedDir)) rememberAsConfigured(fallback);
    remember_.clear();
    lastError_ = message;
    load(fallback, QString());
    emit switchFailed(message);
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
    // (A load asked for earlier may finish after another was asked for: that one is remembered when it
    // loads.)
    if (!remember_.isEmpty() && paths::sameFolder(remember_, summary.dir)) {
        rememberAsConfigured(summary.dir);
        remember_.clear();
    }
    if (!isEmbedded(summary.dir) && !summary.remote) settings_->addRecentModelFolder(QDir::cleanPath(summary.dir));
    fallbackDir_.clear();
    startupLoad_ = false;
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
    const QString failed = isRemoteModelKey(dir) ? tr("Could not use %1: %2").arg(nameOf(dir), message)
                                                 : tr("Could not load the model in %1: %2").arg(QDir::toNativeSeparators(dir), message);
    if (!fallbackDir_.isEmpty() && !paths::sameFolder(fallbackDir_, dir) && exists(fallbackDir_)) {
        fallBack(failed, dir, fallbackDir_);
        return;
    }
    remember_.clear();
    fallbackDir_.clear();
    summary_ = {};
    lastError_ = failed;
    setState(State::Failed);
    emit loadFailed(lastError_);
    // Nothing loaded at start and nothing to fall back to: time to get a model.
    if (std::exchange(startupLoad_, false)) emit modelMissing(dir);
}

void ModelController::setState(State state) {
    if (state == state_ && state != State::Loading) return;
    state_ = state;
    emit stateChanged(state_);
}

}  // namespace tandem::ui
