#pragma once
// The app's settings. It edits a copy; the main window saves the result and, when an engine setting
// changed, offers to reload the model.
#include <QDialog>

#include "ui/settings/app_settings.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTabWidget;

namespace tandem::ui {

class SamplingEditor;

struct SettingsValues {
    EngineSettings engine;
    SamplingDefaults sampling;
    Appearance appearance;
    int defaultDeferral = 0;
    QString hubEndpoint;
    ServerSettings server;
    // engine.modelDir is a model on a server: the name it was given (shown instead of its key).
    QString remoteModelName = {};

    static SettingsValues read(const AppSettings& settings);
    void write(AppSettings& settings) const;
    // Engine settings only take effect when the model is loaded again; so do the GPU sessions reserved for
    // the server (gpuSessionsFor: its requests decoded together, with the server on).
    bool needsReloadComparedTo(const SettingsValues& before) const {
        EngineSettings now = engine, then = before.engine;
        now.serverGpuBatch = gpuSessionsFor(engine, server);
        then.serverGpuBatch = gpuSessionsFor(before.engine, before.server);
        return !(now == then);
    }
};

class SettingsDialog : public QDialog {
    Q_OBJECT
public:
    SettingsDialog(const SettingsValues& values, const QStringList& gpuNames, QWidget* parent = nullptr);

    SettingsValues values() const;
    void setValues(const SettingsValues& values);
    // What the loaded model runs with, shown beside what is asked for (a context length the model caps,
    // the threads "Automatic" means, each GPU's share when it spans several); null: no model loaded.
    void setInEffect(const ModelSummary* model);
    // Why the Server page's values cannot be used, or empty (OK is refused while there is a reason).
    QString serverProblem() const;

public slots:
    void accept() override;

protected:
    void showEvent(QShowEvent* event) override;

private:
    // The kernel row's note: flags a kernel this CPU cannot run.
    void updateKernelNote();
    void updateContextNote();
    // The context note's height for its text at the field's width (a wrapped label in a form is given
    // one line otherwise); the dialog grows to it.
    void fitContextNote();

    QWidget* engineTab(const QStringList& gpuNames);
    QWidget* generationTab();
    QWidget* appearanceTab();
    QWidget* downloadsTab();
    QWidget* serverTab();
    void updateServerPage();

    QLineEdit* modelDir_;
    // A model on a server in Model folder: its key, and the text shown for it (while it is unchanged, the
    // key is what values() gives).
    QString remoteKey_, remoteShown_;
    QSpinBox* threads_;
    QComboBox* numa_;
    QComboBox* kernel_;
    QComboBox* device_;
    // Under Device, "settingsGpuStages": the loaded model's share on each GPU when the GPU path spans
    // two or more (ModelSummary::gpuStages); hidden otherwise.
    QWidget* gpuStages_;
    QLabel* gpuStagesText_;
    QSpinBox* contextLength_;
    QSpinBox* gpuExpertMemory_;
    QCheckBox* int8Dense_;
    QComboBox* kvCache_;  // float32, int8
    QSpinBox* serverGpuBatch_;  // Server page: EngineSettings::serverGpuBatch (with the server on and a GPU)
    bool hasGpu_;
    QLabel* kernelNote_;
    QLabel* contextNote_;
    int modelContext_ = 0;  // the loaded model's context length, 0: none loaded
    int modelMaxContext_ = 0;         // the most it holds
    quint64 kvBytesPerPosition_ = 0;  // its KV cache per position of one conversation, as held now
    quint64 kvFloat32_ = 0, kvInt8_ = 0;  // the same for each choice of kvCache_
    QString kvCacheNotice_;               // the loaded model's cache is not as asked, and why
    bool firstGpuSaved_ = false;          // GPU 0 chosen by number (kFirstGpuDevice), shown as the only GPU's entry
    QSpinBox* defaultDeferral_;
    QCheckBox* useModelSampling_;
    SamplingEditor* sampling_;
    QSpinBox* maxNewTokens_;
    QComboBox* theme_;
    QSpinBox* fontSize_;
    QLineEdit* hubEndpoint_;
    QTabWidget* tabs_;
    QWidget* serverPage_;
    QCheckBox* serverEnabled_;
    QLineEdit* serverHost_;
    QSpinBox* serverPort_;
    QLineEdit* apiKey_;
    QLabel* serverAddress_;
    QLabel* serverProblem_;
};

}  // namespace tandem::ui
