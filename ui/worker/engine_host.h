#pragma once
// The engine thread: starts an EngineWorker on its own QThread and, on destruction, stops any answer
// and waits for the thread, so the model is released before the app's objects go away.
#include <QObject>
#include <QThread>

#include "ui/worker/engine_worker.h"

namespace tandem::ui {

class EngineHost : public QObject {
    Q_OBJECT
public:
    explicit EngineHost(ModelLoader loader = loadEngineModel, QObject* parent = nullptr);
    ~EngineHost() override;

    // Lives on the engine thread: connect to it, call its slots only through queued connections (the
    // thread-safe stop() and setDeferral() excepted).
    EngineWorker* worker() const { return worker_; }

private:
    QThread thread_;
    EngineWorker* worker_;
};

}  // namespace tandem::ui
