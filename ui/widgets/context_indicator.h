#pragma once
// How full the model's context is with this conversation as it is sent: a thin bar, "used / capacity"
// and how many earlier messages the context policy leaves out. Its menu turns the policy on or off.
#include <QWidget>

class QAction;
class QLabel;
class QProgressBar;
class QToolButton;

namespace tandem::ui {

class ContextIndicator : public QWidget {
    Q_OBJECT
public:
    explicit ContextIndicator(QWidget* parent = nullptr);

    // `omitted`: earlier messages left out of what `used` counts. `used` < 0: counted by a server (a model
    // on a server, before an answer's usage says how much).
    void setUsage(int used, int capacity, int omitted = 0);
    QString text() const;
    // The menu's "leave out earlier messages" choice, for tests.
    QAction* fitToContextAction() const { return fitAction_; }

public slots:
    // Shows the context policy's state; does not emit fitToContextToggled.
    void setFitToContext(bool fit);

signals:
    void fitToContextToggled(bool fit);

private:
    QProgressBar* bar_;
    QLabel* label_;
    QToolButton* menuButton_;
    QAction* fitAction_;
};

}  // namespace tandem::ui
