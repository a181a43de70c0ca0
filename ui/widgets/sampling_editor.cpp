#include "ui/widgets/sampling_editor.h"

#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QSpinBox>

namespace tandem::ui {
namespace {

QDoubleSpinBox* number(double min, double max, double step, int decimals, const QString& name, QWidget* parent) {
    auto* box = new QDoubleSpinBox(parent);
    box->setRange(min, max);
    box->setSingleStep(step);
    box->setDecimals(decimals);
    box->setAccessibleName(name);
    return box;
}

}  // namespace

SamplingEditor::SamplingEditor(QWidget* parent)
    : QWidget(parent), temperature_(number(0, 2, 0.05, 2, tr("Temperature"), this)),
      topP_(number(0.01, 1, 0.01, 2, tr("Top-p"), this)), topK_(new QSpinBox(this)),
      minP_(number(0, 1, 0.01, 2, tr("Min-p"), this)), repetitionPenalty_(number(0.5, 2, 0.01, 2, tr("Repetition penalty"), this)) {
    auto* form = new QFormLayout(this);
    form->setContentsMargins(0, 0, 0, 0);
    temperature_->setSpecialValueText(tr("0 (always the most likely token)"));
    temperature_->setToolTip(tr("Higher is more varied, lower is more focused; 0 always picks the most likely token."));
    topK_->setRange(0, 1000);
    topK_->setSpecialValueText(tr("No limit"));
    topK_->setAccessibleName(tr("Top-k"));
    minP_->setSpecialValueText(tr("Off"));
    form->addRow(tr("&Temperature:"), temperature_);
    form->addRow(tr("Top-&p:"), topP_);
    form->addRow(tr("Top-&k:"), topK_);
    form->addRow(tr("&Min-p:"), minP_);
    form->addRow(tr("&Repetition penalty:"), repetitionPenalty_);
    setSampling({});
}

void SamplingEditor::setSampling(const tandem::SamplingOptions& s) {
    temperature_->setValue(s.temperature);
    topP_->setValue(s.topP);
    topK_->setValue(s.topK);
    minP_->setValue(s.minP);
    repetitionPenalty_->setValue(s.repetitionPenalty);
}

tandem::SamplingOptions SamplingEditor::sampling() const {
    tandem::SamplingOptions s;
    s.temperature = static_cast<float>(temperature_->value());
    s.topP = static_cast<float>(topP_->value());
    s.topK = topK_->value();
    s.minP = static_cast<float>(minP_->value());
    s.repetitionPenalty = static_cast<float>(repetitionPenalty_->value());
    return s;
}

}  // namespace tandem::ui
