#include "ui/widgets/auto_height_text_view.h"

#include <QAbstractTextDocumentLayout>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextFrame>
#include <QTextTable>
#include <QTextCursor>
#include <QWheelEvent>
#include <cmath>

#include "ui/widgets/theme.h"

namespace tandem::ui {

AutoHeightTextView::AutoHeightTextView(QWidget* parent) : QTextBrowser(parent) {
    setFrameShape(QFrame::NoFrame);
    setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setOpenExternalLinks(true);
    setTextInteractionFlags(Qt::TextBrowserInteraction);
    viewport()->setAutoFillBackground(false);
    setAutoFillBackground(false);
    document()->setDocumentMargin(2);
    connect(document()->documentLayout(), &QAbstractTextDocumentLayout::documentSizeChanged, this,
            &AutoHeightTextView::fitHeight);
}

void AutoHeightTextView::showMarkdown(const QString& markdown) {
    setMarkdown(markdown);
    // QTextDocument marks inline code as fixed pitch but keeps the proportional family; give it the
    // code font.
    const QString mono = codeFont().family();
    for (QTextBlock block = document()->begin(); block.isValid(); block = block.next()) {
        for (auto it = block.begin(); !it.atEnd(); ++it) {
            const QTextFragment fragment = it.fragment();
            if (!fragment.isValid() || !fragment.charFormat().fontFixedPitch()) continue;
            QTextCursor cursor(document());
            cursor.setPosition(fragment.position());
            cursor.setPosition(fragment.position() + fragment.length(), QTextCursor::KeepAnchor);
            QTextCharFormat format;
            format.setFontFamilies({mono});
            cursor.mergeCharFormat(format);
        }
    }
    // Tables: a line under each row and a shaded header, instead of QTextDocument's boxed grid.
    const QColor line = palette().color(QPalette::Mid);
    const QColor header = palette().color(QPalette::AlternateBase);
    for (QTextFrame* frame : document()->rootFrame()->childFrames()) {
        auto* table = qobject_cast<QTextTable*>(frame);
        if (!table) continue;
        QTextTableFormat format = table->format();
        format.setBorderCollapse(true);
        format.setBorder(0);
        format.setCellPadding(5);
        format.setCellSpacing(0);
        table->setFormat(format);
        for (int row = 0; row < table->rows(); ++row) {
            for (int column = 0; column < table->columns(); ++column) {
                QTextTableCell cell = table->cellAt(row, column);
                QTextTableCellFormat cellFormat = cell.format().toTableCellFormat();
                cellFormat.setBottomBorder(1);
                cellFormat.setBottomBorderBrush(line);
                cellFormat.setBottomBorderStyle(QTextFrameFormat::BorderStyle_Solid);
                if (row == 0) cellFormat.setBackground(header);
                cell.setFormat(cellFormat);
            }
        }
    }
    fitHeight();
}

QSize AutoHeightTextView::sizeHint() const {
    return {QTextBrowser::sizeHint().width(), height()};
}

QSize AutoHeightTextView::minimumSizeHint() const { return {50, height()}; }

void AutoHeightTextView::resizeEvent(QResizeEvent* event) {
    QTextBrowser::resizeEvent(event);
    fitHeight();
}

void AutoHeightTextView::wheelEvent(QWheelEvent* event) {
    // Horizontal scrolling of wide code stays here; vertical scrolling belongs to the conversation.
    if (horizontalScrollBar()->isVisible() && event->angleDelta().x() != 0) {
        QTextBrowser::wheelEvent(event);
        return;
    }
    event->ignore();
}

void AutoHeightTextView::fitHeight() {
    const bool wraps = lineWrapMode() != QTextEdit::NoWrap;
    if (wraps) document()->setTextWidth(viewport()->width());
    int h = static_cast<int>(std::ceil(document()->size().height())) + 2 * frameWidth();
    if (!wraps && document()->idealWidth() > viewport()->width()) h += horizontalScrollBar()->sizeHint().height();
    if (h != height()) setFixedHeight(h);
}

}  // namespace tandem::ui
