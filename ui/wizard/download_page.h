#pragma once
// The download: per-file and total progress, speed and time left; pause, resume and cancel; what went
// wrong and a way to try again (which resumes from the partial files). Moves on to the conversion by
// itself when every file is in place.
#include <QHash>
#include <QWizardPage>

#include "hub/hub_client.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;

namespace tandem::ui {

class ModelWizard;

class DownloadPage : public QWizardPage {
    Q_OBJECT
public:
    explicit DownloadPage(ModelWizard* wizard);

    void initializePage() override;
    bool isComplete() const override;
    int nextId() const override;

    // For tests.
    QProgressBar* totalBar() const { return total_; }
    QLabel* statusLabel() const { return status_; }
    QLabel* errorLabel() const { return error_; }
    QTreeWidget* fileList() const { return files_; }
    QPushButton* pauseButton() const { return pause_; }
    QPushButton* cancelButton() const { return cancel_; }
    QPushButton* retryButton() const { return retry_; }
    bool isPaused() const { return paused_; }

private:
    void start();
    void togglePause();
    void cancelDownload();
    void onProgress(qint64 done, qint64 total, double bytesPerSecond);
    void onFileProgress(const QString& path, qint64 done, qint64 total);
    void onFileFinished(const QString& path);
    void onFinished();
    void onFailed(const QString& message);

    ModelWizard* wizard_;
    QProgressBar* total_;
    QLabel* status_;
    QTreeWidget* files_;
    QPushButton* pause_;
    QPushButton* cancel_;
    QLabel* error_;
    QPushButton* retry_;
    QHash<QString, QTreeWidgetItem*> rows_;
    qint64 totalBytes_ = 0;
    qint64 doneBytes_ = 0;
    bool active_ = false;
    bool paused_ = false;
    bool finished_ = false;
};

}  // namespace tandem::ui
