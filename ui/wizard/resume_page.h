#pragma once
// The first page when an earlier run of the wizard stopped mid-way (the app was closed, or crashed):
// carry on where it stopped, or start over.
#include <QWizardPage>

class QLabel;
class QRadioButton;

namespace tandem::ui {

class ModelWizard;

class ResumePage : public QWizardPage {
    Q_OBJECT
public:
    explicit ResumePage(ModelWizard* wizard);

    void initializePage() override;
    bool validatePage() override;
    int nextId() const override;

    QRadioButton* carryOnButton() const { return carryOn_; }
    QRadioButton* startOverButton() const { return startOver_; }

private:
    ModelWizard* wizard_;
    QLabel* summary_;
    QRadioButton* carryOn_;
    QRadioButton* startOver_;
    int next_;
};

}  // namespace tandem::ui
