#include "ui/wizard/choose_page.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QRegularExpression>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "tandem/convert.h"
#include "ui/wizard/model_wizard.h"

namespace tandem::ui {
namespace {

// "owner/name", as the Hub spells repository ids.
const QRegularExpression kRepositoryId(QStringLiteral("^[A-Za-z0-9][\\w.-]*/[\\w.-]+$"));

bool isGguf(const QString& path) { return path.endsWith(QLatin1String(".gguf"), Qt::CaseInsensitive); }

}  // namespace

ChoosePage::ChoosePage(ModelWizard* wizard)
    : QWizardPage(wizard), wizard_(wizard), curatedModels_(curatedModels()),
      curated_(new QRadioButton(tr("A model Tandem knows"), this)), list_(new QTreeWidget(this)),
      repository_(new QRadioButton(tr("Any model on Hugging Face"), this)), repositoryEdit_(new QLineEdit(this)),
      local_(new QRadioButton(tr("A folder or .gguf file on this computer"), this)), localEdit_(new QLineEdit(this)),
      folderEdit_(new QLineEdit(this)), token_(new QLineEdit(this)), error_(new QLabel(this)) {
    setTitle(tr("Choose a Model"));
    setSubTitle(tr("Tandem downloads it from Hugging Face, converts it for this computer and opens a chat with it."));

    list_->setHeaderLabels({tr("Model"), tr("Parameters (active)"), tr("Download"), tr("About")});
    list_->setRootIsDecorated(false);
    list_->setAccessibleName(tr("Curated models"));
    list_->header()->setSectionResizeMode(3, QHeaderView::Stretch);
    fillCuratedList();
    repositoryEdit_->setPlaceholderText(tr("owner/name, e.g. Qwen/Qwen3-30B-A3B"));
    repositoryEdit_->setAccessibleName(tr("Hugging Face repository"));
    localEdit_->setPlaceholderText(tr("A Hugging Face model folder, a Tandem store, or a .gguf file"));
    localEdit_->setAccessibleName(tr("Local model path"));
    auto* browseFolder = new QPushButton(tr("Folder…"), this);
    auto* browseFile = new QPushButton(tr(".gguf File…"), this);
    folderEdit_->setText(QDir::toNativeSeparators(wizard_->plan().modelsFolder));
    folderEdit_->setAccessibleName(tr("Models folder"));
    auto* chooseFolder = new QPushButton(tr("Choose Folder…"), this);
    token_->setEchoMode(QLineEdit::Password);
    token_->setPlaceholderText(tr("Only for gated models such as Mixtral; or set HF_TOKEN"));
    token_->setAccessibleName(tr("Hugging Face access token"));
    error_->setWordWrap(true);
    error_->setObjectName(QStringLiteral("wizardError"));
    error_->setVisible(false);

    auto* layout = new QGridLayout(this);
    layout->addWidget(curated_, 0, 0, 1, 3);
    layout->addWidget(list_, 1, 0, 1, 3);
    layout->addWidget(repository_, 2, 0, 1, 3);
    layout->addWidget(repositoryEdit_, 3, 0, 1, 3);
    layout->addWidget(local_, 4, 0, 1, 3);
    layout->addWidget(localEdit_, 5, 0);
    layout->addWidget(browseFolder, 5, 1);
    layout->addWidget(browseFile, 5, 2);
    layout->addWidget(new QLabel(tr("Put models in:"), this), 6, 0, 1, 3);
    layout->addWidget(folderEdit_, 7, 0, 1, 2);
    layout->addWidget(chooseFolder, 7, 2);
    layout->addWidget(new QLabel(tr("Hugging Face access token:"), this), 8, 0, 1, 3);
    layout->addWidget(token_, 9, 0, 1, 3);
    layout->addWidget(error_, 10, 0, 1, 3);
    layout->setColumnStretch(0, 1);
    layout->setRowStretch(1, 1);

    curated_->setChecked(true);
    auto changed = [this] {
        error_->setVisible(false);
        emit completeChanged();
    };
    for (QRadioButton* b : {curated_, repository_, local_}) connect(b, &QRadioButton::toggled, this, changed);
    connect(list_, &QTreeWidget::itemSelectionChanged, this, [this, changed] {
        curated_->setChecked(true);
        changed();
    });
    connect(repositoryEdit_, &QLineEdit::textEdited, this, [this, changed] {
        repository_->setChecked(true);
        changed();
    });
    connect(localEdit_, &QLineEdit::textChanged, this, [this, changed] {
        local_->setChecked(true);
        changed();
    });
    connect(folderEdit_, &QLineEdit::textChanged, this, changed);
    connect(browseFolder, &QPushButton::clicked, this, &ChoosePage::browseLocalFolder);
    connect(browseFile, &QPushButton::clicked, this, &ChoosePage::browseGgufFile);
    connect(chooseFolder, &QPushButton::clicked, this, &ChoosePage::chooseModelsFolder);
}

void ChoosePage::fillCuratedList() {
    for (const CuratedModel& m : curatedModels_) {
        auto* item = new QTreeWidgetItem(list_);
        item->setText(0, m.name);
        item->setText(3, m.summary);
        item->setToolTip(0, m.repo);
        try {
            const tandem::Footprint f = tandem::estimateFootprintFromJson(m.configJson.toStdString(), tandem::ExpertPrecision::INT4);
            item->setText(1, tr("%1 (%2)").arg(formatParameters(f.totalParameters), formatParameters(f.activeParameters)));
            item->setText(2, formatBytes(f.downloadBytes));
        } catch (const std::exception&) {
            item->setText(1, tr("unknown"));  // the list ships with the app and its tests check it; not expected
        }
    }
    for (int c = 0; c < 3; ++c) list_->resizeColumnToContents(c);
}

bool ChoosePage::isComplete() const {
    if (folderEdit_->text().trimmed().isEmpty()) return false;
    if (curated_->isChecked()) return list_->currentItem() != nullptr && list_->currentItem()->isSelected();
    if (repository_->isChecked()) return kRepositoryId.match(repositoryEdit_->text().trimmed()).hasMatch();
    return !localEdit_->text().trimmed().isEmpty();
}

bool ChoosePage::validatePage() {
    WizardPlan& plan = wizard_->plan();
    plan = {};
    plan.modelsFolder = QDir::cleanPath(QDir::fromNativeSeparators(folderEdit_->text().trimmed()));
    wizard_->parts().settings->setModelsFolder(plan.modelsFolder);
    wizard_->downloader()->setAccessToken(token_->text().trimmed());
    if (curated_->isChecked()) {
        const CuratedModel& m = curatedModels_[list_->indexOfTopLevelItem(list_->currentItem())];
        plan.source = WizardPlan::Source::Hub;
        plan.repo = m.repo;
        plan.name = m.name;
        plan.configJson = m.configJson;
    } else if (repository_->isChecked()) {
        plan.source = WizardPlan::Source::Hub;
        plan.repo = repositoryEdit_->text().trimmed();
        plan.name = plan.repo;
    } else {
        const QString path = QDir::cleanPath(QDir::fromNativeSeparators(localEdit_->text().trimmed()));
        const QFileInfo info(path);
        plan.localPath = info.absoluteFilePath();
        if (info.isFile() && isGguf(path)) {
            plan.source = WizardPlan::Source::Gguf;
        } else if (info.isDir() && QFileInfo::exists(path + QStringLiteral("/tandem-store.json"))) {
            plan.source = WizardPlan::Source::LocalStore;
            plan.storeFolder = plan.localPath;
        } else if (info.isDir() && QFileInfo::exists(path + QStringLiteral("/config.json"))) {
            plan.source = WizardPlan::Source::LocalFolder;
        } else {
            error_->setText(info.exists()
                                ? tr("%1 is not a model: choose the folder of a Hugging Face model (config.json, "
                                     "*.safetensors, tokenizer.json), a folder Tandem converted, or a .gguf file.")
                                      .arg(QDir::toNativeSeparators(path))
                                : tr("%1 does not exist.").arg(QDir::toNativeSeparators(path)));
            error_->setVisible(true);
            return false;
        }
        plan.name = plan.folderName();
    }
    if (plan.fromHub()) plan.downloadFolder = plan.modelsFolder + QLatin1Char('/') + plan.folderName();
    return true;
}

int ChoosePage::nextId() const {
    const QString path = localEdit_->text().trimmed();
    if (local_->isChecked() && QFileInfo::exists(QDir::fromNativeSeparators(path) + QStringLiteral("/tandem-store.json")))
        return ModelWizard::DoneId;
    return ModelWizard::QuantizationId;
}

void ChoosePage::browseLocalFolder() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Choose a Model Folder"), wizard_->plan().modelsFolder);
    if (!dir.isEmpty()) localEdit_->setText(QDir::toNativeSeparators(dir));
}

void ChoosePage::browseGgufFile() {
    const QString file = QFileDialog::getOpenFileName(this, tr("Choose a GGUF File"), wizard_->plan().modelsFolder,
                                                      tr("GGUF models (*.gguf)"));
    if (!file.isEmpty()) localEdit_->setText(QDir::toNativeSeparators(file));
}

void ChoosePage::chooseModelsFolder() {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Put Models In"), folderEdit_->text());
    if (!dir.isEmpty()) folderEdit_->setText(QDir::toNativeSeparators(dir));
}

}  // namespace tandem::ui
