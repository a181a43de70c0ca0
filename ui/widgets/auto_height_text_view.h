#pragma once
// A read-only text view as tall as its text, for messages laid out one under another in a scroll area:
// it never scrolls itself and passes the mouse wheel on to the conversation.
#include <QTextBrowser>

namespace tandem::ui {

class AutoHeightTextView : public QTextBrowser {
    Q_OBJECT
public:
    explicit AutoHeightTextView(QWidget* parent = nullptr);

    // Markdown with inline code in the monospace font.
    void showMarkdown(const QString& markdown);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void resizeEvent(QResizeEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;

private:
    void fitHeight();
};

}  // namespace tandem::ui
