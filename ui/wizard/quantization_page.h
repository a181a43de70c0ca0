#pragma once
// bf16, int8 or int4 for the routed experts: what each needs in RAM, VRAM and disk against what this
// machine has, with the best that fits chosen. For a repository outside the curated list the page
// first lists its files and fetches its config.json.
#include <QButtonGroup>
#include <QWizardPage>

#include "hub/hub_client.h"
#include "ui/wizard/quantization_advice.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QTableWidget;

namespace tandem::ui {

class ModelWizard;

class QuantizationPage : public QWizardPage {
    Q_OBJECT
public:
    explicit QuantizationPage(ModelWizard* wizard);

    void initializePage() override;
    void cleanupPage() override;
    bool isComplete() const override;
    bool validatePage() override;
    int nextId() const override;

    // For tests.
    const QuantizationAdvice& advice() const { return advice_; }
    // The chosen row (kWizardPrecisions' order), -1 for none.
    int chosen() const { return choices_->checkedId(); }
    void choose(int row);
    QTableWidget* table() const { return table_; }
    QLabel* explanation() const { return explanation_; }
    QLabel* errorLabel() const { return error_; }
    QPushButton* retryButton() const { return retry_; }

private:
    enum class Lookup { Idle, Listing, FetchingConfig, Ready, Failed };

    void lookUp();
    void onFilesListed(const QList<hub::RepoFile>& files);
    void onConfigFetched();
    void fail(const QString& message);
    void showAdvice();
    // The busy bar while Hugging Face is asked, and why the Download/Convert button waits.
    void showActivity();

    ModelWizard* wizard_;
    QLabel* machine_;
    QTableWidget* table_;
    QButtonGroup* choices_;
    QLabel* explanation_;
    QLabel* status_;
    QProgressBar* busy_;
    QLabel* error_;
    QPushButton* retry_;
    QuantizationAdvice advice_;
    Lookup lookup_ = Lookup::Idle;
};

}  // namespace tandem::ui
