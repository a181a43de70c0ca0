#pragma once
// Where the user writes: Enter sends, Shift+Enter starts a new line; the button sends, or stops the
// answer being generated. The text box grows with its text up to a few lines.
#include <QPlainTextEdit>
#include <QWidget>

class QPushButton;

namespace tandem::ui {

class PromptEdit : public QPlainTextEdit {
    Q_OBJECT
public:
    explicit PromptEdit(QWidget* parent = nullptr);
    QSize sizeHint() const override;

signals:
    void submitted();

protected:
    void keyPressEvent(QKeyEvent* event) override;
};

class Composer : public QWidget {
    Q_OBJECT
public:
    explicit Composer(QWidget* parent = nullptr);

    QString text() const;
    void clear();
    void focusInput();
    void setGenerating(bool generating);
    // Empty `reason` enables sending; otherwise the reason is shown as the placeholder.
    void setUnavailableReason(const QString& reason);
    PromptEdit* editor() const { return edit_; }
    QPushButton* button() const { return button_; }

signals:
    void sendRequested(const QString& text);
    void stopRequested();

private:
    void onButton();
    void updateButton();

    PromptEdit* edit_;
    QPushButton* button_;
    bool generating_ = false;
    QString unavailableReason_;
};

}  // namespace tandem::ui
