#include "ui/wizard/quantization_page.h"

#include <algorithm>

#include <QDir>
#include <QFile>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "ui/wizard/model_wizard.h"

namespace tandem::ui {
namespace {

QString fitMark(bool fits) { return fits ? QStringLiteral("✓") : QStringLiteral("✗"); }

}  // namespace

QuantizationPage::QuantizationPage(ModelWizard* wizard)
    : QWizardPage(wizard), wizard_(wizard), machine_(new QLabel(this)), table_(new QTableWidget(3, 6, this)),
      choices_(new QButtonGroup(this)), explanation_(new QLabel(this)), status_(new QLabel(this)), busy_(new QProgressBar(this)), error_(new QLabel(this)),
      retry_(new QPushButton(tr("Try Again"), this)) {
    setTitle(tr("How Precise Should the Experts Be?"));
    setSubTitle(tr("The routed experts are most of a model's weights; they live in RAM. Fewer bits per weight take "
                   "less memory and answer faster, at a small cost in quality."));
    table_->setHorizontalHeaderLabels({tr("Experts"), tr("RAM"), tr("GPU memory"), tr("Disk"), tr("Fits"), tr("Runs")});
    table_->verticalHeader()->setVisible(false);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setSelectionMode(QAbstractItemView::NoSelection);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    table_->horizontalHeader()->setSectionResizeMode(5, QHeaderView::ResizeToContents);  // where the experts run
    table_->setAccessibleName(tr("What each choice needs"));
    table_->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
    table_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    table_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Maximum);
    for (int row = 0; row < 3; ++row) {
        auto* button = new QRadioButton(precisionName(kWizardPrecisions[row]), table_);
        button->setAccessibleName(precisionName(kWizardPrecisions[row]));
        choices_->addButton(button, row);
        table_->setCellWidget(row, 0, button);
    }
    machine_->setWordWrap(true);
    explanation_->setWordWrap(true);
    explanation_->setAccessibleName(tr("Recommendation"));
    status_->setWordWrap(true);
    error_->setWordWrap(true);
    error_->setObjectName(QStringLiteral("wizardError"));
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(machine_);
    layout->addWidget(table_);
    layout->addWidget(explanation_);
    layout->addWidget(status_);
    // Moves from the moment Hugging Face is asked: an indeterminate bar.
    busy_->setRange(0, 0);
    busy_->setTextVisible(false);
    busy_->setMaximumHeight(8);
    busy_->setAccessibleName(tr("Looking up the model"));
    busy_->setVisible(false);
    layout->addWidget(busy_);
    layout->addStretch();
    auto* errorRow = new QHBoxLayout;
    errorRow->addWidget(error_, 1);
    errorRow->addWidget(retry_, 0, Qt::AlignTop);
    layout->addLayout(errorRow);
    setCommitPage(true);

    connect(choices_, &QButtonGroup::idToggled, this, [this] { emit completeChanged(); });
    connect(this, &QWizardPage::completeChanged, this, &QuantizationPage::showActivity);
    connect(retry_, &QPushButton::clicked, this, &QuantizationPage::lookUp);
    ModelDownloader* downloader = wizard_->downloader();
    connect(downloader, &ModelDownloader::filesListed, this, [this](const QList<hub::RepoFile>& files) {
        if (lookup_ == Lookup::Listing) onFilesListed(files);
    });
    connect(downloader, &ModelDownloader::listFailed, this, [this](const QString& message) {
        if (lookup_ == Lookup::Listing) fail(message);
    });
    connect(downloader, &ModelDownloader::finished, this, [this] {
        if (lookup_ == Lookup::FetchingConfig) onConfigFetched();
    });
    connect(downloader, &ModelDownloader::failed, this, [this](const QString& message) {
        if (lookup_ == Lookup::FetchingConfig) fail(message);
    });
}

void QuantizationPage::initializePage() {
    const WizardPlan& plan = wizard_->plan();
    setButtonText(QWizard::CommitButton, plan.fromHub() ? tr("Download") : tr("Convert"));
    lookUp();
}

void QuantizationPage::cleanupPage() {
    lookup_ = Lookup::Idle;
    showActivity();
}

void QuantizationPage::showActivity() {
    const bool asking = lookup_ == Lookup::Listing || lookup_ == Lookup::FetchingConfig;
    busy_->setVisible(asking);
    // The wizard's commit button, shared with the other commit pages: its tooltip is cleared when this
    // page is left (validatePage, cleanupPage).
    QAbstractButton* commit = wizard_->button(QWizard::CommitButton);
    if (!commit) return;
    if (lookup_ == Lookup::Idle) {
        commit->setToolTip({});
        return;
    }
    const WizardPlan& plan = wizard_->plan();
    QString reason;
    if (lookup_ == Lookup::Listing)
        reason = tr("Waiting for Hugging Face to list the files of %1.").arg(plan.repo);
    else if (lookup_ == Lookup::FetchingConfig)
        reason = tr("Waiting for %1's config.json from Hugging Face.").arg(plan.repo);
    else if (lookup_ == Lookup::Failed)
        reason = plan.fromHub() ? tr("%1 could not be looked up: press Try Again, or go Back and choose another model.").arg(plan.repo)
                                : tr("This model cannot be converted: go Back and choose another.");
    else if (chosen() < 0)
        reason = tr("Choose how precise the experts should be first.");
    commit->setToolTip(reason);
}

void QuantizationPage::lookUp() {
    error_->setVisible(false);
    retry_->setVisible(false);
    const WizardPlan& plan = wizard_->plan();
    if (!plan.fromHub()) {
        lookup_ = Lookup::Ready;
        showAdvice();
        return;
    }
    lookup_ = Lookup::Listing;
    status_->setText(tr("Looking up the files of %1 on Hugging Face… Download starts once they are listed.").arg(plan.repo));
    showAdvice();
    showActivity();
    wizard_->downloader()->listFiles(plan.repo, plan.revision);
}

void QuantizationPage::onFilesListed(const QList<hub::RepoFile>& files) {
    WizardPlan& plan = wizard_->plan();
    plan.files = modelFilesToDownload(files);
    const bool hasWeights = std::any_of(plan.files.begin(), plan.files.end(),
                                        [](const hub::RepoFile& f) { return f.path.endsWith(QLatin1String(".safetensors")); });
    const auto config = std::find_if(plan.files.begin(), plan.files.end(),
                                     [](const hub::RepoFile& f) { return f.path == QLatin1String("config.json"); });
    if (config == plan.files.end() || !hasWeights) {
        fail(tr("%1 has no config.json and .safetensors weights, so it is not a model Tandem can convert. Check the "
                "repository's name, or choose one that holds the model in safetensors form.")
                 .arg(plan.repo));
        return;
    }
    if (!plan.configJson.isEmpty()) {
        lookup_ = Lookup::Ready;
        status_->clear();
        showAdvice();
        return;
    }
    // A repository outside the curated list: its config.json tells the sizes. It lands where the rest of
    // the download goes, and counts as downloaded there.
    lookup_ = Lookup::FetchingConfig;
    status_->setText(tr("Reading %1's config.json…").arg(plan.repo));
    showActivity();
    wizard_->downloader()->start(plan.repo, plan.revision, {*config}, plan.downloadFolder);
}

void QuantizationPage::onConfigFetched() {
    WizardPlan& plan = wizard_->plan();
    QFile file(plan.downloadFolder + QStringLiteral("/config.json"));
    if (!file.open(QIODevice::ReadOnly)) {
        fail(tr("The download of %1's config.json finished, but %2 cannot be read.")
                 .arg(plan.repo, QDir::toNativeSeparators(file.fileName())));
        return;
    }
    plan.configJson = QString::fromUtf8(file.readAll());
    lookup_ = Lookup::Ready;
    status_->clear();
    showAdvice();
}

void QuantizationPage::fail(const QString& message) {
    lookup_ = Lookup::Failed;
    status_->clear();
    error_->setText(message);
    error_->setVisible(true);
    retry_->setVisible(true);
    emit completeChanged();
}

void QuantizationPage::showAdvice() {
    const WizardPlan& plan = wizard_->plan();
    const int contextLength = wizard_->parts().settings->engine().contextLength;
    QList<tandem::Footprint> needs;
    if (plan.source != WizardPlan::Source::Gguf && (!plan.fromHub() || !plan.configJson.isEmpty())) {
        try {
            for (const auto p : kWizardPrecisions)
                needs.append(plan.fromHub() ? tandem::estimateFootprintFromJson(plan.configJson.toStdString(), p, contextLength,
                                                                                plan.repo.toStdString() + "/config.json")
                                            : tandem::estimateFootprint(plan.localPath.toStdString(), p, contextLength));
        } catch (const std::exception& e) {
            fail(QString::fromStdString(e.what()));
            needs.clear();
        }
        // The engine's dense weights as Settings has them (int8 by default); its KV cache too, int8 if
        // chosen (on either path).
        if (wizard_->parts().settings->engine().int8Dense)
            for (auto& need : needs) need = tandem::withInt8Dense(need);
        if (wizard_->parts().settings->engine().int8KvCache)
            for (auto& need : needs) need = tandem::withInt8KvCache(need);
        // Once listed, the download's real size is known: what is not on disk yet.
        if (plan.fromHub() && lookup_ == Lookup::Ready)
            for (auto& need : needs) need.downloadBytes = static_cast<quint64>(totalSize(filesMissingFrom(plan.files, plan.downloadFolder)));
    }
    const MachineFigures machine = wizard_->machineFigures();
    advice_ = adviseQuantization(needs, plan.fromHub(), machine);
    machine_->setText(tr("This computer: %1 of RAM, %2, %3 free in %4.")
                          .arg(formatBytes(machine.ramBytes),
                               machine.vramBytes ? tr("%1 with %2 of memory").arg(machine.gpuName, formatBytes(machine.vramBytes))
                                                 : tr("no NVIDIA GPU"),
                               formatBytes(machine.freeDiskBytes), QDir::toNativeSeparators(machine.diskFolder)));
    for (int row = 0; row < 3; ++row) {
        const bool known = row < advice_.choices.size();
        const QuantizationChoice c = known ? advice_.choices[row] : QuantizationChoice{};
        const QString unknown = QStringLiteral("–");
        table_->setItem(row, 1, new QTableWidgetItem(known ? formatBytes(c.ramBytes) : unknown));
        table_->setItem(row, 2, new QTableWidgetItem(known ? (machine.vramBytes ? formatBytes(c.vramBytes) : tr("no GPU")) : unknown));
        table_->setItem(row, 3, new QTableWidgetItem(known ? formatBytes(c.diskBytes) : unknown));
        table_->setItem(row, 4, new QTableWidgetItem(known ? (row == advice_.recommended ? tr("✓ recommended") : fitMark(c.fits()))
                                                           : unknown));
        table_->setItem(row, 5, new QTableWidgetItem(known ? placementSummary(c, machine.vramBytes > 0) : unknown));
        if (known) table_->item(row, 5)->setToolTip(placementDetails(c, machine));
        if (known) {
            table_->item(row, 1)->setToolTip(tr("Routed experts %1 + KV cache for %2 tokens %3")
                                                  .arg(formatBytes(c.need.routedExpertBytes))
                                                  .arg(c.need.contextLength)
                                                  .arg(formatBytes(c.need.kvCacheBytes)));
            table_->item(row, 3)->setToolTip(plan.fromHub() ? tr("Download %1 + converted %2")
                                                                    .arg(formatBytes(c.need.downloadBytes), formatBytes(c.need.storeBytes))
                                                              : tr("Converted %1").arg(formatBytes(c.need.storeBytes)));
        }
    }
    // Without sizes the advice only speaks for a GGUF file; a repository's come once its config.json is read.
    explanation_->setText(needs.isEmpty() && plan.source != WizardPlan::Source::Gguf ? QString() : advice_.explanation);
    choices_->setExclusive(false);
    for (QAbstractButton* b : choices_->buttons()) b->setChecked(false);
    choices_->setExclusive(true);
    if (advice_.recommended >= 0) choose(advice_.recommended);
    emit completeChanged();
}

void QuantizationPage::choose(int row) {
    if (QAbstractButton* b = choices_->button(row)) b->setChecked(true);
}

bool QuantizationPage::isComplete() const {
    if (chosen() < 0) return false;
    const WizardPlan& plan = wizard_->plan();
    return plan.fromHub() ? lookup_ == Lookup::Ready : lookup_ != Lookup::Failed;
}

bool QuantizationPage::validatePage() {
    if (QAbstractButton* commit = wizard_->button(QWizard::CommitButton)) commit->setToolTip({});
    WizardPlan& plan = wizard_->plan();
    plan.experts = kWizardPrecisions[chosen()];
    plan.storeFolder = plan.modelsFolder + QLatin1Char('/') + plan.folderName() + QLatin1Char('-') + precisionName(plan.experts);
    wizard_->saveState(plan.fromHub() ? ModelWizardState::Stage::Downloading : ModelWizardState::Stage::Converting);
    return true;
}

int QuantizationPage::nextId() const { return wizard_->plan().fromHub() ? ModelWizard::DownloadId : ModelWizard::ConvertId; }

}  // namespace tandem::ui
