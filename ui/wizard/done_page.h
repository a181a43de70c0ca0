#pragma once
// The last step: load the new model through ModelController (it becomes the app's model) and open a
// new chat with it.
#include <QWizardPage>

class QLabel;
class QPushButton;

namespace tandem::ui {

class ModelWizard;
struct ModelSummary;

class DonePage : public QWizardPage {
    Q_OBJECT
public:
    explicit DonePage(ModelWizard* wizard);

    void initializePage() override;
    bool isComplete() const override;

    QLabel* statusLabel() const { return status_; }
    bool isLoaded() const { return loaded_; }

private:
    void load();
    void onReady(const ModelSummary& summary);
    void onFailed(const QString& message);

    ModelWizard* wizard_;
    QLabel* status_;
    QPushButton* retry_;
    QString dir_;
    bool loading_ = false;
    bool loaded_ = false;
};

}  // namespace tandem::ui
