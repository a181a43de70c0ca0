#pragma once
// How full the model's context is with this conversation: a thin bar and "used / capacity".
#include <QWidget>

class QLabel;
class QProgressBar;

namespace tandem::ui {

class ContextIndicator : public QWidget {
    Q_OBJECT
public:
    explicit ContextIndicator(QWidget* parent = nullptr);

    void setUsage(int used, int capacity);
    QString text() const;

private:
    QProgressBar* bar_;
    QLabel* label_;
};

}  // namespace tandem::ui
