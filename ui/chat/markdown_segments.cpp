#include "ui/chat/markdown_segments.h"

#include <QStringList>

namespace tandem::ui {
namespace {

// A fence is 3+ backticks or tildes after at most three spaces (CommonMark); returns its length and
// character, or 0.
int fenceLength(const QString& line, QChar* fenceChar) {
    qsizetype i = 0;
    while (i < line.size() && i < 3 && line[i] == QLatin1Char(' ')) ++i;
    if (i >= line.size() || (line[i] != QLatin1Char('`') && line[i] != QLatin1Char('~'))) return 0;
    const QChar c = line[i];
    qsizetype n = 0;
    while (i + n < line.size() && line[i + n] == c) ++n;
    if (n < 3) return 0;
    *fenceChar = c;
    return static_cast<int>(n);
}

}  // namespace

QList<MarkdownSegment> splitMarkdown(const QString& markdown) {
    QList<MarkdownSegment> segments;
    QStringList prose;
    QStringList code;
    QString language;
    QChar openChar;
    int openLength = 0;

    const auto flushProse = [&] {
        const QString text = prose.join(QLatin1Char('\n')).trimmed();
        if (!text.isEmpty()) segments.append({MarkdownSegment::Kind::Prose, text, {}});
        prose.clear();
    };

    for (const QString& line : markdown.split(QLatin1Char('\n'))) {
        QChar c;
        const int n = fenceLength(line, &c);
        if (openLength == 0) {
            if (n > 0) {
                flushProse();
                openChar = c;
                openLength = n;
                language = line.trimmed().mid(n).trimmed().section(QLatin1Char(' '), 0, 0);
            } else {
                prose << line;
            }
        } else if (n >= openLength && c == openChar && line.trimmed().size() == n) {
            segments.append({MarkdownSegment::Kind::Code, code.join(QLatin1Char('\n')), language});
            code.clear();
            openLength = 0;
        } else {
            code << line;
        }
    }
    if (openLength > 0) segments.append({MarkdownSegment::Kind::Code, code.join(QLatin1Char('\n')), language});
    else flushProse();
    return segments;
}

}  // namespace tandem::ui
