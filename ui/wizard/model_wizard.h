#pragma once
// "Get a Model": from "I want DeepSeek-V3" to chatting, without a terminal. Pages:
//
//   Resume        (only when an earlier run stopped mid-way) carry on, or start over
//   Choose        a curated model, any Hugging Face repository, or a folder / .gguf on this computer
//   Quantization  bf16 / int8 / int4 with the RAM, VRAM and disk each needs against this machine
//   Download      per-file and total progress, speed, ETA; pause, resume, cancel
//   Convert       into a packed store, with progress and cancel
//   Done          loads the model through ModelController and opens a new chat
//
// Where it is persists in AppSettings (ModelWizardState) from the moment the download or conversion
// starts, so a wizard opened after the app was closed mid-way offers to resume: the download picks up
// its partial files and the conversion its .partial store.
#include <QList>
#include <QWizard>
#include <functional>

#include "ui/settings/app_settings.h"
#include "ui/wizard/model_downloader.h"
#include "ui/wizard/quantization_advice.h"

namespace tandem::ui {

class ChatController;
class ModelController;

struct ModelWizardParts {
    AppSettings* settings;
    ModelController* model;
    ChatController* chat;
    ModelDownloaderFactory downloaderFactory;  // null: makeHubDownloader
    MachineFiguresProvider machineFigures;     // null: readMachineFigures
    int convertThreads = 0;                    // <= 0: one per hardware thread
};

// What the user has chosen so far; the pages fill it in and read it.
struct WizardPlan {
    enum class Source { Hub, LocalFolder, LocalStore, Gguf };
    Source source = Source::Hub;
    QString name;        // "DeepSeek-V3", "org/model", a folder or file name
    QString repo;        // Hub only
    QString revision = QStringLiteral("main");
    QString configJson;  // Hub: the curated copy, or the repository's own once fetched
    QString localPath;   // a local folder, store or .gguf
    QList<hub::RepoFile> files;  // Hub: what to download, once listed
    tandem::ExpertPrecision experts = tandem::ExpertPrecision::INT4;
    QString modelsFolder;

    // Fixed once chosen and kept in the saved state, so a resumed run finds its files where it left them.
    QString downloadFolder;  // Hub: <models folder>/<owner>--<name>
    QString storeFolder;     // <models folder>/<name>-<type>; a local store: the store itself

    bool fromHub() const { return source == Source::Hub; }
    // What the converter reads: the download folder, the local folder or the .gguf file.
    QString convertSource() const { return fromHub() ? downloadFolder : localPath; }
    // A folder name for this model: owner--name of a repository, or the local folder's or file's name.
    QString folderName() const;
};

class ModelWizard : public QWizard {
    Q_OBJECT
public:
    enum PageId { ResumeId, ChooseId, QuantizationId, DownloadId, ConvertId, DoneId };

    explicit ModelWizard(ModelWizardParts parts, QWidget* parent = nullptr);
    ~ModelWizard() override;

    WizardPlan& plan() { return plan_; }
    const ModelWizardParts& parts() const { return parts_; }
    ModelDownloader* downloader() const { return downloader_.get(); }
    MachineFigures machineFigures() const;

    // Saves where the wizard is now, for a later run to resume from.
    void saveState(ModelWizardState::Stage stage);
    // Fills the plan from a saved state; returns the page to carry on at.
    int restoreState(const ModelWizardState& state);
    // Forgets a saved state and goes back to the first page.
    void startOver();

    // Also a closed window stops work in progress; the state stays for next time.
    void done(int result) override;

signals:
    // Work in progress should stop now (the window is closing); partial files stay.
    void closing();

private:
    ModelWizardParts parts_;
    std::unique_ptr<ModelDownloader> downloader_;
    WizardPlan plan_;
};

}  // namespace tandem::ui
