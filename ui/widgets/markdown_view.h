#pragma once
// A message's Markdown: prose in rich-text views, each fenced code block in a CodeBlockView. Updating
// with a longer text (a streaming answer) touches only the segments that changed.
#include <QWidget>

#include "ui/chat/markdown_segments.h"

class QVBoxLayout;

namespace tandem::ui {

class MarkdownView : public QWidget {
    Q_OBJECT
public:
    explicit MarkdownView(QWidget* parent = nullptr);

    void setMarkdown(const QString& markdown);
    QString markdown() const { return markdown_; }
    // The plain text shown, prose and code, for tests and accessibility.
    QString visibleText() const;

private:
    QVBoxLayout* layout_;
    QString markdown_;
    QList<MarkdownSegment> segments_;
    QList<QWidget*> views_;
};

}  // namespace tandem::ui
