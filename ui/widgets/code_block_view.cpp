#include "ui/widgets/code_block_view.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/widgets/auto_height_text_view.h"
#include "ui/widgets/theme.h"

namespace tandem::ui {

CodeBlockView::CodeBlockView(QWidget* parent)
    : QFrame(parent), language_(new QLabel(this)), copyButton_(new QToolButton(this)), view_(new AutoHeightTextView(this)) {
    setObjectName(QStringLiteral("codeBlock"));
    setFrameShape(QFrame::StyledPanel);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(8, 4, 8, 6);
    layout->setSpacing(2);
    auto* header = new QHBoxLayout;
    language_->setObjectName(QStringLiteral("codeLanguage"));
    copyButton_->setText(tr("Copy"));
    copyButton_->setAutoRaise(true);
    copyButton_->setToolTip(tr("Copy this code to the clipboard"));
    copyButton_->setAccessibleName(tr("Copy code"));
    connect(copyButton_, &QToolButton::clicked, this, &CodeBlockView::copyToClipboard);
    header->addWidget(language_);
    header->addStretch();
    header->addWidget(copyButton_);
    layout->addLayout(header);
    view_->setLineWrapMode(QTextEdit::NoWrap);
    view_->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    view_->setFont(codeFont());
    view_->setAccessibleName(tr("Code"));
    layout->addWidget(view_);
}

void CodeBlockView::setCode(const QString& code, const QString& language) {
    language_->setText(language.isEmpty() ? tr("code") : language);
    if (code == code_) return;
    code_ = code;
    view_->setPlainText(code);
}

void CodeBlockView::copyToClipboard() {
    QGuiApplication::clipboard()->setText(code_);
    copyButton_->setText(tr("Copied"));
    QTimer::singleShot(1500, copyButton_, [b = copyButton_] { b->setText(tr("Copy")); });
}

}  // namespace tandem::ui
