// DownloadJob: the public face of a download; the work happens in a DownloadWorker on a thread of its own,
// so neither the UI thread nor the CLI's event loop ever waits on a disk write or a hash.
#include <QThread>

#include "hub/download_worker.h"
#include "hub/hub_client.h"

namespace tandem::hub {

DownloadJob::DownloadJob(HubSettings settings, QString repo, QString revision, QList<RepoFile> files, QString outDir,
                         QObject* parent)
    : QObject(parent), thread_(new QThread(this)),
      worker_(new DownloadWorker(std::move(settings), std::move(repo), std::move(revision), std::move(files),
                                 std::move(outDir))) {
    thread_->setObjectName(QStringLiteral("tandem-download"));
    worker_->moveToThread(thread_);
    connect(worker_, &DownloadWorker::progress, this, &DownloadJob::progress);
    connect(worker_, &DownloadWorker::fileProgress, this, &DownloadJob::fileProgress);
    connect(worker_, &DownloadWorker::fileFinished, this, &DownloadJob::fileFinished);
    connect(worker_, &DownloadWorker::finished, this, &DownloadJob::finished);
    connect(worker_, &DownloadWorker::failed, this, &DownloadJob::failed);
    connect(worker_, &DownloadWorker::paused, this, &DownloadJob::paused);
    connect(worker_, &DownloadWorker::cancelled, this, &DownloadJob::cancelled);
    connect(worker_, &DownloadWorker::notice, this, &DownloadJob::notice);
    thread_->start();
}

DownloadJob::~DownloadJob() {
    // The worker is deleted on its own thread (its transfers and network objects belong there), which
    // aborts the transfers and keeps the partial files.
    QMetaObject::invokeMethod(worker_, [worker = worker_] { delete worker; }, Qt::BlockingQueuedConnection);
    thread_->quit();
    thread_->wait();
}

void DownloadJob::start() { QMetaObject::invokeMethod(worker_, &DownloadWorker::start, Qt::QueuedConnection); }
void DownloadJob::pause() { QMetaObject::invokeMethod(worker_, &DownloadWorker::pause, Qt::QueuedConnection); }
void DownloadJob::resume() { QMetaObject::invokeMethod(worker_, &DownloadWorker::resume, Qt::QueuedConnection); }
void DownloadJob::cancel() { QMetaObject::invokeMethod(worker_, &DownloadWorker::cancel, Qt::QueuedConnection); }

}  // namespace tandem::hub
