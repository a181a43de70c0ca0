#include "ui/wizard/model_wizard.h"

#include <QDir>
#include <QFileInfo>

#include "ui/wizard/choose_page.h"
#include "ui/wizard/convert_page.h"
#include "ui/wizard/done_page.h"
#include "ui/wizard/download_page.h"
#include "ui/wizard/quantization_page.h"
#include "ui/wizard/resume_page.h"

namespace tandem::ui {

QString WizardPlan::folderName() const {
    // owner--name, as the Hugging Face cache names its folders: Qwen/X and someorg/X are other models.
    if (fromHub()) return QString(repo).replace(QLatin1Char('/'), QStringLiteral("--"));
    const QFileInfo info(localPath);
    return info.isDir() ? QDir(localPath).dirName() : info.completeBaseName();
}

ModelWizard::ModelWizard(ModelWizardParts parts, QWidget* parent)
    : QWizard(parent), parts_(std::move(parts)),
      downloader_(parts_.downloaderFactory ? parts_.downloaderFactory() : makeHubDownloader(parts_.settings->hubEndpoint())) {
    setWindowTitle(tr("Get a Model"));
    setObjectName(QStringLiteral("modelWizard"));
    setWizardStyle(QWizard::ModernStyle);
    setOption(QWizard::NoBackButtonOnStartPage);
    setOption(QWizard::NoCancelButtonOnLastPage);
    plan_.modelsFolder = parts_.settings->modelsFolder();
    setPage(ResumeId, new ResumePage(this));
    setPage(ChooseId, new ChoosePage(this));
    setPage(QuantizationId, new QuantizationPage(this));
    setPage(DownloadId, new DownloadPage(this));
    setPage(ConvertId, new ConvertPage(this));
    setPage(DoneId, new DonePage(this));
    const bool unfinished = parts_.settings->modelWizardState().stage != ModelWizardState::Stage::None;
    setStartId(unfinished ? ResumeId : ChooseId);
    resize(820, 640);
}

ModelWizard::~ModelWizard() { emit closing(); }

MachineFigures ModelWizard::machineFigures() const {
    const int gpu = parts_.settings->engine().gpuDevice;
    return parts_.machineFigures ? parts_.machineFigures(gpu, plan_.modelsFolder) : readMachineFigures(gpu, plan_.modelsFolder);
}

void ModelWizard::saveState(ModelWizardState::Stage stage) {
    ModelWizardState s;
    s.stage = stage;
    s.name = plan_.name;
    s.repo = plan_.fromHub() ? plan_.repo : QString();
    s.revision = plan_.revision;
    s.filesJson = filesToJson(plan_.files);
    s.sourcePath = plan_.convertSource();
    s.storeDir = plan_.storeFolder;
    s.experts = precisionName(plan_.experts);
    parts_.settings->setModelWizardState(s);
}

int ModelWizard::restoreState(const ModelWizardState& s) {
    plan_ = {};
    plan_.modelsFolder = parts_.settings->modelsFolder();
    plan_.name = s.name;
    plan_.repo = s.repo;
    plan_.revision = s.revision.isEmpty() ? QStringLiteral("main") : s.revision;
    plan_.files = filesFromJson(s.filesJson);
    plan_.storeFolder = s.storeDir;
    plan_.experts = precisionFromName(s.experts).value_or(tandem::ExpertPrecision::INT4);
    if (!s.repo.isEmpty()) {
        plan_.source = WizardPlan::Source::Hub;
        plan_.downloadFolder = s.sourcePath;
    } else {
        plan_.localPath = s.sourcePath;
        plan_.source = s.sourcePath.endsWith(QLatin1String(".gguf"), Qt::CaseInsensitive) ? WizardPlan::Source::Gguf
                                                                                        : WizardPlan::Source::LocalFolder;
    }
    switch (s.stage) {
    case ModelWizardState::Stage::Downloading: return DownloadId;
    case ModelWizardState::Stage::Converting: return ConvertId;
    case ModelWizardState::Stage::Loading: return DoneId;
    case ModelWizardState::Stage::None: break;
    }
    return ChooseId;
}

void ModelWizard::startOver() {
    parts_.settings->clearModelWizardState();
    plan_ = {};
    plan_.modelsFolder = parts_.settings->modelsFolder();
    setStartId(ChooseId);
    restart();
}

void ModelWizard::done(int result) {
    emit closing();
    QWizard::done(result);
}

}  // namespace tandem::ui
