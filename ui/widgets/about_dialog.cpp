#include "ui/widgets/about_dialog.h"

#include <QApplication>
#include <QClipboard>
#include <QDialogButtonBox>
#include <QDir>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "tandem/build_info.h"
#include "ui/settings/app_paths.h"
#include "ui/widgets/app_icon.h"

namespace tandem::ui {
namespace {

QString qtVersions() {
    const QString running = QString::fromLatin1(qVersion());
    const QString built = QStringLiteral(QT_VERSION_STR);
    return running == built ? running : QStringLiteral("%1 (built with %2)").arg(running, built);
}

QLabel* selectableLabel(const QString& text, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return label;
}

}  // namespace

QString buildDescription(const QString& program) {
    return QString::fromStdString(tandem::describeBuild(program.toStdString())) + QStringLiteral("Qt: ") + qtVersions() +
           QLatin1Char('\n');
}

AboutDialog::AboutDialog(const ModelSummary& model, QWidget* parent) : QDialog(parent) {
    setObjectName(QStringLiteral("aboutDialog"));
    setWindowTitle(tr("About Tandem"));
    const BuildInfo& build = tandem::buildInfo();
    const QString modelText = model.name.isEmpty() ? tr("none loaded")
                              : model.remote       ? tr("%1 (%2 on the server at %3)").arg(model.name, model.remoteModel, model.remoteUrl)
                                                   : model.name;

    auto* icon = new QLabel(this);
    icon->setPixmap(appIcon().pixmap(64, 64));
    auto* title = new QLabel(tr("<h2>Tandem %1</h2>").arg(QString::fromStdString(build.version).toHtmlEscaped()), this);
    auto* tagline = selectableLabel(tr("Chat with large Mixture-of-Experts models on one workstation: the GPU and the "
                                       "CPU work in tandem on every token."),
                                    this);
    tagline->setWordWrap(true);
    auto* heading = new QVBoxLayout;
    heading->addWidget(title);
    heading->addWidget(tagline);
    heading->addStretch(1);
    auto* top = new QHBoxLayout;
    top->addWidget(icon, 0, Qt::AlignTop);
    top->addLayout(heading, 1);

    auto* form = new QFormLayout;
    const auto row = [&](const QString& name, const QString& text) { form->addRow(name, selectableLabel(text, this)); };
    row(tr("Revision:"), QString::fromStdString(build.revision));
    row(tr("GPU path:"), build.cuda ? tr("CUDA %1").arg(QString::fromStdString(build.cudaVersion))
                                    : tr("not built (CPU only)"));
    QStringList kernels;
    for (const auto& k : build.cpuKernels) kernels << QString::fromStdString(k);
    row(tr("CPU kernels built:"), kernels.join(QStringLiteral(", ")));
    row(tr("CPU kernel used:"), QStringLiteral("%1 (%2)").arg(QString::fromStdString(build.cpuKernel),
                                                               QString::fromStdString(build.cpuKernelSource)));
    row(tr("Qt:"), qtVersions());
    row(tr("Compiler:"), QString::fromStdString(build.compiler));
    row(tr("Model:"), modelText);
    if (!model.textHandling.isEmpty()) row(tr("Text handling:"), model.textHandling);
    if (!model.placement.isEmpty()) row(tr("Routed experts:"), model.placement);
    row(tr("Conversations:"), QDir::toNativeSeparators(paths::databaseFile()));
    row(tr("Settings:"), QDir::toNativeSeparators(paths::settingsFile()));
    row(tr("Your models:"), QDir::toNativeSeparators(paths::modelsDir()));

    details_ = buildDescription(QStringLiteral("Tandem")) + QStringLiteral("Model: ") + modelText + QLatin1Char('\n');

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    QPushButton* copy = buttons->addButton(tr("&Copy Details"), QDialogButtonBox::ActionRole);
    copy->setObjectName(QStringLiteral("copyDetails"));
    connect(copy, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(details_); });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    // Wide enough that the figures and folders stay on one line each; they are what people copy.
    setMinimumWidth(fontMetrics().averageCharWidth() * 80);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addSpacing(8);
    layout->addLayout(form);
    layout->addWidget(buttons);
}

}  // namespace tandem::ui
