#pragma once
// One fenced code block of a message: the language, a copy button, and the code in the monospace font,
// scrolling sideways rather than wrapping.
#include <QFrame>

class QLabel;
class QToolButton;

namespace tandem::ui {

class AutoHeightTextView;

class CodeBlockView : public QFrame {
    Q_OBJECT
public:
    explicit CodeBlockView(QWidget* parent = nullptr);

    void setCode(const QString& code, const QString& language);
    QString code() const { return code_; }

private:
    void copyToClipboard();

    QLabel* language_;
    QToolButton* copyButton_;
    AutoHeightTextView* view_;
    QString code_;
};

}  // namespace tandem::ui
