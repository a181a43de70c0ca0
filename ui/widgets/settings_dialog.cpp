#include "ui/widgets/settings_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QThread>
#include <QVBoxLayout>

#include "ui/widgets/sampling_editor.h"

namespace tandem::ui {
namespace {

// Marks the settings that need a model reload.
const QString kReload = QStringLiteral(" ⟳");

QLabel* hint(const QString& text, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    label->setWordWrap(true);
    label->setObjectName(QStringLiteral("hint"));
    return label;
}

}  // namespace

SettingsValues SettingsValues::read(const AppSettings& s) {
    return {s.engine(), s.sampling(), s.appearance(), s.defaultDeferral(), s.hubEndpoint()};
}

void SettingsValues::write(AppSettings& s) const {
    s.setEngine(engine);
    s.setSampling(sampling);
    s.setAppearance(appearance);
    s.setDefaultDeferral(defaultDeferral);
    s.setHubEndpoint(hubEndpoint);
    s.sync();
}

SettingsDialog::SettingsDialog(const SettingsValues& values, const QStringList& gpuNames, QWidget* parent)
    : QDialog(parent) {
    setWindowTitle(tr("Settings"));
    setAccessibleName(tr("Settings"));
    auto* layout = new QVBoxLayout(this);
    auto* tabs = new QTabWidget(this);
    tabs->addTab(engineTab(gpuNames), tr("&Model and engine"));
    tabs->addTab(generationTab(), tr("&Generation"));
    tabs->addTab(appearanceTab(), tr("&Appearance"));
    tabs->addTab(downloadsTab(), tr("&Downloads"));
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
    form->addRow(tr("Model &folder:") + kReload, row);

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

    kernel_ = new QComboBox(page);
    kernel_->addItems({tr("Automatic (best for this CPU)"), QStringLiteral("AMX"), QStringLiteral("AVX-512"), QStringLiteral("AVX2")});
    kernel_->setAccessibleName(tr("CPU kernel"));
    form->addRow(tr("CPU &kernel:") + kReload, kernel_);

    device_ = new QComboBox(page);
    device_->setAccessibleName(tr("Device"));
    device_->addItem(tr("CPU only"), -1);
    for (int i = 0; i < gpuNames.size(); ++i) device_->addItem(tr("GPU %1: %2").arg(i).arg(gpuNames[i]), i);
    if (gpuNames.isEmpty()) device_->addItem(tr("GPU 0 (none found: runs on the CPU)"), 0);
    form->addRow(tr("&Device:") + kReload, device_);

    contextLength_ = new QSpinBox(page);
    contextLength_->setRange(256, 1 << 20);
    contextLength_->setSingleStep(1024);
    contextLength_->setSuffix(tr(" tokens"));
    contextLength_->setAccessibleName(tr("Context length"));
    contextLength_->setToolTip(tr("How much conversation the model can see. Longer needs more memory."));
    form->addRow(tr("&Context length:") + kReload, contextLength_);
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

void SettingsDialog::setValues(const SettingsValues& v) {
    modelDir_->setText(v.engine.modelDir);
    threads_->setValue(v.engine.threads);
    numa_->setCurrentIndex(static_cast<int>(v.engine.numaPolicy));
    kernel_->setCurrentIndex(static_cast<int>(v.engine.cpuKernel));
    const int device = device_->findData(v.engine.gpuDevice);
    device_->setCurrentIndex(device >= 0 ? device : 0);
    contextLength_->setValue(v.engine.contextLength);
    defaultDeferral_->setValue(v.defaultDeferral);
    useModelSampling_->setChecked(v.sampling.useModelRecommendation);
    sampling_->setEnabled(!v.sampling.useModelRecommendation);
    sampling_->setSampling(v.sampling.sampling);
    maxNewTokens_->setValue(v.sampling.maxNewTokens);
    theme_->setCurrentIndex(static_cast<int>(v.appearance.theme));
    fontSize_->setValue(v.appearance.fontPointSize);
    hubEndpoint_->setText(v.hubEndpoint);
}

SettingsValues SettingsDialog::values() const {
    SettingsValues v;
    v.engine.modelDir = modelDir_->text().trimmed();
    v.engine.threads = threads_->value();
    v.engine.numaPolicy = static_cast<NumaPolicy>(numa_->currentIndex());
    v.engine.cpuKernel = static_cast<CpuKernel>(kernel_->currentIndex());
    v.engine.gpuDevice = device_->currentData().toInt();
    v.engine.contextLength = contextLength_->value();
    v.defaultDeferral = defaultDeferral_->value();
    v.sampling.useModelRecommendation = useModelSampling_->isChecked();
    v.sampling.sampling = sampling_->sampling();
    v.sampling.maxNewTokens = maxNewTokens_->value();
    v.appearance.theme = static_cast<ThemeChoice>(theme_->currentIndex());
    v.appearance.fontPointSize = fontSize_->value();
    v.hubEndpoint = hubEndpoint_->text().trimmed();
    return v;
}

}  // namespace tandem::ui
