#pragma once
// What the chat area shows when there is no conversation to show: no model yet, a model loading, a
// model that failed, or a fresh chat waiting for its first message.
#include <QWidget>

class QLabel;
class QPushButton;
class QProgressBar;

namespace tandem::ui {

class EmptyStatePage : public QWidget {
    Q_OBJECT
public:
    enum class Mode { NoModel, Loading, LoadFailed, Ready };

    explicit EmptyStatePage(QWidget* parent = nullptr);

    void setMode(Mode mode, const QString& detail = {});
    Mode mode() const { return mode_; }
    QString title() const;

signals:
    void openModelRequested();
    void downloadModelRequested();

private:
    QLabel* title_;
    QLabel* detail_;
    QProgressBar* busy_;
    QPushButton* open_;
    QPushButton* download_;
    Mode mode_ = Mode::NoModel;
};

}  // namespace tandem::ui
