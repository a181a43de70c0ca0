#include "ui/widgets/empty_state_page.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

namespace tandem::ui {

EmptyStatePage::EmptyStatePage(QWidget* parent)
    : QWidget(parent), title_(new QLabel(this)), detail_(new QLabel(this)), busy_(new QProgressBar(this)),
      open_(new QPushButton(tr("Open Model Folder…"), this)), download_(new QPushButton(tr("Get a Model…"), this)) {
    setObjectName(QStringLiteral("emptyState"));
    auto* layout = new QVBoxLayout(this);
    layout->addStretch(2);
    title_->setObjectName(QStringLiteral("emptyTitle"));
    title_->setAlignment(Qt::AlignCenter);
    title_->setWordWrap(true);
    detail_->setAlignment(Qt::AlignCenter);
    detail_->setWordWrap(true);
    detail_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    detail_->setMaximumWidth(560);
    busy_->setRange(0, 0);  // the engine reports no load progress yet: an indeterminate bar
    busy_->setMaximumWidth(280);
    busy_->setTextVisible(false);
    busy_->setAccessibleName(tr("Loading the model"));
    layout->addWidget(title_);
    // Centred between stretches rather than by the layout's alignment, which would size the wrapped text
    // to its one-line hint and cut it off ("tiny-qwen3moe-bf16 is"); this way it gets the height its
    // width needs.
    auto* detailRow = new QHBoxLayout;
    detailRow->addStretch(1);
    detailRow->addWidget(detail_, 100);
    detailRow->addStretch(1);
    layout->addLayout(detailRow);
    layout->addWidget(busy_, 0, Qt::AlignHCenter);
    auto* buttons = new QHBoxLayout;
    buttons->addStretch();
    open_->setAccessibleName(tr("Open model folder"));
    open_->setToolTip(tr("Choose a folder with a Hugging Face model: config.json, *.safetensors and tokenizer.json"));
    download_->setAccessibleName(tr("Get a model"));
    download_->setToolTip(tr("Download a model from Hugging Face, or convert one you have, with the model wizard"));
    download_->setDefault(true);
    buttons->addWidget(open_);
    buttons->addWidget(download_);
    buttons->addStretch();
    layout->addLayout(buttons);
    layout->addStretch(3);
    connect(open_, &QPushButton::clicked, this, &EmptyStatePage::openModelRequested);
    connect(download_, &QPushButton::clicked, this, &EmptyStatePage::downloadModelRequested);
    setMode(Mode::NoModel);
}

void EmptyStatePage::setMode(Mode mode, const QString& detail) {
    mode_ = mode;
    busy_->setVisible(mode == Mode::Loading);
    const bool needsModel = mode == Mode::NoModel || mode == Mode::LoadFailed;
    open_->setVisible(needsModel);
    download_->setVisible(needsModel);
    switch (mode) {
    case Mode::NoModel:
        title_->setText(tr("No model yet"));
        detail_->setText((detail.isEmpty() ? QString() : detail + QStringLiteral("\n\n")) +
                         tr("Tandem chats with a model on this computer. Get one from Hugging Face with the model "
                            "wizard, or open the folder of a model you have (config.json, *.safetensors, "
                            "tokenizer.json)."));
        break;
    case Mode::Loading:
        title_->setText(tr("Loading %1…").arg(detail));
        detail_->setText(tr("You can read and search your conversations meanwhile."));
        break;
    case Mode::LoadFailed:
        title_->setText(tr("The model could not be loaded"));
        detail_->setText(detail);
        break;
    case Mode::Ready:
        title_->setText(tr("What would you like to ask?"));
        detail_->setText(tr("%1 is ready. Enter sends, Shift+Enter adds a line. Your conversations stay on this computer.").arg(detail));
        break;
    }
}

QString EmptyStatePage::title() const { return title_->text(); }

}  // namespace tandem::ui
