#include "ui/wizard/convert_page.h"

#include <QDir>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTimer>
#include <QVBoxLayout>

#include "ui/wizard/convert_job.h"
#include "ui/wizard/model_wizard.h"

namespace tandem::ui {

ConvertPage::ConvertPage(ModelWizard* wizard)
    : QWizardPage(wizard), wizard_(wizard), job_(new ConvertJob(this)), bar_(new QProgressBar(this)),
      status_(new QLabel(this)), error_(new QLabel(this)), stop_(new QPushButton(tr("Stop"), this)) {
    setTitle(tr("Converting"));
    bar_->setRange(0, 1000);
    bar_->setAccessibleName(tr("Conversion progress"));
    status_->setWordWrap(true);
    error_->setWordWrap(true);
    error_->setObjectName(QStringLiteral("wizardError"));
    auto* layout = new QVBoxLayout(this);
    auto* explanation = new QLabel(tr("Tandem packs the routed experts once into the layout its CPU kernels read "
                                      "straight from disk, so the model loads in seconds from then on."),
                                   this);
    explanation->setWordWrap(true);
    layout->addWidget(explanation);
    layout->addWidget(bar_);
    layout->addWidget(status_);
    layout->addWidget(error_);
    layout->addStretch();
    auto* buttons = new QHBoxLayout;
    buttons->addStretch();
    buttons->addWidget(stop_);
    layout->addLayout(buttons);

    // There is no going back to a finished step: it would only repeat it.
    setCommitPage(true);
    setButtonText(QWizard::CommitButton, tr("Next"));

    connect(stop_, &QPushButton::clicked, this, &ConvertPage::stopOrResume);
    connect(job_, &ConvertJob::progressed, this, &ConvertPage::onProgress);
    connect(job_, &ConvertJob::finished, this, &ConvertPage::onFinished);
    connect(job_, &ConvertJob::failed, this, &ConvertPage::onFailed);
    connect(job_, &ConvertJob::cancelled, this, [this] {
        status_->setText(tr("Stopped. What is converted so far is kept; Resume carries on from there."));
        stop_->setText(tr("Resume"));
        stop_->setEnabled(true);
    });
    connect(wizard_, &ModelWizard::closing, job_, &ConvertJob::cancel);
}

ConvertPage::~ConvertPage() {
    job_->release();
}

void ConvertPage::initializePage() {
    const WizardPlan& plan = wizard_->plan();
    setSubTitle(tr("%1 to %2 experts, into %3.")
                    .arg(plan.name, precisionName(plan.experts), QDir::toNativeSeparators(plan.storeFolder)));
    finished_ = false;
    start();
}

void ConvertPage::start() {
    const WizardPlan& plan = wizard_->plan();
    error_->setVisible(false);
    stop_->setText(tr("Stop"));
    stop_->setEnabled(true);
    bar_->setValue(0);
    status_->setText(tr("Checking %1…").arg(QDir::toNativeSeparators(plan.convertSource())));
    // The dense weights as Settings holds them (int8 by default), which the fit on the previous page counted:
    // written so into the store, nothing is quantized when it loads.
    const auto dense = wizard_->parts().settings->engine().int8Dense ? tandem::StoreDense::Int8 : tandem::StoreDense::Checkpoint;
    job_->start(plan.convertSource(), plan.storeFolder, plan.experts, dense, wizard_->parts().convertThreads);
}

void ConvertPage::stopOrResume() {
    if (job_->isRunning()) {
        stop_->setEnabled(false);
        status_->setText(tr("Stopping after the experts being packed now…"));
        job_->cancel();
    } else {
        start();
    }
}

void ConvertPage::onProgress(const tandem::ConvertProgress& p) {
    const double fraction = p.bytesTotal ? static_cast<double>(p.bytesWritten) / static_cast<double>(p.bytesTotal)
                                         : (p.layers ? static_cast<double>(p.layer) / p.layers : 0.0);
    bar_->setValue(static_cast<int>(1000 * std::min(1.0, fraction)));
    QString text = tr("Layer %1 of %2").arg(p.layer).arg(p.layers);
    if (p.resumedLayers) text += tr(" (%n kept from before)", nullptr, p.resumedLayers);
    text += tr(" · %1 of %2 written").arg(formatBytes(p.bytesWritten), formatBytes(p.bytesTotal));
    if (p.seconds > 1 && p.bytesWritten > 0 && p.bytesTotal > p.bytesWritten) {
        const double left = static_cast<double>(p.bytesTotal - p.bytesWritten) * p.seconds / static_cast<double>(p.bytesWritten);
        text += left >= 60 ? tr(" · about %1 min left").arg(static_cast<int>(left / 60 + 0.5)) : tr(" · less than a minute left");
    }
    if (stop_->isEnabled()) status_->setText(text);
}

void ConvertPage::onFinished(const QString& store) {
    finished_ = true;
    wizard_->plan().storeFolder = store;
    wizard_->saveState(ModelWizardState::Stage::Loading);
    bar_->setValue(bar_->maximum());
    status_->setText(tr("Converted into %1.").arg(QDir::toNativeSeparators(store)));
    stop_->setEnabled(false);
    emit completeChanged();
    QTimer::singleShot(0, wizard_, [w = wizard_] {
        if (w->currentId() == ModelWizard::ConvertId) w->next();
    });
}

void ConvertPage::onFailed(const QString& message) {
    error_->setText(message);
    error_->setVisible(true);
    status_->clear();
    stop_->setText(tr("Try Again"));
    stop_->setEnabled(true);
}

bool ConvertPage::isComplete() const { return finished_; }

int ConvertPage::nextId() const { return ModelWizard::DoneId; }

}  // namespace tandem::ui
