#pragma once
// The Expert Deferral slider: 0 (exact) to k-1 for the loaded model, with what it trades.
#include <QGroupBox>

class QLabel;
class QSlider;

namespace tandem::ui {

class DeferralPanel : public QGroupBox {
    Q_OBJECT
public:
    explicit DeferralPanel(QWidget* parent = nullptr);

    // `expertsPerToken` k of the loaded model (0: no model or no routed experts) and the deferral the
    // engine uses now.
    void setModel(int expertsPerToken, int deferral);
    // What the engine reports it applied.
    void setDeferral(int deferral);
    QSlider* slider() const { return slider_; }
    int value() const;

signals:
    void deferralChosen(int experts);

private:
    void describe();

    QSlider* slider_;
    QLabel* value_;
    QLabel* explanation_;
    int expertsPerToken_ = 0;
};

}  // namespace tandem::ui
