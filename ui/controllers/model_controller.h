#pragma once
// Which model is loaded and how: asks the engine worker to load, follows its progress, and keeps the
// deferral chosen for each model. A packed store that loads unverified (never read in full, or changed
// since) is read in full in the background while it is in use; if that finds damage, the model is
// unloaded and storeDamaged says which file and what to do.
#include <QObject>

#include "ui/settings/app_settings.h"
#include "ui/worker/engine_worker.h"
#include "ui/worker/store_verifier.h"

namespace tandem::ui {

class ModelController : public QObject {
    Q_OBJECT
public:
    enum class State { NoModel, Loading, Ready, Failed };
    Q_ENUM(State)

    // `embeddedModelDir` is the model that ships with Tandem, used while Settings names none.
    // `verify` reads a store in full (null: tandem::verifyStore at a low priority).
    ModelController(EngineWorker* worker, AppSettings* settings, QString embeddedModelDir, QObject* parent = nullptr,
                    StoreVerifyFunction verify = {});

    State state() const { return state_; }
    bool isReady() const { return state_ == State::Ready; }
    const ModelSummary& summary() const { return summary_; }
    QString loadingDir() const { return loadingDir_; }
    QString lastError() const { return lastError_; }
    int deferral() const { return deferral_; }
    // The highest deferral the loaded model allows (k-1); 0 when it has no routed experts.
    int maxDeferral() const;
    // Settings' model folder, or the embedded one.
    QString configuredModelDir() const;
    // The loaded model is the one that ships with Tandem (a demo, not a model to rely on).
    bool isEmbeddedModelReady() const;
    // The loaded store is being read in full, this far (0..1).
    bool isVerifying() const { return verifier_->isRunning(); }
    double verificationProgress() const { return verificationProgress_; }

public slots:
    // Loads the model Settings name, with Settings' engine options. With no model named and none shipped,
    // or a model folder that is gone, the state is NoModel and modelMissing says so.
    void loadConfigured();
    // Makes `dir` the configured model and loads it.
    void loadModelFolder(const QString& dir);
    void setDeferral(int experts);

signals:
    void loadRequested(const tandem::ui::LoadRequest& request);
    void stateChanged(tandem::ui::ModelController::State state);
    void loadFailed(const QString& message);
    // There is no model to load: none configured and none shipped (dir empty), or `dir` is gone.
    void modelMissing(const QString& dir);
    void modelReady(const tandem::ui::ModelSummary& summary);
    void deferralChanged(int experts);
    void unloadRequested();
    // The loaded store is being read in full (in the background; the chat goes on meanwhile).
    void verificationStarted(const QString& name);
    void verificationProgressed(const QString& name, double fraction);
    // It is intact. `note`: why that could not be recorded (then it is read again at the next load).
    void verificationFinished(const QString& name, const QString& note);
    // It could not be read at all (the folder went away): a warning; the model stays in use.
    void verificationFailed(const QString& message);
    // It is damaged: the model was unloaded (state Failed, lastError() is `message`, which names the
    // file and says to convert or download the model again).
    void storeDamaged(const QString& message);

private:
    void onLoading(const QString& dir);
    void onLoaded(const ModelSummary& summary);
    void onLoadFailed(const QString& dir, const QString& message);
    void onVerified(const QString& dir, const tandem::StoreCheck& result);
    void setState(State state);

    EngineWorker* worker_;
    AppSettings* settings_;
    QString embeddedModelDir_;
    State state_ = State::NoModel;
    ModelSummary summary_;
    QString loadingDir_;
    QString lastError_;
    int deferral_ = 0;
    StoreVerifier* verifier_;
    double verificationProgress_ = 0;
};

}  // namespace tandem::ui
