#pragma once
// Which model is loaded and how: asks the engine worker to load, follows its progress, and keeps the
// deferral chosen for each model. A packed store that loads unverified (never read in full, or changed
// since) is read in full in the background while it is in use; if that finds damage, the model is
// unloaded and storeDamaged says which file and what to do.
//
// A model folder is checked before the working model is let go (loadModelFolder), and remembered in the
// settings only once it loaded; one that fails in the engine gives the previous model back. At start, a
// saved folder that is gone or fails falls back to the model that ships with Tandem (issue 24, item 3).
#include <QList>
#include <QObject>

#include "ui/settings/app_settings.h"
#include "ui/worker/engine_worker.h"
#include "ui/worker/store_verifier.h"

namespace tandem::ui {

// A model the model picker offers.
struct ModelChoice {
    enum class Source { Shipped, ModelsFolder, Recent, Remote };
    QString name;  // the folder name; a model on a server: the name it was given
    QString dir;   // a model on a server: its key (remoteModelKey)
    Source source = Source::Shipped;
};

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
    // The model that ships with Tandem; empty if none.
    QString embeddedModelDir() const { return embeddedModelDir_; }
    // Why `dir` is not a model folder Tandem can load, found without loading it (gone, not a folder, no
    // config.json or tandem-store.json, an unfinished conversion); empty if it looks like one.
    static QString checkModelFolder(const QString& dir);
    // The same for a folder or a model on a server (`dir` is its key): one no longer in the settings is
    // no model.
    QString checkModel(const QString& dir) const;
    // The model on a server whose key is `dir` (remoteModelKey), as the settings keep it; invalid if none.
    RemoteEndpoint remoteModel(const QString& dir) const;
    // What the user calls the model in `dir`: the folder's name, or the name a server's model was given.
    QString nameOf(const QString& dir) const;
    // The model in use (or loading) is a model on a server.
    bool isRemote() const { return isRemoteModelKey(state_ == State::Loading ? loadingDir_ : summary_.dir); }
    // The models to choose from: the shipped one, the loadable folders of the models folder (by name),
    // the folders loaded before that are still there (latest first), then the models on servers (in the
    // order they were added); each once.
    QList<ModelChoice> modelChoices() const;
    // The loaded model is the one that ships with Tandem (a demo, not a model to rely on).
    bool isEmbeddedModelReady() const;
    // The loaded store is being read in full, this far (0..1).
    bool isVerifying() const { return verifier_->isRunning(); }
    double verificationProgress() const { return verificationProgress_; }

public slots:
    // Loads the model Settings name, with Settings' engine options. With no model named and none shipped,
    // or a model folder that is gone, the state is NoModel and modelMissing says so. At the first call (the
    // app's start) a saved model that is gone or fails to load falls back to the shipped one (switchFailed
    // says so); later, a named folder other than the model in use is a switch, as loadModelFolder's.
    void loadConfigured();
    // Switches to the model in `dir`: checks the folder first and, if it is no model, keeps the model in
    // use and returns why (switchFailed says it too). Otherwise loads it; once it loaded it becomes the
    // configured model (the shipped one: none configured) and joins the recent folders. If the engine
    // fails to load it, the model used before is loaded again and switchFailed says so. Returns empty
    // when the load is on its way.
    QString loadModelFolder(const QString& dir);
    void setDeferral(int experts);

signals:
    void loadRequested(const tandem::ui::LoadRequest& request);
    void stateChanged(tandem::ui::ModelController::State state);
    void loadFailed(const QString& message);
    // There is no model to load: none configured and none shipped (dir empty), or `dir` is gone.
    // Also when the saved model failed to load at start with no shipped model to fall back to.
    void modelMissing(const QString& dir);
    // A model could not be switched to: the folder is no model (the model in use stays, nothing was
    // unloaded) or it failed to load (the model used before is loading again, state Loading). `message`
    // names the folder, why, and what Tandem uses instead.
    void switchFailed(const QString& message);
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
    // Asks the worker to load `dir` with the engine settings; `fallback` is loaded instead if it fails.
    void load(const QString& dir, const QString& fallback);
    bool isEmbedded(const QString& dir) const;
    // Whether `dir` is still there: a folder that exists, or a model on a server still in the settings.
    bool exists(const QString& dir) const;
    // Makes `dir` the model of the next start (the shipped one: none named).
    void rememberAsConfigured(const QString& dir);
    // `failedDir` could not be loaded (`problem`): loads `fallback` instead (state Loading) and says so.
    void fallBack(const QString& problem, const QString& failedDir, QString fallback);  // by value: it may be fallbackDir_
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
    QString remember_;     // loading at the user's choice: the configured model once it loaded
    QString fallbackDir_;  // loaded again if the load in progress fails
    bool started_ = false;  // loadConfigured ran once (the start-up load)
    bool startupLoad_ = false;
    int deferral_ = 0;
    StoreVerifier* verifier_;
    double verificationProgress_ = 0;
};

}  // namespace tandem::ui
