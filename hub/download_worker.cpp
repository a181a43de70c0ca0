#include "hub/download_worker.h"

#include <QDir>
#include <QFile>
#include <QNetworkAccessManager>

#include "hub/download_files.h"
#include "hub/file_transfer.h"
#include "hub/hub_http.h"

namespace tandem::hub {

using detail::FileTransfer;

namespace {

constexpr int kReportMs = 250;         // progress signals at most this often
constexpr qint64 kSpeedWindowMs = 5000;  // the speed is the average over this window

}  // namespace

DownloadWorker::DownloadWorker(HubSettings settings, QString repo, QString revision, QList<RepoFile> files,
                               QString outDir)
    : settings_(resolvedSettings(std::move(settings))), repo_(std::move(repo)), revision_(std::move(revision)),
      files_(std::move(files)), outDir_(std::move(outDir)), reportTimer_(this) {
    if (revision_.isEmpty()) revision_ = QStringLiteral("main");
    reportTimer_.setInterval(kReportMs);
    connect(&reportTimer_, &QTimer::timeout, this, &DownloadWorker::report);
}

DownloadWorker::~DownloadWorker() {
    stopTransfers();
    qDeleteAll(transfers_);
}

void DownloadWorker::start() {
    if (phase_ != Phase::Idle) return;
    if (const QString problem = detail::endpointProblem(settings_.endpoint); !problem.isEmpty()) {
        phase_ = Phase::Failed;
        emit failed(problem);
        return;
    }
    for (const RepoFile& f : files_) {
        if (const QString problem = detail::unsafeFileProblem(outDir_, f); !problem.isEmpty()) {
            phase_ = Phase::Failed;
            emit failed(QStringLiteral("Cannot download %1: %2; nothing was downloaded. List the repository again, "
                                       "from huggingface.co or a mirror you trust.").arg(repo_, problem));
            return;
        }
    }
    // A repository's file inside our staging folder would be taken for (and removed with) the download's
    // own state; no model needs one, so it is left out, with a word to the user.
    QStringList reserved;
    files_.removeIf([&](const RepoFile& f) {
        const bool ours = detail::isReservedPath(f.path);
        if (ours) reserved << f.path;
        return ours;
    });
    if (!reserved.isEmpty())
        emit notice(QStringLiteral("Skipping %1 of %2 (%3): Tandem keeps its own download state in %4/, so a "
                                   "repository's files cannot be saved there. Models do not need them; the other files "
                                   "are downloaded.")
                        .arg(reserved.size() == 1 ? QStringLiteral("1 file") : QStringLiteral("%1 files").arg(reserved.size()),
                             repo_, reserved.join(", "), QLatin1String(detail::kStagingFolder)));
    for (const RepoFile& f : files_) {
        totalBytes_ += f.size;  // each at most kMaxListedBytes, so the sum cannot overflow before the check
        if (totalBytes_ > detail::kMaxListedBytes) {
            phase_ = Phase::Failed;
            emit failed(QStringLiteral("Cannot download %1: its files add up to more than %2, more than any repository "
                                       "holds; nothing was downloaded. List the repository again, from "
                                       "huggingface.co or a mirror you trust.")
                            .arg(repo_, detail::humanBytes(detail::kMaxListedBytes)));
            return;
        }
    }
    if (!QDir().mkpath(outDir_)) {
        phase_ = Phase::Failed;
        emit failed(QStringLiteral("Could not create the folder %1. Check the path and its permissions.").arg(outDir_));
        return;
    }
    const DiskSpaceCheck space = checkDiskSpace(outDir_, remainingDownloadBytes(files_, outDir_));
    if (!space.enough) {
        phase_ = Phase::Failed;
        emit failed(space.message);
        return;
    }
    phase_ = Phase::Running;
    network_ = new QNetworkAccessManager(this);
    const detail::TransferTarget target{settings_, repo_, revision_, outDir_};
    for (const RepoFile& f : files_) {
        auto* transfer = new FileTransfer(target, f, network_, nullptr);
        connect(transfer, &FileTransfer::prepared, this, [this, transfer] {
            ++prepared_;
            if (transfer->state() == FileTransfer::State::Done) fileDone(transfer);
            prepareNext();
            pump();
        });
        connect(transfer, &FileTransfer::advanced, this, [this](qint64 bytes) {
            if (bytes > 0) arrivedBytes_ += bytes;
        });
        connect(transfer, &FileTransfer::done, this, [this, transfer] {
            fileDone(transfer);
            pump();
        });
        connect(transfer, &FileTransfer::failed, this, &DownloadWorker::fileFailed);
        connect(transfer, &FileTransfer::notice, this, &DownloadWorker::notice);
        transfers_.append(transfer);
    }
    lastFileReport_ = QList<qint64>(transfers_.size(), -1);
    clock_.start();
    reportTimer_.start();
    report();
    if (transfers_.isEmpty()) {
        fileDone(nullptr);
        return;
    }
    prepareNext();
}

// One file at a time looks at the disk, so a folder full of earlier files is not hashed all at once.
// A paused, failed or cancelled download hashes nothing more; resume() picks up where it stopped.
void DownloadWorker::prepareNext() {
    if (phase_ != Phase::Running) return;
    if (prepared_ < transfers_.size() && transfers_[prepared_]->state() == FileTransfer::State::New)
        transfers_[prepared_]->prepare();
}

void DownloadWorker::pump() {
    if (phase_ != Phase::Running) return;
    int running = 0;
    for (FileTransfer* t : transfers_)
        running += t->state() == FileTransfer::State::Running || t->state() == FileTransfer::State::Waiting;
    for (FileTransfer* t : transfers_) {
        if (running >= settings_.parallelFiles) break;
        const auto state = t->state();
        if (state == FileTransfer::State::Ready || state == FileTransfer::State::Paused ||
            state == FileTransfer::State::Failed) {
            ++running;
            t->start();
            if (phase_ != Phase::Running) return;  // it failed at once
        }
    }
}

void DownloadWorker::fileDone(FileTransfer* file) {
    if (file) emit fileFinished(file->file().path);
    const bool all = std::all_of(transfers_.begin(), transfers_.end(),
                                 [](FileTransfer* t) { return t->state() == FileTransfer::State::Done; });
    if (!all || phase_ != Phase::Running) return;
    phase_ = Phase::Finished;
    reportTimer_.stop();
    report();
    // Only this download's leftovers go: another one into the same folder keeps its partial files.
    detail::clearStaging(outDir_, files_);
    emit finished();
}

void DownloadWorker::fileFailed(const QString& message) {
    if (phase_ != Phase::Running) return;
    // One file that cannot be had fails the download; the others stop and keep their data for a resume.
    phase_ = Phase::Failed;
    stopTransfers();
    reportTimer_.stop();
    report();
    emit failed(message);
}

void DownloadWorker::stopTransfers() {
    for (FileTransfer* t : transfers_) t->pause();
}

void DownloadWorker::pause() {
    if (phase_ != Phase::Running) return;
    phase_ = Phase::Paused;
    stopTransfers();
    report();
    emit paused();
}

void DownloadWorker::resume() {
    if (phase_ == Phase::Idle) {
        start();
        return;
    }
    if (phase_ != Phase::Paused && phase_ != Phase::Failed) return;
    phase_ = Phase::Running;
    samples_.clear();
    reportTimer_.start();
    prepareNext();
    pump();
}

void DownloadWorker::cancel() {
    if (phase_ == Phase::Finished || phase_ == Phase::Cancelled) return;
    phase_ = Phase::Cancelled;
    reportTimer_.stop();
    for (FileTransfer* t : transfers_)
        if (t->state() != FileTransfer::State::Done) t->removePartial();
    // The staging folder goes when it holds nothing else (another download's partial files stay).
    detail::clearStaging(outDir_, files_);
    emit cancelled();
}

void DownloadWorker::report() {
    qint64 done = 0;
    for (qsizetype i = 0; i < transfers_.size(); ++i) {
        const qint64 fileDone = transfers_[i]->bytesDone();
        done += fileDone;
        if (fileDone != lastFileReport_[i]) {
            lastFileReport_[i] = fileDone;
            emit fileProgress(transfers_[i]->file().path, fileDone, transfers_[i]->file().size);
        }
    }
    const qint64 now = clock_.elapsed();
    samples_.emplace_back(now, arrivedBytes_);
    while (samples_.size() > 2 && now - samples_.front().first > kSpeedWindowMs) samples_.pop_front();
    const qint64 spanMs = now - samples_.front().first;
    const double speed = spanMs > 0 ? static_cast<double>(arrivedBytes_ - samples_.front().second) * 1000.0 / spanMs : 0.0;
    emit progress(done, totalBytes_, phase_ == Phase::Running ? speed : 0.0);
}

}  // namespace tandem::hub
