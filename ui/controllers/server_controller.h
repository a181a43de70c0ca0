#pragma once
// Settings ▸ Server at work: runs the app's OpenAI-compatible server (ui/worker/app_server.h) while the
// setting is on and a model is ready. It stops when the setting goes off, when the model is being
// changed or unloaded (requests in flight get a 503 error body) and when the app closes, and starts
// again on the next model. What it is doing is one line for the status bar: "Serving on
// http://127.0.0.1:8080/v1", or why it is not (the port is in use); a failed start leaves the setting on.
#include <QObject>
#include <QString>

#include "ui/controllers/model_controller.h"
#include "ui/settings/app_settings.h"
#include "ui/worker/app_server.h"

namespace tandem::ui {

class ServerController : public QObject {
    Q_OBJECT
public:
    enum class State { Off, WaitingForModel, Serving, Failed };
    Q_ENUM(State)

    ServerController(AppServer* server, ModelController* model, AppSettings* settings, QObject* parent = nullptr);

    State state() const { return state_; }
    // For the status bar; empty while the server is off.
    QString statusText() const { return status_; }
    // Why the last start failed (State::Failed), else empty.
    QString problem() const { return problem_; }
    // "http://127.0.0.1:8080/v1" while serving, else empty.
    QString url() const { return server_->url(); }
    AppServer* server() const { return server_; }

public slots:
    // The settings changed: starts, stops or restarts the server to match them.
    void apply();

signals:
    void statusChanged();

private:
    void onModelState(ModelController::State state);
    void startOnModel();
    void setState(State state, const QString& problem = {});

    AppServer* server_;
    ModelController* model_;
    AppSettings* settings_;
    ServerSettings running_;  // what the server runs with
    quint64 runningSerial_ = 0;
    State state_ = State::Off;
    QString status_;
    QString problem_;
};

}  // namespace tandem::ui
