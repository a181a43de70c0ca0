#pragma once
// The scheduler behind DownloadJob, on the job's own thread: prepares every file (what is on disk),
// runs up to parallelFiles transfers, adds up the progress and measures the speed. Internal to hub/.
#include <QElapsedTimer>
#include <QList>
#include <QObject>
#include <QTimer>
#include <deque>
#include <utility>

#include "hub/hub_client.h"

class QNetworkAccessManager;

namespace tandem::hub {

namespace detail {
class FileTransfer;
}

class DownloadWorker : public QObject {
    Q_OBJECT
public:
    DownloadWorker(HubSettings settings, QString repo, QString revision, QList<RepoFile> files, QString outDir);
    ~DownloadWorker() override;

    void start();
    void pause();
    void resume();
    void cancel();

signals:
    void progress(qint64 doneBytes, qint64 totalBytes, double bytesPerSecond);
    void fileProgress(const QString& path, qint64 doneBytes, qint64 totalBytes);
    void fileFinished(const QString& path);
    void finished();
    void failed(const QString& message);
    void paused();
    void cancelled();
    void notice(const QString& message);

private:
    enum class Phase { Idle, Running, Paused, Failed, Finished, Cancelled };

    void prepareNext();
    void pump();
    void fileDone(detail::FileTransfer* file);
    void fileFailed(const QString& message);
    void stopTransfers();
    void report();

    HubSettings settings_;
    QString repo_;
    QString revision_;
    QList<RepoFile> files_;
    QString outDir_;

    Phase phase_ = Phase::Idle;
    QNetworkAccessManager* network_ = nullptr;
    QList<detail::FileTransfer*> transfers_;
    int prepared_ = 0;  // transfers_[0, prepared_) have looked at the disk
    qint64 totalBytes_ = 0;

    QTimer reportTimer_;
    QElapsedTimer clock_;
    qint64 arrivedBytes_ = 0;                        // over the network, for the speed
    std::deque<std::pair<qint64, qint64>> samples_;  // (ms, arrivedBytes_), the last few seconds
    QList<qint64> lastFileReport_;
};

}  // namespace tandem::hub
