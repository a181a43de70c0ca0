#include "ui/wizard/download_page.h"

#include <algorithm>

#include <QDir>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTimer>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "ui/wizard/model_wizard.h"

namespace tandem::ui {
namespace {

// The progress bars count in KiB: QProgressBar holds an int, and models pass 2 GiB.
int kib(qint64 bytes) { return static_cast<int>(bytes / 1024); }

QString timeLeft(double seconds) {
    const qint64 s = static_cast<qint64>(seconds + 0.5);
    if (s >= 3600) return DownloadPage::tr("about %1 h %2 min left").arg(s / 3600).arg(s / 60 % 60);
    if (s >= 60) return DownloadPage::tr("about %1 min left").arg((s + 30) / 60);
    return DownloadPage::tr("less than a minute left");
}

}  // namespace

DownloadPage::DownloadPage(ModelWizard* wizard)
    : QWizardPage(wizard), wizard_(wizard), total_(new QProgressBar(this)), status_(new QLabel(this)),
      files_(new QTreeWidget(this)), pause_(new QPushButton(tr("Pause"), this)),
      cancel_(new QPushButton(tr("Cancel Download"), this)), error_(new QLabel(this)), retry_(new QPushButton(tr("Try Again"), this)) {
    setTitle(tr("Downloading"));
    total_->setAccessibleName(tr("Download progress"));
    status_->setWordWrap(true);
    files_->setHeaderLabels({tr("File"), tr("Size"), tr("Progress")});
    files_->setRootIsDecorated(false);
    files_->setAccessibleName(tr("Files"));
    files_->header()->setSectionResizeMode(0, QHeaderView::Stretch);
    error_->setWordWrap(true);
    error_->setObjectName(QStringLiteral("wizardError"));
    cancel_->setToolTip(tr("Stop and delete the partly downloaded files; finished files stay."));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(total_);
    layout->addWidget(status_);
    layout->addWidget(files_, 1);
    auto* errorRow = new QHBoxLayout;
    errorRow->addWidget(error_, 1);
    errorRow->addWidget(retry_, 0, Qt::AlignTop);
    layout->addLayout(errorRow);
    auto* buttons = new QHBoxLayout;
    buttons->addStretch();
    buttons->addWidget(pause_);
    buttons->addWidget(cancel_);
    layout->addLayout(buttons);

    // There is no going back to a finished step: it would only repeat it.
    setCommitPage(true);
    setButtonText(QWizard::CommitButton, tr("Next"));

    connect(pause_, &QPushButton::clicked, this, &DownloadPage::togglePause);
    connect(cancel_, &QPushButton::clicked, this, &DownloadPage::cancelDownload);
    connect(retry_, &QPushButton::clicked, this, &DownloadPage::start);
    ModelDownloader* d = wizard_->downloader();
    // The downloader also serves the quantization page; only a download this page started counts here.
    connect(d, &ModelDownloader::progress, this, [this](qint64 done, qint64 total, double speed) {
        if (active_) onProgress(done, total, speed);
    });
    connect(d, &ModelDownloader::fileProgress, this, [this](const QString& path, qint64 done, qint64 total) {
        if (active_) onFileProgress(path, done, total);
    });
    connect(d, &ModelDownloader::fileFinished, this, [this](const QString& path) {
        if (active_) onFileFinished(path);
    });
    connect(d, &ModelDownloader::finished, this, [this] {
        if (active_) onFinished();
    });
    connect(d, &ModelDownloader::failed, this, [this](const QString& message) {
        if (active_) onFailed(message);
    });
    // Closing the wizard pauses: the partial files stay, and the next run offers to resume.
    connect(wizard_, &ModelWizard::closing, this, [this] {
        if (active_) wizard_->downloader()->pause();
        active_ = false;
    });
}

void DownloadPage::initializePage() {
    const WizardPlan& plan = wizard_->plan();
    setSubTitle(tr("%1 goes into %2. You can close this window: Tandem offers to carry on next time.")
                    .arg(plan.name, QDir::toNativeSeparators(plan.downloadFolder)));
    files_->clear();
    rows_.clear();
    for (const hub::RepoFile& f : plan.files) {
        auto* row = new QTreeWidgetItem(files_, {f.path, formatBytes(static_cast<quint64>(f.size)), tr("waiting")});
        rows_.insert(f.path, row);
    }
    files_->resizeColumnToContents(1);
    finished_ = false;
    start();
}

void DownloadPage::start() {
    const WizardPlan& plan = wizard_->plan();
    error_->setVisible(false);
    retry_->setVisible(false);
    pause_->setEnabled(true);
    pause_->setText(tr("Pause"));
    paused_ = false;
    // Every file goes to the downloader, those already in the folder too: it checks their content
    // against this listing (a file of the right size may be of another revision) and fetches what differs.
    totalBytes_ = totalSize(plan.files);
    total_->setRange(0, std::max(1, kib(totalBytes_)));
    doneBytes_ = 0;
    total_->setValue(0);
    status_->setText(tr("Checking the files already in %1…").arg(QDir::toNativeSeparators(plan.downloadFolder)));
    active_ = true;
    QDir().mkpath(plan.downloadFolder);
    wizard_->downloader()->start(plan.repo, plan.revision, plan.files, plan.downloadFolder);
}

void DownloadPage::togglePause() {
    if (!active_) return;
    paused_ = !paused_;
    if (paused_) {
        wizard_->downloader()->pause();
        status_->setText(tr("Paused at %1 of %2. The partial files are kept.")
                             .arg(formatBytes(static_cast<quint64>(doneBytes_)), formatBytes(static_cast<quint64>(totalBytes_))));
    } else {
        wizard_->downloader()->resume();
    }
    pause_->setText(paused_ ? tr("Resume") : tr("Pause"));
}

void DownloadPage::cancelDownload() {
    if (active_) wizard_->downloader()->cancel();
    active_ = false;
    wizard_->startOver();
}

void DownloadPage::onProgress(qint64 done, qint64 total, double bytesPerSecond) {
    Q_UNUSED(total);  // the same as totalBytes_: every file of the plan is in the download
    const qint64 all = done;
    doneBytes_ = all;
    total_->setValue(kib(all));
    if (paused_) return;
    QString text = tr("%1 of %2").arg(formatBytes(static_cast<quint64>(all)), formatBytes(static_cast<quint64>(totalBytes_)));
    if (bytesPerSecond > 0)
        text += tr(" · %1/s · %2").arg(formatBytes(static_cast<quint64>(bytesPerSecond)),
                                       timeLeft(static_cast<double>(totalBytes_ - all) / bytesPerSecond));
    status_->setText(text);
}

void DownloadPage::onFileProgress(const QString& path, qint64 done, qint64 total) {
    if (QTreeWidgetItem* row = rows_.value(path))
        row->setText(2, total > 0 ? QStringLiteral("%1%").arg(100 * done / total) : tr("starting"));
}

void DownloadPage::onFileFinished(const QString& path) {
    if (QTreeWidgetItem* row = rows_.value(path)) row->setText(2, tr("done"));
}

void DownloadPage::onFinished() {
    if (!active_) return;
    active_ = false;
    finished_ = true;
    pause_->setEnabled(false);
    total_->setValue(total_->maximum());
    status_->setText(tr("Downloaded and verified: %1.").arg(formatBytes(static_cast<quint64>(totalBytes_))));
    wizard_->saveState(ModelWizardState::Stage::Converting);
    emit completeChanged();
    // On to the conversion by itself: a long download should not wait for a click at the end.
    QTimer::singleShot(0, wizard_, [w = wizard_] {
        if (w->currentId() == ModelWizard::DownloadId) w->next();
    });
}

void DownloadPage::onFailed(const QString& message) {
    error_->setText(tr("The download stopped. %1\n\nTry Again carries on from the files downloaded so far.").arg(message));
    error_->setVisible(true);
    retry_->setVisible(true);
    pause_->setEnabled(false);
    active_ = false;
}

bool DownloadPage::isComplete() const { return finished_; }

int DownloadPage::nextId() const { return ModelWizard::ConvertId; }

}  // namespace tandem::ui
