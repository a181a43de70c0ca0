#pragma once
// Help ▸ About Tandem: what this build is (version, git revision, GPU path, CPU kernels, Qt), the
// loaded model, and where Tandem keeps its files. "Copy Details" puts the build lines on the clipboard
// for a bug report.
#include <QDialog>

#include "ui/worker/engine_types.h"

namespace tandem::ui {

// The lines `tandem --version` prints and About shows: the engine's build description plus Qt's
// versions (run time, and compiled against when they differ).
QString buildDescription(const QString& program);

class AboutDialog : public QDialog {
    Q_OBJECT
public:
    AboutDialog(const ModelSummary& model, QWidget* parent = nullptr);

    // What "Copy Details" copies: buildDescription("Tandem") and the model's name.
    QString details() const { return details_; }

private:
    QString details_;
};

}  // namespace tandem::ui
