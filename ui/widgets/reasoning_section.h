#pragma once
// The model's reasoning (<think>...</think>) above its answer: collapsed behind a toggle, marked as
// reasoning so nobody takes it for the answer.
#include <QWidget>

class QToolButton;

namespace tandem::ui {

class AutoHeightTextView;

class ReasoningSection : public QWidget {
    Q_OBJECT
public:
    explicit ReasoningSection(QWidget* parent = nullptr);

    // `thinking`: the model is still reasoning (the answer has not started).
    void setReasoning(const QString& text, bool thinking);
    bool isExpanded() const;
    void setExpanded(bool expanded);
    QString text() const { return text_; }

private:
    void updateToggle();

    QToolButton* toggle_;
    AutoHeightTextView* body_;
    QString text_;
    bool thinking_ = false;
};

}  // namespace tandem::ui
