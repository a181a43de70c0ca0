#pragma once
// The sampling knobs, shared by the settings dialog (defaults) and a conversation's own settings.
#include <QWidget>

#include "tandem/engine.h"

class QDoubleSpinBox;
class QSpinBox;

namespace tandem::ui {

class SamplingEditor : public QWidget {
    Q_OBJECT
public:
    explicit SamplingEditor(QWidget* parent = nullptr);

    void setSampling(const tandem::SamplingOptions& sampling);
    tandem::SamplingOptions sampling() const;

private:
    QDoubleSpinBox* temperature_;
    QDoubleSpinBox* topP_;
    QSpinBox* topK_;
    QDoubleSpinBox* minP_;
    QDoubleSpinBox* repetitionPenalty_;
};

}  // namespace tandem::ui
