#pragma once
// The conversion into a packed store, with progress and a way to stop it; stopping, closing the window
// or the app keeps what is converted, and carrying on resumes from there. Moves on to loading the
// model by itself when the store is finished.
#include <QWizardPage>

#include "tandem/convert.h"

class QLabel;
class QProgressBar;
class QPushButton;

namespace tandem::ui {

class ConvertJob;
class ModelWizard;

class ConvertPage : public QWizardPage {
    Q_OBJECT
public:
    explicit ConvertPage(ModelWizard* wizard);
    // The job goes on alone until its conversion stops (ConvertJob::release), so closing the wizard
    // does not wait for it.
    ~ConvertPage() override;

    void initializePage() override;
    bool isComplete() const override;
    int nextId() const override;

    // For tests.
    QProgressBar* progressBar() const { return bar_; }
    QLabel* statusLabel() const { return status_; }
    QLabel* errorLabel() const { return error_; }
    QPushButton* stopButton() const { return stop_; }
    ConvertJob* job() const { return job_; }

private:
    void start();
    void stopOrResume();
    void onProgress(const tandem::ConvertProgress& p);
    void onFinished(const QString& store);
    void onFailed(const QString& message);

    ModelWizard* wizard_;
    ConvertJob* job_;
    QProgressBar* bar_;
    QLabel* status_;
    QLabel* error_;
    QPushButton* stop_;
    bool finished_ = false;
};

}  // namespace tandem::ui
