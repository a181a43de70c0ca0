#pragma once
// Splits a Markdown message into prose and fenced code blocks, so that each code block can be shown in
// its own monospace box with a copy button. A fence still open at the end (an answer being streamed)
// makes a code segment that runs to the end.
#include <QList>
#include <QString>

namespace tandem::ui {

struct MarkdownSegment {
    enum class Kind { Prose, Code };
    Kind kind = Kind::Prose;
    QString text;      // prose: Markdown; code: the code without its fences
    QString language;  // code: the info string after the opening fence, e.g. "python"

    bool operator==(const MarkdownSegment&) const = default;
};

QList<MarkdownSegment> splitMarkdown(const QString& markdown);

}  // namespace tandem::ui
