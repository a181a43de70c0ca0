#pragma once
// One file of a download: find what is already on disk, fetch the rest with Range, check the content
// as it arrives, retry with backoff, and move it into place once it matches. Lives on the download
// thread; DownloadWorker schedules several at a time. Internal to hub/.
#include <QFile>
#include <QObject>
#include <QTimer>
#include <QUrl>
#include <atomic>
#include <functional>
#include <memory>

#include "hub/download_files.h"
#include "hub/hub_client.h"

class QNetworkAccessManager;
class QNetworkReply;
class QThread;

namespace tandem::hub::detail {

struct TransferTarget {
    HubSettings settings;  // resolved
    QString repo;
    QString revision;
    QString outDir;
};

class FileTransfer : public QObject {
    Q_OBJECT
public:
    enum class State { New, Checking, Ready, Running, Waiting, Paused, Done, Failed };

    FileTransfer(TransferTarget target, RepoFile file, QNetworkAccessManager* network, QObject* parent);
    ~FileTransfer() override;

    // Looks at the disk: a file in place that checks out is Done, a partial file is hashed so the
    // transfer resumes after it. Ends in `prepared`.
    void prepare();
    void start();   // Ready or Paused -> Running
    void pause();   // Running or Waiting -> Paused; the partial file stays
    void removePartial();

    State state() const { return state_; }
    const RepoFile& file() const { return file_; }
    qint64 bytesDone() const { return state_ == State::Done ? file_.size : onDisk_; }

signals:
    void prepared();
    void advanced(qint64 newBytes);  // data that arrived over the network
    void done();
    void failed(const QString& message);
    void notice(const QString& message);

private:
    enum class Reading { Nothing, Redirect, Body, Discard };
    enum class Abort { None, Pause, Stall, RestartFromZero };

    void hashInBackground(const QString& path, qint64 bytes, std::function<void(bool ok)> then);
    // Stops a hash of data on disk and drops its callback; call before anything touches check_.
    void stopHashing();
    void resetPartial();
    void request(const QUrl& url);
    void headersArrived(QNetworkReply* reply);
    void dataArrived(QNetworkReply* reply);
    void replyFinished(QNetworkReply* reply);
    void bodyComplete();
    // REPLY, a 200 or 206, ended before the file did: the server closed the connection early, or sent
    // less than the rest of the file. Retried, unless the last answer ended at this byte too.
    void endedShort(const QNetworkReply* reply);
    void retryLater(const QString& reason);
    void fail(const QString& message);
    void dropReply();
    void closePartial();

    TransferTarget target_;
    RepoFile file_;
    QNetworkAccessManager* network_;
    State state_ = State::New;

    QFile partial_;
    ContentCheck check_;
    qint64 onDisk_ = 0;       // bytes in the partial file, all of them in check_
    qint64 bestOnDisk_ = 0;   // the most an attempt has reached; an attempt past it resets the count
    int attempts_ = 0;        // failed attempts in a row without progress
    qint64 shortEnd_ = -1;    // where the last answer that ended short left the file; -1: none did
    qint64 answerBytes_ = 0;  // body bytes of the current answer, those past the listed size included
    bool mismatchRetried_ = false;

    QNetworkReply* reply_ = nullptr;
    Reading reading_ = Reading::Nothing;
    Abort abort_ = Abort::None;
    QUrl url_;
    bool sendToken_ = false;
    int hops_ = 0;
    QTimer stallTimer_;
    QTimer retryTimer_;

    QThread* hasher_ = nullptr;  // hashing data already on disk without holding up the transfers
    std::atomic<bool> stopHashing_{false};
    quint64 hashGeneration_ = 0;  // a finished hash whose generation is not this one was stopped
};

}  // namespace tandem::hub::detail
