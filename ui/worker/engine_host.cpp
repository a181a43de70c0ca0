#include "ui/worker/engine_host.h"

namespace tandem::ui {

EngineHost::EngineHost(ModelLoader loader, QObject* parent)
    : QObject(parent), worker_(new EngineWorker(std::move(loader))) {
    qRegisterMetaType<LoadRequest>();
    qRegisterMetaType<ModelSummary>();
    qRegisterMetaType<GenerationRequest>();
    qRegisterMetaType<AnswerStats>();
    qRegisterMetaType<LiveEngineStats>();
    thread_.setObjectName(QStringLiteral("engine"));
    worker_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
    thread_.start();
}

EngineHost::~EngineHost() {
    // Any answer in flight stops at its next token; the worker (and the model) is deleted on its thread.
    worker_->stop(EngineWorker::kAnyRequest);
    thread_.quit();
    thread_.wait();
}

}  // namespace tandem::ui
