#include "ui/controllers/server_controller.h"

namespace tandem::ui {

ServerController::ServerController(AppServer* server, ModelController* model, AppSettings* settings, QObject* parent)
    : QObject(parent), server_(server), model_(model), settings_(settings) {
    // The model's state changes before the worker is asked to load or unload it, so the server has
    // stopped (and its requests have their errors) before the model they were made for goes.
    connect(model_, &ModelController::stateChanged, this, &ServerController::onModelState);
    apply();
}

void ServerController::apply() {
    const ServerSettings wanted = settings_->server();
    if (!wanted.enabled) {
        server_->stop(tr("the server was turned off in Tandem's settings"));
        setState(State::Off);
        return;
    }
    if (!model_->isReady()) {
        server_->stop();
        setState(State::WaitingForModel);
        return;
    }
    // Already serving this model as asked: nothing to do (a restart would cut the requests in flight).
    if (server_->isRunning() && wanted == running_ && runningSerial_ == model_->summary().serial) return;
    startOnModel();
}

void ServerController::onModelState(ModelController::State state) {
    if (!settings_->server().enabled) return;
    if (state == ModelController::State::Ready) {
        startOnModel();
        return;
    }
    server_->stop(state == ModelController::State::Loading ? tr("the model is being changed; send the request again when it has loaded")
                                                           : tr("no model is loaded"));
    setState(State::WaitingForModel);
}

void ServerController::startOnModel() {
    const ServerSettings wanted = settings_->server();
    running_ = wanted;
    runningSerial_ = model_->summary().serial;
    if (const QString problem = serverSettingsProblem(wanted); !problem.isEmpty()) {
        server_->stop();
        setState(State::Failed, problem);
        return;
    }
    if (model_->summary().remote) {
        // Nothing runs here to serve: its clients can use that server themselves.
        server_->stop();
        setState(State::Failed, tr("%1 runs on another server (%2); Tandem serves only models it runs itself")
                                    .arg(model_->summary().name, model_->summary().remoteUrl));
        return;
    }
    const QString problem = server_->start(model_->summary(), ServerAddress{wanted.host.trimmed(), wanted.port, wanted.apiKey});
    setState(problem.isEmpty() ? State::Serving : State::Failed, problem);
}

void ServerController::setState(State state, const QString& problem) {
    state_ = state;
    problem_ = problem;
    switch (state) {
    case State::Off: status_.clear(); break;
    case State::WaitingForModel: status_ = tr("Server: waiting for the model to load"); break;
    case State::Serving:
        status_ = tr("Serving on %1").arg(server_->url());
        // Settings reserved GPU sessions for the server that did not fit: it answers one request at a time.
        if (!model_->summary().gpuSessionsNotice.isEmpty())
            status_ += tr(" (one request at a time: %1)").arg(model_->summary().gpuSessionsNotice);
        break;
    case State::Failed: status_ = tr("Server not running: %1").arg(problem); break;
    }
    emit statusChanged();
}

}  // namespace tandem::ui
