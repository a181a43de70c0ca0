#pragma once
// Which model is loaded and how: asks the engine worker to load, follows its progress, and keeps the
// deferral chosen for each model.
#include <QObject>

#include "ui/engine/engine_worker.h"
#include "ui/settings/app_settings.h"

namespace tandem::ui {

class ModelController : public QObject {
    Q_OBJECT
public:
    enum class State { NoModel, Loading, Ready, Failed };
    Q_ENUM(State)

    // `embeddedModelDir` is the model that ships with Tandem, used while Settings names none.
    ModelController(EngineWorker* worker, AppSettings* settings, QString embeddedModelDir, QObject* parent = nullptr);

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

private:
    void onLoading(const QString& dir);
    void onLoaded(const ModelSummary& summary);
    void onLoadFailed(const QString& dir, const QString& message);
    void setState(State state);

    EngineWorker* worker_;
    AppSettings* settings_;
    QString embeddedModelDir_;
    State state_ = State::NoModel;
    ModelSummary summary_;
    QString loadingDir_;
    QString lastError_;
    int deferral_ = 0;
};

}  // namespace tandem::ui
