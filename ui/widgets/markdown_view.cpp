#include "ui/widgets/markdown_view.h"

#include <QVBoxLayout>

#include "ui/widgets/auto_height_text_view.h"
#include "ui/widgets/code_block_view.h"

namespace tandem::ui {

MarkdownView::MarkdownView(QWidget* parent) : QWidget(parent), layout_(new QVBoxLayout(this)) {
    layout_->setContentsMargins(0, 0, 0, 0);
    layout_->setSpacing(6);
}

void MarkdownView::setPlainText(const QString& text) {
    if (plain_ && text == markdown_ && !views_.isEmpty()) return;
    auto* view = plain_ && views_.size() == 1 ? qobject_cast<AutoHeightTextView*>(views_.first()) : nullptr;
    if (!view) {
        qDeleteAll(views_);
        views_.clear();
        view = new AutoHeightTextView(this);
        view->setAccessibleName(tr("Message text"));
        views_.append(view);
        layout_->addWidget(view);
    }
    plain_ = true;
    markdown_ = text;
    segments_ = {{MarkdownSegment::Kind::Prose, text, {}}};
    view->setPlainText(text);
}

void MarkdownView::setMarkdown(const QString& markdown) {
    if (plain_) {
        // Views made for plain text are not reused for Markdown.
        qDeleteAll(views_);
        views_.clear();
        segments_.clear();
        plain_ = false;
    } else if (markdown == markdown_) {
        return;
    }
    markdown_ = markdown;
    const QList<MarkdownSegment> segments = splitMarkdown(markdown);
    for (qsizetype i = 0; i < segments.size(); ++i) {
        const MarkdownSegment& s = segments[i];
        const bool reusable = i < views_.size() && segments_[i].kind == s.kind;
        if (reusable && segments_[i] == s) continue;
        if (!reusable && i < views_.size()) {
            delete views_[i];
            views_[i] = nullptr;
        }
        if (s.kind == MarkdownSegment::Kind::Code) {
            auto* view = reusable ? static_cast<CodeBlockView*>(views_[i]) : new CodeBlockView(this);
            view->setCode(s.text, s.language);
            if (!reusable) {
                if (i < views_.size()) views_[i] = view;
                else views_.append(view);
                layout_->insertWidget(static_cast<int>(i), view);
            }
        } else {
            auto* view = reusable ? static_cast<AutoHeightTextView*>(views_[i]) : new AutoHeightTextView(this);
            view->showMarkdown(s.text);
            if (!reusable) {
                view->setAccessibleName(tr("Message text"));
                if (i < views_.size()) views_[i] = view;
                else views_.append(view);
                layout_->insertWidget(static_cast<int>(i), view);
            }
        }
    }
    while (views_.size() > segments.size()) delete views_.takeLast();
    segments_ = segments;
}

QString MarkdownView::visibleText() const {
    QStringList parts;
    for (QWidget* w : views_) {
        if (auto* code = qobject_cast<CodeBlockView*>(w)) parts << code->code();
        else if (auto* prose = qobject_cast<AutoHeightTextView*>(w)) parts << prose->toPlainText();
    }
    return parts.join(QLatin1Char('\n'));
}

}  // namespace tandem::ui
