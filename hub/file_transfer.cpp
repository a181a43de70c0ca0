#include "hub/file_transfer.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QRegularExpression>
#include <QThread>

#include <filesystem>
#include <unistd.h>

#include "hub/hub_http.h"

namespace tandem::hub::detail {

namespace {

// Partial files of other revisions of FILE (another check value in the name) are never resumed.
void removeStalePartials(const QString& outDir, const RepoFile& file) {
    const QString ours = partialPath(outDir, file);
    const QFileInfo info(ours);
    const QRegularExpression stale("^" + QRegularExpression::escape(QFileInfo(file.path).fileName()) +
                                   "\\.([0-9a-f]{40}|[0-9a-f]{64}|size[0-9]+)\\.part$");
    for (const QFileInfo& other : QDir(info.absolutePath()).entryInfoList(QDir::Files))
        if (other.absoluteFilePath() != info.absoluteFilePath() && stale.match(other.fileName()).hasMatch())
            QFile::remove(other.absoluteFilePath());
}

QString seconds(int ms) { return QString::number(ms / 1000.0, 'g', 3) + " s"; }

}  // namespace

FileTransfer::FileTransfer(TransferTarget target, RepoFile file, QNetworkAccessManager* network, QObject* parent)
    : QObject(parent), target_(std::move(target)), file_(std::move(file)), network_(network), check_(file_),
      stallTimer_(this), retryTimer_(this) {
    stallTimer_.setSingleShot(true);
    stallTimer_.setInterval(target_.settings.stallTimeoutMs);
    connect(&stallTimer_, &QTimer::timeout, this, [this] {
        if (!reply_) return;
        abort_ = Abort::Stall;
        reply_->abort();
    });
    retryTimer_.setSingleShot(true);
    connect(&retryTimer_, &QTimer::timeout, this, [this] {
        hops_ = 0;
        sendToken_ = !target_.settings.token.isEmpty();
        request(resolveUrl(target_.settings.endpoint, target_.repo, target_.revision, file_.path));
    });
}

FileTransfer::~FileTransfer() {
    dropReply();
    stopHashing();
}

void FileTransfer::hashInBackground(const QString& path, qint64 bytes, std::function<void(bool)> then) {
    auto ok = std::make_shared<bool>(false);
    hasher_ = QThread::create([this, path, bytes, ok] { *ok = addFileTo(check_, path, bytes, &stopHashing_); });
    // The finished call is queued to this thread: by the time it runs the hash may have been stopped
    // (and check_ reset), which the generation tells; stopHashing() then deleted the thread already.
    // Deleting it only here (not by a deleteLater of its own) keeps hasher_ valid until one of the two.
    connect(hasher_, &QThread::finished, this, [this, ok, generation = hashGeneration_, then = std::move(then)] {
        if (generation != hashGeneration_) return;
        hasher_->deleteLater();
        hasher_ = nullptr;
        then(*ok);
    });
    hasher_->start(QThread::LowPriority);
}

void FileTransfer::stopHashing() {
    ++hashGeneration_;
    if (!hasher_) return;
    stopHashing_ = true;
    hasher_->wait();
    delete hasher_;
    hasher_ = nullptr;
    stopHashing_ = false;
}

void FileTransfer::prepare() {
    state_ = State::Checking;
    const QString target = target_.outDir + "/" + file_.path;
    const QString partial = partialPath(target_.outDir, file_);
    removeStalePartials(target_.outDir, file_);

    auto resumePartial = [this, partial] {
        const qint64 size = QFileInfo(partial).size();
        if (!QFileInfo(partial).isFile() || size > file_.size) {
            QFile::remove(partial);
            state_ = State::Ready;
            emit prepared();
            return;
        }
        hashInBackground(partial, size, [this, partial, size](bool ok) {
            if (ok) {
                onDisk_ = bestOnDisk_ = size;
            } else {
                QFile::remove(partial);
                check_ = ContentCheck(file_);
            }
            state_ = State::Ready;
            emit prepared();
        });
    };

    const QFileInfo placed(target);
    if (!placed.isFile() || placed.size() != file_.size) {
        resumePartial();
        return;
    }
    if (VerifiedRecord(target_.outDir).contains(file_) || check_.expected().isEmpty()) {
        state_ = State::Done;
        emit prepared();
        return;
    }
    // A file of the right size that this download did not put there (another tool, or a finished
    // download whose record is gone): keep it if its content checks out, else fetch it again.
    hashInBackground(target, file_.size, [this, resumePartial](bool ok) {
        if (ok && check_.result() == check_.expected()) {
            VerifiedRecord(target_.outDir).add(file_);
            state_ = State::Done;
            emit prepared();
            return;
        }
        check_ = ContentCheck(file_);
        resumePartial();
    });
}

void FileTransfer::start() {
    if (state_ != State::Ready && state_ != State::Paused && state_ != State::Failed) return;
    if (state_ == State::Failed) {  // the user asked again: a fresh set of attempts
        attempts_ = 0;
        shortEnd_ = -1;
        mismatchRetried_ = false;
    }
    state_ = State::Running;
    const QString path = partialPath(target_.outDir, file_);
    QDir().mkpath(QFileInfo(path).absolutePath());
    partial_.setFileName(path);
    if (!partial_.open(onDisk_ > 0 ? QIODevice::WriteOnly | QIODevice::Append : QIODevice::WriteOnly | QIODevice::Truncate)) {
        fail(QStringLiteral("Could not write %1: %2. Check the folder's permissions.").arg(path, partial_.errorString()));
        return;
    }
    if (onDisk_ == file_.size) {  // everything arrived before an interruption; only the check is left
        bodyComplete();
        return;
    }
    hops_ = 0;
    sendToken_ = !target_.settings.token.isEmpty();
    request(resolveUrl(target_.settings.endpoint, target_.repo, target_.revision, file_.path));
}

void FileTransfer::pause() {
    if (state_ != State::Running && state_ != State::Waiting) return;
    retryTimer_.stop();
    abort_ = Abort::Pause;
    dropReply();
    closePartial();
    state_ = State::Paused;
}

void FileTransfer::removePartial() {
    if (state_ == State::Running || state_ == State::Waiting) pause();
    // A hash of the partial or placed file stops first: it writes into check_, reset below.
    stopHashing();
    if (state_ == State::Checking) state_ = State::New;
    partial_.close();
    const QString path = partialPath(target_.outDir, file_);
    QFile::remove(path);
    onDisk_ = bestOnDisk_ = 0;
    check_ = ContentCheck(file_);
    // Empty folders the partial file needed go too; the staging folder itself is the worker's.
    QDir dir = QFileInfo(path).absoluteDir();
    while (dir.absolutePath() != QDir(stagingDir(target_.outDir)).absolutePath() && dir.isEmpty() &&
           dir.rmdir(dir.absolutePath()) && dir.cdUp()) {
    }
}

void FileTransfer::dropReply() {
    stallTimer_.stop();
    if (!reply_) return;
    QNetworkReply* reply = reply_;
    reply_ = nullptr;
    reply->disconnect(this);
    reply->abort();
    reply->deleteLater();
}

void FileTransfer::resetPartial() {
    stopHashing();
    partial_.resize(0);
    partial_.seek(0);
    onDisk_ = 0;
    check_ = ContentCheck(file_);
}

void FileTransfer::request(const QUrl& url) {
    state_ = State::Running;
    url_ = url;
    reading_ = Reading::Nothing;
    abort_ = Abort::None;
    answerBytes_ = 0;
    QNetworkRequest req = makeRequest(url, sendToken_ ? target_.settings.token : QString());
    if (onDisk_ > 0) req.setRawHeader("Range", "bytes=" + QByteArray::number(onDisk_) + "-");
    QNetworkReply* reply = network_->get(req);
    reply_ = reply;
    connect(reply, &QNetworkReply::metaDataChanged, this, [this, reply] { headersArrived(reply); });
    connect(reply, &QNetworkReply::readyRead, this, [this, reply] { dataArrived(reply); });
    connect(reply, &QNetworkReply::finished, this, [this, reply] { replyFinished(reply); });
    stallTimer_.start();
}

void FileTransfer::headersArrived(QNetworkReply* reply) {
    if (reply != reply_ || reading_ != Reading::Nothing) return;
    stallTimer_.start();
    const int status = httpStatus(reply);
    if (status == 0) return;  // not the response headers yet
    if (status >= 300 && status < 400 && reply->hasRawHeader("Location")) {
        reading_ = Reading::Redirect;
    } else if (status == 200) {
        if (onDisk_ > 0) {
            // The server sent the whole file instead of the rest: start again from its first byte.
            emit notice(QStringLiteral("%1: the server does not resume downloads; fetching it from the start")
                            .arg(file_.path));
            emit advanced(-onDisk_);
            resetPartial();
        }
        reading_ = Reading::Body;
    } else if (status == 206) {
        // "bytes FIRST-LAST/TOTAL" must continue exactly where the partial file ends.
        static const QRegularExpression range(QStringLiteral("^bytes (\\d+)-(\\d+)/(\\d+|\\*)$"));
        const auto m = range.match(QString::fromLatin1(reply->rawHeader("Content-Range")).trimmed());
        const bool fits = m.hasMatch() && m.captured(1).toLongLong() == onDisk_ &&
                          (m.captured(3) == "*" || m.captured(3).toLongLong() == file_.size);
        if (fits) {
            reading_ = Reading::Body;
        } else {
            emit notice(QStringLiteral("%1: the server resumed at the wrong place (%2); fetching it from the start")
                            .arg(file_.path, QString::fromLatin1(reply->rawHeader("Content-Range"))));
            reading_ = Reading::Discard;
            abort_ = Abort::RestartFromZero;
            reply->abort();
        }
    } else {
        reading_ = Reading::Discard;
    }
}

void FileTransfer::dataArrived(QNetworkReply* reply) {
    if (reply != reply_) return;
    stallTimer_.start();
    if (reading_ == Reading::Nothing) headersArrived(reply);
    if (reading_ != Reading::Body) {
        reply->skip(reply->bytesAvailable());
        return;
    }
    QByteArray data = reply->readAll();
    answerBytes_ += data.size();
    // Bytes past the listed size are dropped: the check over the listed size decides whether the file
    // is right.
    if (onDisk_ + data.size() > file_.size) data.truncate(file_.size - onDisk_);
    if (data.isEmpty()) return;
    if (partial_.write(data) != data.size()) {
        fail(QStringLiteral("Could not write %1: %2. Free some disk space and run the download again; the "
                            "data so far is kept.").arg(partial_.fileName(), partial_.errorString()));
        return;
    }
    check_.add(data.constData(), data.size());
    onDisk_ += data.size();
    emit advanced(data.size());
}

void FileTransfer::replyFinished(QNetworkReply* reply) {
    if (reply != reply_) return;
    stallTimer_.stop();
    if (reading_ == Reading::Body && reply->bytesAvailable() > 0) dataArrived(reply);
    if (state_ != State::Running) return;  // a write failure above ended it
    reply_ = nullptr;
    reply->deleteLater();
    const int status = httpStatus(reply);
    const Abort abort = abort_;
    abort_ = Abort::None;

    if (reading_ == Reading::Body && onDisk_ == file_.size) {
        // Every listed byte is here. Whatever the server promised past them (a larger Content-Length,
        // then a closed or silent connection) would only be dropped; the content check decides.
        bodyComplete();
        return;
    }
    if (abort == Abort::Stall) {
        retryLater(QStringLiteral("no data for %1").arg(seconds(target_.settings.stallTimeoutMs)));
        return;
    }
    if (abort == Abort::RestartFromZero) {
        emit advanced(-onDisk_);
        resetPartial();
        retryLater(QStringLiteral("resumed at the wrong place"));
        return;
    }
    if (reading_ == Reading::Redirect) {
        const QUrl next = url_.resolved(QUrl::fromEncoded(reply->rawHeader("Location")));
        if (++hops_ > 10) {
            fail(QStringLiteral("%1: more than 10 redirects; check the endpoint setting (HF_ENDPOINT).").arg(file_.path));
            return;
        }
        sendToken_ = sendToken_ && sameOrigin(url_, next);
        request(next);
        return;
    }
    if (status == 416) {  // the server's file is shorter than the partial one: not the same file
        emit advanced(-onDisk_);
        resetPartial();
        retryLater(QStringLiteral("the server could not resume it"));
        return;
    }
    const bool answered = status == 200 || status == 206;
    const bool closed = reply->error() == QNetworkReply::NoError || reply->error() == QNetworkReply::RemoteHostClosedError;
    if (!answered || !closed) {
        // An error after a 200 or 206 is the connection failing mid-body, not the server refusing.
        const int refusal = answered ? 0 : status;
        if (refusal != 0 && !worthRetrying(reply->error(), refusal)) {
            fail(failureMessage(reply, target_.repo, target_.revision, file_.path, !target_.settings.token.isEmpty()));
            return;
        }
        retryLater(refusal ? QStringLiteral("HTTP %1").arg(refusal) : reply->errorString());
        return;
    }
    if (onDisk_ < file_.size) {
        endedShort(reply);
        return;
    }
    bodyComplete();
}

void FileTransfer::endedShort(const QNetworkReply* reply) {
    const QVariant promised = reply->header(QNetworkRequest::ContentLengthHeader);
    // Qt reports a connection closed before the Content-Length as an error, or at times as a normal end.
    const bool cutOff = promised.isValid() && answerBytes_ < promised.toLongLong();
    const QString where = QStringLiteral("at byte %1 of %2").arg(onDisk_).arg(file_.size);
    // A dropped connection ends a transfer anywhere, and the next one goes on from there. Two answers
    // in a row that end at the same byte, with nothing new between, are the server: its copy is cut
    // short or its Content-Length is wrong, and asking it again only makes the user wait.
    if (onDisk_ == shortEnd_ && onDisk_ <= bestOnDisk_) {
        const QString what =
            cutOff ? QStringLiteral("sent %1 of %2 bytes of %3 and closed the connection")
                         .arg(QString::number(answerBytes_), QString::number(promised.toLongLong()), file_.path)
                   : QStringLiteral("ended its answer for %1 after %2 bytes").arg(file_.path, QString::number(answerBytes_));
        const QString next = onDisk_ > 0 ? QStringLiteral("The first %1 are kept; run the download again later to resume "
                                                          "from there, or try another endpoint (HF_ENDPOINT).")
                                               .arg(humanBytes(onDisk_))
                                         : QStringLiteral("Run the download again later, or try another endpoint "
                                                          "(HF_ENDPOINT).");
        fail(QStringLiteral("The server %1, a second time %2: its copy of the file is cut short or it miscounts, so it "
                            "was not asked again. %3")
                 .arg(what, where, next));
        return;
    }
    shortEnd_ = onDisk_;
    retryLater(cutOff ? QStringLiteral("the connection ended after %1 of %2 bytes, %3")
                            .arg(answerBytes_)
                            .arg(promised.toLongLong())
                            .arg(where)
                      : QStringLiteral("the server's answer ended after %1 bytes, %2").arg(answerBytes_).arg(where));
}

void FileTransfer::bodyComplete() {
    if (!partial_.flush() || ::fsync(partial_.handle()) != 0) {
        fail(QStringLiteral("Could not write %1: %2. Free some disk space and run the download again.")
                 .arg(partial_.fileName(), partial_.errorString()));
        return;
    }
    partial_.close();
    const QString actual = check_.result();
    const bool sizeOk = onDisk_ == file_.size;
    if (!sizeOk || actual != check_.expected()) {
        QFile::remove(partial_.fileName());
        emit advanced(-onDisk_);
        onDisk_ = bestOnDisk_ = 0;
        check_ = ContentCheck(file_);
        const QString what = sizeOk ? QStringLiteral("its %1 is %2, the Hub lists %3").arg(check_.kind(), actual, check_.expected())
                                    : QStringLiteral("%1 bytes arrived of %2").arg(onDisk_).arg(file_.size);
        if (mismatchRetried_) {
            fail(QStringLiteral("%1 arrived damaged twice (%2); the damaged data was removed and nothing was put in "
                                "place. A proxy or the network may be altering data; try again later or another "
                                "endpoint (HF_ENDPOINT).").arg(file_.path, what));
            return;
        }
        mismatchRetried_ = true;
        emit notice(QStringLiteral("%1 arrived damaged (%2); fetching it again from the start").arg(file_.path, what));
        state_ = State::Ready;
        start();
        return;
    }
    const QString target = target_.outDir + "/" + file_.path;
    QDir().mkpath(QFileInfo(target).absolutePath());
    std::error_code error;
    std::filesystem::rename(partial_.fileName().toStdString(), target.toStdString(), error);
    if (error) {
        fail(QStringLiteral("Could not move %1 into place at %2: %3.")
                 .arg(file_.path, target, QString::fromStdString(error.message())));
        return;
    }
    VerifiedRecord(target_.outDir).add(file_);
    state_ = State::Done;
    emit done();
}

void FileTransfer::retryLater(const QString& reason) {
    if (onDisk_ > bestOnDisk_) {
        bestOnDisk_ = onDisk_;
        attempts_ = 0;
    }
    if (++attempts_ > target_.settings.maxRetries) {
        fail(QStringLiteral("%1: gave up after %2 attempts (%3). The data so far is kept; run the download again to "
                            "resume.").arg(file_.path).arg(attempts_).arg(reason));
        return;
    }
    const int delay = backoffMs(target_.settings, attempts_);
    emit notice(QStringLiteral("%1: %2; retrying in %3 (attempt %4 of %5)")
                    .arg(file_.path, reason, seconds(delay))
                    .arg(attempts_ + 1)
                    .arg(target_.settings.maxRetries + 1));
    state_ = State::Waiting;
    retryTimer_.start(delay);
}

void FileTransfer::closePartial() {
    partial_.close();
    // An empty partial file is no progress worth keeping, and would look like one.
    if (onDisk_ == 0 && !partial_.fileName().isEmpty()) QFile::remove(partial_.fileName());
}

void FileTransfer::fail(const QString& message) {
    dropReply();
    retryTimer_.stop();
    closePartial();
    state_ = State::Failed;
    emit failed(message);
}

}  // namespace tandem::hub::detail
