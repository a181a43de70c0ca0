#pragma once
// A message's Markdown: prose in rich-text views, each fenced code block in a CodeBlockView. Updating
// with a longer text (a streaming answer) touches only the segments that changed. Or plain text, shown
// as typed: every line break and space kept, nothing taken for Markdown.
#include <QWidget>

#include "ui/chat/markdown_segments.h"

class QVBoxLayout;

namespace tandem::ui {

class MarkdownView : public QWidget {
    Q_OBJECT
public:
    explicit MarkdownView(QWidget* parent = nullptr);

    void setMarkdown(const QString& markdown);
    void setPlainText(const QString& text);
    QString markdown() const { return markdown_; }
    bool isPlainText() const { return plain_; }
    // The plain text shown, prose and code, for tests and accessibility.
    QString visibleText() const;

private:
    QVBoxLayout* layout_;
    QString markdown_;
    bool plain_ = false;
    QList<MarkdownSegment> segments_;
    QList<QWidget*> views_;
};

}  // namespace tandem::ui
