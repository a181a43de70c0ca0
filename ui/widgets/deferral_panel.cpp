#include "ui/widgets/deferral_panel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QVBoxLayout>

namespace tandem::ui {

DeferralPanel::DeferralPanel(QWidget* parent)
    : QGroupBox(tr("Expert deferral"), parent), slider_(new QSlider(Qt::Horizontal, this)), value_(new QLabel(this)),
      explanation_(new QLabel(this)) {
    setObjectName(QStringLiteral("deferralPanel"));
    auto* layout = new QVBoxLayout(this);
    auto* row = new QHBoxLayout;
    slider_->setAccessibleName(tr("Deferred experts per token"));
    slider_->setTickPosition(QSlider::TicksBelow);
    slider_->setTickInterval(1);
    slider_->setPageStep(1);
    row->addWidget(slider_, 1);
    value_->setMinimumWidth(48);
    value_->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
    row->addWidget(value_);
    layout->addLayout(row);
    explanation_->setWordWrap(true);
    explanation_->setObjectName(QStringLiteral("hint"));
    layout->addWidget(explanation_);
    connect(slider_, &QSlider::valueChanged, this, [this](int v) {
        describe();
        emit deferralChosen(v);
    });
    setModel(0, 0);
}

void DeferralPanel::setModel(int expertsPerToken, int deferral) {
    expertsPerToken_ = expertsPerToken;
    const QSignalBlocker block(slider_);
    slider_->setRange(0, std::max(0, expertsPerToken - 1));
    slider_->setValue(deferral);
    slider_->setEnabled(expertsPerToken > 1);
    describe();
}

void DeferralPanel::setDeferral(int deferral) {
    const QSignalBlocker block(slider_);
    slider_->setValue(deferral);
    describe();
}

int DeferralPanel::value() const { return slider_->value(); }

void DeferralPanel::describe() {
    const int d = slider_->value();
    if (expertsPerToken_ <= 1) {
        value_->setText(QStringLiteral("–"));
        explanation_->setText(expertsPerToken_ == 0
                                  ? tr("Available once a Mixture-of-Experts model is loaded.")
                                  : tr("This model has no routed experts to defer."));
        return;
    }
    value_->setText(tr("%1 of %2").arg(d).arg(expertsPerToken_));
    explanation_->setText(
        d == 0 ? tr("Exact: every layer waits for all %1 of its experts. Moving right lets the CPU finish the "
                    "least important experts while the GPU starts the next layer: faster, and slightly different "
                    "answers. Applies from the next token.").arg(expertsPerToken_)
               : tr("%1 of the %2 experts per layer run deferred, overlapped with the next layer: faster decoding, "
                    "answers that differ slightly from exact. 0 is exact. Applies from the next token.")
                     .arg(d).arg(expertsPerToken_));
}

}  // namespace tandem::ui
