#include "ui/wizard/convert_job.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QMetaObject>

namespace tandem::ui {

namespace {

// Released jobs still running, all on the UI thread.
QList<ConvertJob*>& releasedJobs() {
    static QList<ConvertJob*> jobs;
    return jobs;
}

// A Hugging Face folder whose config.json says its experts are MXFP4 (gpt-oss's release).
bool isMxfp4Checkpoint(const QString& source) {
    QFile config(QDir(source).filePath(QStringLiteral("config.json")));
    if (!config.open(QIODevice::ReadOnly)) return false;
    const QJsonObject q = QJsonDocument::fromJson(config.readAll()).object().value(QStringLiteral("quantization_config")).toObject();
    return q.value(QStringLiteral("quant_method")).toString() == QStringLiteral("mxfp4");
}

}  // namespace

ConvertJob::ConvertJob(QObject* parent) : QObject(parent) {}

ConvertJob::~ConvertJob() {
    releasedJobs().removeAll(this);
    cancel();
    join();
}

void ConvertJob::release() {
    cancel();
    disconnect();  // nobody hears from it any more
    setParent(QCoreApplication::instance());  // not deleted with its owner
    if (!running_) {
        deleteLater();
        return;
    }
    releasedJobs().append(this);
    connect(this, &ConvertJob::cancelled, this, &QObject::deleteLater);
    connect(this, &ConvertJob::finished, this, &QObject::deleteLater);
    connect(this, &ConvertJob::failed, this, &QObject::deleteLater);
}

void ConvertJob::join() {
    if (thread_.joinable()) thread_.join();
}

void ConvertJob::start(const QString& source, const QString& storeDir, tandem::ExpertPrecision experts, tandem::StoreDense dense,
                       int threads) {
    if (running_) return;
    join();
    // Two conversions never write one store: a released one into it stops first (it was cancelled,
    // so at its next progress report).
    for (ConvertJob* old : releasedJobs())
        if (old->storeDir_ == storeDir) old->join();
    storeDir_ = storeDir;
    running_ = true;
    stop_ = false;
    QDir().mkpath(QFileInfo(storeDir).absolutePath());
    // gpt-oss ships MXFP4 experts: its 4-bit choice keeps them exactly as MXFP4 (the same bytes as int4,
    // where int4 would round them again).
    if (experts == tandem::ExpertPrecision::INT4 && isMxfp4Checkpoint(source)) experts = tandem::ExpertPrecision::MXFP4;
    const tandem::ConvertRequest request{source.toStdString(), storeDir.toStdString(), experts, threads, dense};
    // Results come back as calls queued to this object: they are dropped if it is destroyed first, and
    // the destructor joins the thread before that.
    thread_ = std::thread([this, request] {
        auto post = [this](auto&& call) { QMetaObject::invokeMethod(this, std::forward<decltype(call)>(call), Qt::QueuedConnection); };
        try {
            const tandem::ConvertOutcome outcome = tandem::convertModel(request, [&](const tandem::ConvertProgress& p) {
                post([this, p] { emit progressed(p); });
                return !stop_.load();
            });
            if (outcome.cancelled) {
                post([this] {
                    running_ = false;
                    emit cancelled();
                });
            } else {
                const QString store = QString::fromStdString(outcome.store.string());
                post([this, store] {
                    running_ = false;
                    emit finished(store);
                });
            }
        } catch (const std::exception& e) {
            const QString message = QString::fromStdString(e.what());
            post([this, message] {
                running_ = false;
                emit failed(message);
            });
        }
    });
}

void ConvertJob::cancel() { stop_ = true; }

}  // namespace tandem::ui
