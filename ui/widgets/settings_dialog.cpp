#include "ui/widgets/settings_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QStandardItemModel>
#include <QShowEvent>
#include <QSpinBox>
#include <QTabWidget>
#include <QThread>
#include <QVBoxLayout>
#include <algorithm>

#include "tandem/build_info.h"
#include "ui/widgets/sampling_editor.h"

namespace tandem::ui {
namespace {

// Marks the settings that need a model reload.
const QString kReload = QStringLiteral(" ⟳");

// A form row's label whose field is a layout: QFormLayout gives such a row no buddy, and its "&" would
// show as it is rather than mark the Alt shortcut.
QLabel* buddyLabel(const QString& text, QWidget* buddy, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    label->setBuddy(buddy);
    return label;
}

QLabel* hint(const QString& text, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    label->setWordWrap(true);
    label->setObjectName(QStringLiteral("hint"));
    return label;
}

// The kernels of the list after Automatic, as the engine names them, strongest first.
const char* const kKernelEngineNames[] = {"amx", "avx512", "avx2"};
const char* const kKernelShownNames[] = {"AMX", "AVX-512", "AVX2"};

int kernelLevel(const std::string& name) {
    const std::string names[] = {"scalar", "avx2", "avx512", "amx"};
    for (int i = 0; i < 4; ++i)
        if (name == names[i]) return i;
    return -1;
}

QString shownKernel(const std::string& name) {
    for (int i = 0; i < 3; ++i)
        if (name == kKernelEngineNames[i]) return QString::fromLatin1(kKernelShownNames[i]);
    return QString::fromStdString(name);
}

// Whether this machine runs the kernel (row 1..3 of the list): compiled in and, when the engine chose
// by CPUID, no stronger than its choice (with TANDEM_CPU_ISA set the CPU's best is not known here).
bool kernelRuns(int row) {
    const tandem::BuildInfo& build = tandem::buildInfo();
    const std::string name = kKernelEngineNames[row - 1];
    if (std::find(build.cpuKernels.begin(), build.cpuKernels.end(), name) == build.cpuKernels.end()) return false;
    if (build.cpuKernelSource != "best for this CPU") return true;
    const int best = kernelLevel(build.cpuKernel);
    return best >= 0 && kernelLevel(name) <= best;
}

}  // namespace

SettingsValues SettingsValues::read(const AppSettings& s) {
    SettingsValues v{s.engine(), s.sampling(), s.appearance(), s.defaultDeferral(), s.hubEndpoint(), s.server()};
    if (isRemoteModelKey(v.engine.modelDir)) {
        const RemoteEndpoint e = s.remoteModel(remoteModelId(v.engine.modelDir));
        v.remoteModelName = e.name.isEmpty() ? e.model : e.name;
    }
    return v;
}

void SettingsValues::write(AppSettings& s) const {
    s.setEngine(engine);
    s.setSampling(sampling);
    s.setAppearance(appearance);
    s.setDefaultDeferral(defaultDeferral);
    s.setHubEndpoint(hubEndpoint);
    s.setServer(server);
    s.sync();
}

SettingsDialog::SettingsDialog(const SettingsValues& values, const QStringList& gpuNames, QWidget* parent)
    : QDialog(parent), hasGpu_(!gpuNames.isEmpty()) {
    setWindowTitle(tr("Settings"));
    setAccessibleName(tr("Settings"));
    auto* layout = new QVBoxLayout(this);
    auto* tabs = tabs_ = new QTabWidget(this);
    // Every tab shows whole: the dialog is at least as wide as the tab bar.
    tabs->setUsesScrollButtons(false);
    tabs->addTab(engineTab(gpuNames), tr("&Model and engine"));
    tabs->addTab(generationTab(), tr("&Generation"));
    tabs->addTab(appearanceTab(), tr("&Appearance"));
    tabs->addTab(downloadsTab(), tr("&Downloads"));
    tabs->addTab(serverPage_ = serverTab(), tr("&Server"));
    layout->addWidget(tabs);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel | QDialogButtonBox::RestoreDefaults, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(buttons->button(QDialogButtonBox::RestoreDefaults), &QPushButton::clicked, this, [this] { setValues({}); });
    layout->addWidget(buttons);
    setValues(values);
}

QWidget* SettingsDialog::engineTab(const QStringList& gpuNames) {
    auto* page = new QWidget(this);
    auto* form = new QFormLayout(page);

    modelDir_ = new QLineEdit(page);
    modelDir_->setPlaceholderText(tr("The model that comes with Tandem"));
    modelDir_->setAccessibleName(tr("Model folder"));
    modelDir_->setClearButtonEnabled(true);
    auto* browse = new QPushButton(tr("Browse…"), page);
    browse->setAccessibleName(tr("Browse for the model folder"));
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Model Folder"), modelDir_->text());
        if (!dir.isEmpty()) modelDir_->setText(dir);
    });
    auto* row = new QHBoxLayout;
    row->addWidget(modelDir_, 1);
    row->addWidget(browse);
    form->addRow(buddyLabel(tr("Model &folder:") + kReload, modelDir_, page), row);

    threads_ = new QSpinBox(page);
    threads_->setRange(0, 1024);
    threads_->setSpecialValueText(tr("Automatic (%1)").arg(QThread::idealThreadCount()));
    threads_->setAccessibleName(tr("CPU threads"));
    form->addRow(tr("CPU &threads:") + kReload, threads_);

    numa_ = new QComboBox(page);
    numa_->addItems({tr("Automatic"), tr("Off"), tr("Split experts across nodes")});
    numa_->setAccessibleName(tr("NUMA policy"));
    numa_->setToolTip(tr("On machines with several memory nodes, where the experts' weights live."));
    form->addRow(tr("&NUMA policy:") + kReload, numa_);

    // Only the kernels this CPU runs can be chosen; Automatic names the one it runs.
    kernel_ = new QComboBox(page);
    const tandem::BuildInfo& build = tandem::buildInfo();
    kernel_->addItem(build.cpuKernelSource == "best for this CPU"
                         ? tr("Automatic (%1, the best for this CPU)").arg(shownKernel(build.cpuKernel))
                         : tr("Automatic (%1, from TANDEM_CPU_ISA)").arg(shownKernel(build.cpuKernel)));
    auto* kernels = qobject_cast<QStandardItemModel*>(kernel_->model());
    for (int row = 1; row <= 3; ++row) {
        const QString name = QString::fromLatin1(kKernelShownNames[row - 1]);
        const bool runs = kernelRuns(row);
        kernel_->addItem(runs ? name : tr("%1 (not on this CPU)").arg(name));
        if (!runs && kernels) kernels->item(row)->setEnabled(false);
    }
    kernel_->setAccessibleName(tr("CPU kernel"));
    kernelNote_ = hint(QString(), page);
    kernelNote_->setVisible(false);
    connect(kernel_, &QComboBox::currentIndexChanged, this, &SettingsDialog::updateKernelNote);
    auto* kernelBox = new QVBoxLayout;
    kernelBox->addWidget(kernel_);
    kernelBox->addWidget(kernelNote_);
    form->addRow(buddyLabel(tr("CPU &kernel:") + kReload, kernel_, page), kernelBox);

    device_ = new QComboBox(page);
    device_->setAccessibleName(tr("Device"));
    if (gpuNames.isEmpty()) {
        // Nothing to choose: the one entry says where the model runs (its value, kept as saved, is set
        // by setValues, so a GPU added later is used as before).
        device_->addItem(tr("CPU (no GPU found)"), 0);
        device_->setEnabled(false);
        device_->setToolTip(tr("No NVIDIA GPU was found (or its driver is not loaded): the model runs on the CPU."));
    } else {
        device_->addItem(tr("CPU only"), -1);
        // 0 asks for no GPU in particular: with one GPU that one (named); with several, the engine takes the one
        // with the most memory (the dashboard then follows the one the model runs on), and each GPU has its
        // own entry, GPU 0 as kFirstGpuDevice.
        if (gpuNames.size() > 1) device_->addItem(tr("Automatic: the GPU with the most memory"), 0);
        for (int i = 0; i < gpuNames.size(); ++i)
            device_->addItem(tr("GPU %1: %2").arg(i).arg(gpuNames[i]), i == 0 && gpuNames.size() > 1 ? kFirstGpuDevice : i);
        // Several GPUs: the layers split across them, each holding the routed experts its memory allows.
        if (gpuNames.size() > 1)
            device_->addItem(tr("Every GPU (%1), the layers split across them (new)").arg(gpuNames.size()), kEveryGpuDevice);
    }
    // The loaded model over several GPUs (a pipeline by layer): what each one holds; filled by setInEffect.
    gpuStages_ = new QWidget(page);
    gpuStages_->setObjectName(QStringLiteral("settingsGpuStages"));
    auto* stagesLayout = new QVBoxLayout(gpuStages_);
    stagesLayout->setContentsMargins(0, 0, 0, 0);
    gpuStagesText_ = hint(QString(), gpuStages_);
    gpuStagesText_->setTextFormat(Qt::PlainText);
    stagesLayout->addWidget(gpuStagesText_);
    gpuStages_->setVisible(false);
    auto* deviceBox = new QVBoxLayout;
    deviceBox->addWidget(device_);
    deviceBox->addWidget(gpuStages_);
    form->addRow(buddyLabel(tr("&Device:") + kReload, device_, page), deviceBox);

    gpuExpertMemory_ = new QSpinBox(page);
    gpuExpertMemory_->setRange(-1, 1 << 16);
    gpuExpertMemory_->setSuffix(tr(" GB"));
    gpuExpertMemory_->setSpecialValueText(tr("Automatic (what the GPU has free)"));
    gpuExpertMemory_->setAccessibleName(tr("GPU memory for experts"));
    gpuExpertMemory_->setToolTip(tr("How much GPU memory holds routed experts: whole layers, the last first; the rest "
                                    "run on the CPU, and long prompts stream them through the GPU. 0 keeps them all on "
                                    "the CPU."));
    gpuExpertMemory_->setEnabled(!gpuNames.isEmpty());
    form->addRow(tr("GPU &memory for experts:") + kReload, gpuExpertMemory_);

    int8Dense_ = new QCheckBox(tr("int8 (about twice as fast on the CPU, faster on the GPU, nearly the same answers)"), page);
    int8Dense_->setAccessibleName(tr("Dense weights in int8"));
    int8Dense_->setToolTip(tr("The model's attention, dense layers and output head are held in int8 (quantized at "
                              "load), on the CPU and on the GPU: half the bytes each token reads. FP8 weights stay "
                              "FP8 on the GPU."));
    form->addRow(tr("Dense &weights:") + kReload, int8Dense_);

    contextLength_ = new QSpinBox(page);
    contextLength_->setRange(256, 1 << 20);
    contextLength_->setSingleStep(1024);
    contextLength_->setSuffix(tr(" tokens"));
    contextLength_->setAccessibleName(tr("Context length"));
    contextLength_->setToolTip(tr("How much conversation the model can see. Longer needs more memory."));
    contextNote_ = hint(QString(), page);
    contextNote_->setVisible(false);
    connect(contextLength_, &QSpinBox::valueChanged, this, &SettingsDialog::updateContextNote);
    auto* contextBox = new QVBoxLayout;
    contextBox->addWidget(contextLength_);
    contextBox->addWidget(contextNote_);
    form->addRow(buddyLabel(tr("&Context length:") + kReload, contextLength_, page), contextBox);

    // How each conversation's keys and values are held: the context note below the length shows what each
    // choice costs at that length.
    kvCache_ = new QComboBox(page);
    kvCache_->addItem(tr("float32 (exact)"));
    kvCache_->addItem(tr("int8 (about a quarter of the memory)"));
    kvCache_->setAccessibleName(tr("KV cache"));
    kvCache_->setToolTip(tr("How each conversation's keys and values are held. int8 keeps a scale per head and "
                            "position: about 3.9x the context in the same memory, on the CPU or the GPU; answers stay "
                            "nearly the same (docs/BENCHMARKS.md). The GPU also keeps the layer it is computing in "
                            "float32 while it reads it."));
    connect(kvCache_, &QComboBox::currentIndexChanged, this, &SettingsDialog::updateContextNote);
    form->addRow(tr("&KV cache:") + kReload, kvCache_);
    form->addRow(hint(tr("⟳ These take effect when the model is loaded again; Tandem offers to do it when you press OK."), page));
    return page;
}

QWidget* SettingsDialog::generationTab() {
    auto* page = new QWidget(this);
    auto* layout = new QVBoxLayout(page);
    auto* form = new QFormLayout;
    defaultDeferral_ = new QSpinBox(page);
    defaultDeferral_->setRange(0, 63);
    defaultDeferral_->setAccessibleName(tr("Default expert deferral"));
    form->addRow(tr("Default expert &deferral:"), defaultDeferral_);
    form->addRow(hint(tr("For models you have not set it for on the dashboard; 0 is exact."), page));
    maxNewTokens_ = new QSpinBox(page);
    maxNewTokens_->setRange(1, 1 << 17);
    maxNewTokens_->setAccessibleName(tr("Longest answer in tokens"));
    form->addRow(tr("&Longest answer:"), maxNewTokens_);
    layout->addLayout(form);
    useModelSampling_ = new QCheckBox(tr("Use each model's recommended sampling"), page);
    useModelSampling_->setToolTip(tr("From the model's generation_config.json, as its authors tuned it."));
    layout->addWidget(useModelSampling_);
    sampling_ = new SamplingEditor(page);
    layout->addWidget(sampling_);
    connect(useModelSampling_, &QCheckBox::toggled, sampling_, &QWidget::setDisabled);
    layout->addStretch();
    return page;
}

QWidget* SettingsDialog::appearanceTab() {
    auto* page = new QWidget(this);
    auto* form = new QFormLayout(page);
    theme_ = new QComboBox(page);
    theme_->addItems({tr("Match the system"), tr("Light"), tr("Dark")});
    theme_->setAccessibleName(tr("Theme"));
    form->addRow(tr("&Theme:"), theme_);
    fontSize_ = new QSpinBox(page);
    fontSize_->setRange(0, 32);
    fontSize_->setSpecialValueText(tr("System default"));
    fontSize_->setSuffix(tr(" pt"));
    fontSize_->setAccessibleName(tr("Font size"));
    form->addRow(tr("&Font size:"), fontSize_);
    return page;
}

QWidget* SettingsDialog::downloadsTab() {
    auto* page = new QWidget(this);
    auto* form = new QFormLayout(page);
    hubEndpoint_ = new QLineEdit(page);
    const QString environment = qEnvironmentVariable("HF_ENDPOINT");
    hubEndpoint_->setPlaceholderText(environment.isEmpty() ? QStringLiteral("https://huggingface.co") : environment);
    hubEndpoint_->setAccessibleName(tr("Hugging Face address"));
    hubEndpoint_->setToolTip(tr("Leave empty to download from Hugging Face ($HF_ENDPOINT when it is set)."));
    form->addRow(tr("Hugging Face &address:"), hubEndpoint_);
    form->addRow(hint(tr("A mirror of the Hugging Face Hub to download models from, e.g. https://hf-mirror.com. "
                         "Gated models need an access token, asked for when you get a model."),
                      page));
    return page;
}

QWidget* SettingsDialog::serverTab() {
    auto* page = new QWidget(this);
    auto* form = new QFormLayout(page);
    serverEnabled_ = new QCheckBox(tr("S&erve the loaded model over the OpenAI API"), page);
    serverEnabled_->setAccessibleName(tr("Serve the model"));
    form->addRow(serverEnabled_);
    form->addRow(hint(tr("Other programs (editors, agents, scripts using an OpenAI client) use the model you have "
                         "loaded, with no second copy in memory; their requests take turns with your chats, and "
                         "on the CPU up to four of them are answered together."),
                      page));

    serverHost_ = new QLineEdit(page);
    serverHost_->setPlaceholderText(QStringLiteral("127.0.0.1"));
    serverHost_->setAccessibleName(tr("Server address"));
    form->addRow(tr("Add&ress:"), serverHost_);
    form->addRow(hint(tr("127.0.0.1: this computer only. Any other address (0.0.0.0: all of this computer's "
                         "networks) lets other computers in, and needs an API key."),
                      page));

    serverPort_ = new QSpinBox(page);
    serverPort_->setRange(1, 65535);
    serverPort_->setAccessibleName(tr("Server port"));
    form->addRow(tr("&Port:"), serverPort_);

    apiKey_ = new QLineEdit(page);
    apiKey_->setEchoMode(QLineEdit::Password);
    apiKey_->setPlaceholderText(tr("None (this computer only)"));
    apiKey_->setAccessibleName(tr("API key"));
    auto* show = new QPushButton(tr("Show"), page);
    show->setCheckable(true);
    show->setAccessibleName(tr("Show the API key"));
    connect(show, &QPushButton::toggled, this, [this, show](bool shown) {
        apiKey_->setEchoMode(shown ? QLineEdit::Normal : QLineEdit::Password);
        show->setText(shown ? tr("Hide") : tr("Show"));
    });
    auto* generate = new QPushButton(tr("Ge&nerate"), page);
    generate->setAccessibleName(tr("Generate an API key"));
    generate->setToolTip(tr("A new random key; copy it into the programs that use the server."));
    connect(generate, &QPushButton::clicked, this, [this] { apiKey_->setText(generateApiKey()); });
    auto* keyRow = new QHBoxLayout;
    keyRow->addWidget(apiKey_, 1);
    keyRow->addWidget(show);
    keyRow->addWidget(generate);
    form->addRow(buddyLabel(tr("API &key:"), apiKey_, page), keyRow);
    form->addRow(hint(tr("Clients send it as \"Authorization: Bearer KEY\" (an OpenAI client's api_key). With a key, "
                         "every /v1 request must bring it."),
                      page));

    // On the GPU the requests decoded together each need a conversation's GPU memory, reserved at load.
    serverGpuBatch_ = new QSpinBox(page);
    serverGpuBatch_->setRange(1, kMaxServerGpuBatch);
    serverGpuBatch_->setSpecialValueText(tr("1 (one at a time)"));
    serverGpuBatch_->setAccessibleName(tr("Requests together on the GPU"));
    serverGpuBatch_->setToolTip(tr("Above 1, while the server is on, the GPU holds that many more conversations (their KV "
                                   "caches at the context length) from when the model is loaded, and the routed experts get "
                                   "what is left. On the CPU up to four requests are answered together anyway."));
    form->addRow(buddyLabel(tr("On the &GPU, answer together:") + kReload, serverGpuBatch_, page), serverGpuBatch_);
    form->addRow(hint(tr("⟳ Takes effect when the model is loaded again; Tandem offers to do it when you press OK."), page));

    serverAddress_ = hint(QString(), page);
    serverAddress_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(serverAddress_);
    serverProblem_ = new QLabel(page);
    serverProblem_->setWordWrap(true);
    serverProblem_->setObjectName(QStringLiteral("serverProblem"));
    serverProblem_->setStyleSheet(QStringLiteral("color: #c62828;"));
    serverProblem_->setVisible(false);
    form->addRow(serverProblem_);

    connect(serverEnabled_, &QCheckBox::toggled, this, &SettingsDialog::updateServerPage);
    connect(serverHost_, &QLineEdit::textChanged, this, &SettingsDialog::updateServerPage);
    connect(serverPort_, &QSpinBox::valueChanged, this, &SettingsDialog::updateServerPage);
    connect(apiKey_, &QLineEdit::textChanged, this, &SettingsDialog::updateServerPage);
    return page;
}

QString SettingsDialog::serverProblem() const { return serverSettingsProblem(values().server); }

void SettingsDialog::updateServerPage() {
    const ServerSettings s = values().server;
    for (QWidget* w : {static_cast<QWidget*>(serverHost_), static_cast<QWidget*>(serverPort_), static_cast<QWidget*>(apiKey_)})
        w->setEnabled(s.enabled);
    serverGpuBatch_->setEnabled(s.enabled && hasGpu_);
    const QString host = s.host.isEmpty() ? QStringLiteral("127.0.0.1") : s.host;
    const QString shownHost = host.contains(QLatin1Char(':')) && !host.startsWith(QLatin1Char('[')) ? QStringLiteral("[%1]").arg(host) : host;
    serverAddress_->setText(tr("Clients use http://%1:%2/v1 (/v1/chat/completions, /v1/completions, /v1/models; "
                               "/health), for the model you have loaded.")
                                .arg(shownHost)
                                .arg(s.port));
    // A problem shown after OK was refused goes as soon as it is fixed; a new one waits for OK.
    if (serverProblem_->isVisible()) {
        const QString problem = serverSettingsProblem(s);
        serverProblem_->setText(problem);
        serverProblem_->setVisible(!problem.isEmpty());
    }
}

void SettingsDialog::accept() {
    if (const QString problem = serverProblem(); !problem.isEmpty()) {
        serverProblem_->setText(problem);
        serverProblem_->setVisible(true);
        tabs_->setCurrentWidget(serverPage_);
        const ServerSettings s = values().server;
        if (!isLoopbackAddress(s.host) && s.apiKey.isEmpty()) apiKey_->setFocus();
        else serverHost_->setFocus();
        return;
    }
    QDialog::accept();
}

void SettingsDialog::setValues(const SettingsValues& v) {
    remoteKey_.clear();
    remoteShown_.clear();
    if (isRemoteModelKey(v.engine.modelDir)) {
        remoteKey_ = v.engine.modelDir;
        remoteShown_ = tr("%1 (on a server: File ▸ Edit Server)").arg(v.remoteModelName.isEmpty() ? v.engine.modelDir : v.remoteModelName);
    }
    modelDir_->setText(remoteKey_.isEmpty() ? v.engine.modelDir : remoteShown_);
    threads_->setValue(v.engine.threads);
    numa_->setCurrentIndex(static_cast<int>(v.engine.numaPolicy));
    kernel_->setCurrentIndex(static_cast<int>(v.engine.cpuKernel));
    if (!device_->isEnabled()) {
        device_->setItemData(0, v.engine.gpuDevice);  // no GPU here: the saved choice is kept as it is
    } else {
        // A GPU saved that is not here now is shown as such, not taken for another.
        for (int row = device_->count() - 1; row > 0; --row)
            if (device_->itemData(row, Qt::UserRole + 1).toBool()) device_->removeItem(row);
        // GPU 0 chosen by number where it is the only GPU: its one entry (with one GPU, automatic is GPU 0), and
        // values() gives the choice back as it was saved unless another is made.
        firstGpuSaved_ = v.engine.gpuDevice == kFirstGpuDevice;
        const int shown = firstGpuSaved_ && device_->findData(kFirstGpuDevice) < 0 ? 0 : v.engine.gpuDevice;
        if (device_->findData(shown) < 0) {
            device_->addItem(v.engine.gpuDevice == kEveryGpuDevice ? tr("Every GPU (one found: runs on it)")
                                                                   : tr("GPU %1 (not found: runs on the CPU)").arg(v.engine.gpuDevice),
                             v.engine.gpuDevice);
            device_->setItemData(device_->count() - 1, true, Qt::UserRole + 1);  // the saved choice's own entry
        }
        device_->setCurrentIndex(device_->findData(shown));
    }
    contextLength_->setValue(v.engine.contextLength);
    gpuExpertMemory_->setValue(v.engine.gpuExpertMemoryGb);
    int8Dense_->setChecked(v.engine.int8Dense);
    kvCache_->setCurrentIndex(v.engine.int8KvCache ? 1 : 0);
    defaultDeferral_->setValue(v.defaultDeferral);
    useModelSampling_->setChecked(v.sampling.useModelRecommendation);
    sampling_->setEnabled(!v.sampling.useModelRecommendation);
    sampling_->setSampling(v.sampling.sampling);
    maxNewTokens_->setValue(v.sampling.maxNewTokens);
    theme_->setCurrentIndex(static_cast<int>(v.appearance.theme));
    fontSize_->setValue(v.appearance.fontPointSize);
    hubEndpoint_->setText(v.hubEndpoint);
    serverEnabled_->setChecked(v.server.enabled);
    serverHost_->setText(v.server.host);
    serverPort_->setValue(v.server.port);
    apiKey_->setText(v.server.apiKey);
    serverGpuBatch_->setValue(v.engine.serverGpuBatch);
    updateServerPage();
}

void SettingsDialog::setInEffect(const ModelSummary* model) {
    modelContext_ = model ? model->contextLength : 0;
    modelMaxContext_ = model ? model->maxContextLength : 0;
    kvBytesPerPosition_ = model ? model->kvBytesPerPosition : 0;
    kvFloat32_ = model ? model->kvBytesPerPositionFloat32 : 0;
    kvInt8_ = model ? model->kvBytesPerPositionInt8 : 0;
    kvCacheNotice_ = model ? model->kvCacheNotice : QString();
    // With one GPU (or none) the Device row says it all.
    const bool stages = model && model->gpuStages.size() >= 2;
    gpuStagesText_->setText(stages ? tr("In effect: the model's layers span %1 GPUs:").arg(model->gpuStages.size()) +
                                         QLatin1Char('\n') + model->gpuStages.join(QLatin1Char('\n'))
                                   : QString());
    gpuStages_->setVisible(stages);
    threads_->setSpecialValueText(model && model->threads > 0 ? tr("Automatic (%1 in use)").arg(model->threads)
                                                              : tr("Automatic (%1)").arg(QThread::idealThreadCount()));
    updateContextNote();
}

void SettingsDialog::updateContextNote() {
    const QLocale locale;
    if (modelContext_ <= 0) {
        contextNote_->setVisible(false);
        return;
    }
    QString note = modelContext_ < contextLength_->value()
                       ? tr("In effect: %1 tokens, the most this model holds.").arg(locale.toString(modelContext_))
                       : tr("In effect: %1 tokens.").arg(locale.toString(modelContext_));
    // What the length set here costs: each conversation's KV cache grows to it (in the GPU's memory when
    // the GPU runs the model, else in RAM), as the KV cache choice holds it, and what the other choice would.
    if (kvBytesPerPosition_ > 0) {
        const bool capped = modelMaxContext_ > 0 && contextLength_->value() >= modelMaxContext_;
        const int length = capped ? modelMaxContext_ : contextLength_->value();
        const auto sizeAt = [&](quint64 perPosition) {
            return locale.formattedDataSize(static_cast<qint64>(perPosition * static_cast<quint64>(length)), 1, QLocale::DataSizeSIFormat);
        };
        // The engine may hold another cache than chosen (kvCacheNotice_: the GPU cannot hold this model's
        // int8): then what it holds.
        const bool int8 = kvCache_->currentIndex() == 1 && kvCacheNotice_.isEmpty();
        const quint64 chosen = int8 && kvInt8_ > 0 ? kvInt8_ : !int8 && kvFloat32_ > 0 ? kvFloat32_ : kvBytesPerPosition_;
        const QString size = sizeAt(chosen);
        note += QLatin1Char(' ') + (capped || modelMaxContext_ <= 0
                                        ? tr("Each conversation's KV cache: up to %1 at %2 tokens.").arg(size, locale.toString(length))
                                        : tr("Each conversation's KV cache: up to %1 at %2 tokens; the model holds up to %3.")
                                              .arg(size, locale.toString(length), locale.toString(modelMaxContext_)));
        if (kvFloat32_ > 0 && kvInt8_ > 0 && kvCacheNotice_.isEmpty()) {
            if (int8)
                note += QLatin1Char(' ') + tr("In float32: %1.").arg(sizeAt(kvFloat32_));
            else
                note += QLatin1Char(' ') + tr("In int8: %1.").arg(sizeAt(kvInt8_));
        }
    }
    if (!kvCacheNotice_.isEmpty()) note += QLatin1Char(' ') + tr("In effect: %1.").arg(kvCacheNotice_);
    contextNote_->setText(note);
    contextNote_->setVisible(true);
    fitContextNote();
}

void SettingsDialog::showEvent(QShowEvent* event) {
    QDialog::showEvent(event);
    fitContextNote();
}

void SettingsDialog::fitContextNote() {
    const int fieldWidth = contextLength_->width();
    if (!isVisible() || fieldWidth <= 0 || contextNote_->isHidden()) return;
    contextNote_->setMinimumHeight(contextNote_->heightForWidth(fieldWidth));
    if (layout()) layout()->activate();
    if (height() < minimumSizeHint().height()) resize(width(), minimumSizeHint().height());
}

void SettingsDialog::updateKernelNote() {
    const int row = kernel_->currentIndex();
    const bool runs = row <= 0 || kernelRuns(row);
    if (!runs)
        kernelNote_->setText(tr("This CPU cannot run %1: Tandem runs %2 instead.")
                                 .arg(QString::fromLatin1(kKernelShownNames[row - 1]), shownKernel(tandem::buildInfo().cpuKernel)));
    kernelNote_->setVisible(!runs);
}

SettingsValues SettingsDialog::values() const {
    SettingsValues v;
    v.engine.modelDir = modelDir_->text().trimmed();
    if (!remoteKey_.isEmpty() && modelDir_->text() == remoteShown_) v.engine.modelDir = remoteKey_;
    v.engine.threads = threads_->value();
    v.engine.numaPolicy = static_cast<NumaPolicy>(numa_->currentIndex());
    v.engine.cpuKernel = static_cast<CpuKernel>(kernel_->currentIndex());
    v.engine.gpuDevice = device_->currentData().toInt();
    if (v.engine.gpuDevice == 0 && firstGpuSaved_ && device_->findData(kFirstGpuDevice) < 0) v.engine.gpuDevice = kFirstGpuDevice;
    v.engine.contextLength = contextLength_->value();
    v.engine.gpuExpertMemoryGb = gpuExpertMemory_->value();
    v.engine.int8Dense = int8Dense_->isChecked();
    v.engine.int8KvCache = kvCache_->currentIndex() == 1;
    v.engine.serverGpuBatch = serverGpuBatch_->value();
    v.defaultDeferral = defaultDeferral_->value();
    v.sampling.useModelRecommendation = useModelSampling_->isChecked();
    v.sampling.sampling = sampling_->sampling();
    v.sampling.maxNewTokens = maxNewTokens_->value();
    v.appearance.theme = static_cast<ThemeChoice>(theme_->currentIndex());
    v.appearance.fontPointSize = fontSize_->value();
    v.hubEndpoint = hubEndpoint_->text().trimmed();
    v.server.enabled = serverEnabled_->isChecked();
    v.server.host = serverHost_->text().trimmed().isEmpty() ? ServerSettings{}.host : serverHost_->text().trimmed();
    v.server.port = serverPort_->value();
    v.server.apiKey = apiKey_->text().trimmed();
    return v;
}

}  // namespace tandem::ui
