#include "ui/widgets/composer.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QPushButton>
#include <QTextBlock>

namespace tandem::ui {
namespace {
constexpr int kMaxVisibleLines = 8;
}

PromptEdit::PromptEdit(QWidget* parent) : QPlainTextEdit(parent) {
    setTabChangesFocus(true);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    connect(this, &QPlainTextEdit::blockCountChanged, this, [this] { updateGeometry(); });
}

QSize PromptEdit::sizeHint() const {
    const int lines = std::clamp(blockCount(), 2, kMaxVisibleLines);
    const int height = fontMetrics().lineSpacing() * lines + static_cast<int>(2 * document()->documentMargin()) +
                       2 * frameWidth() + 4;
    return {QPlainTextEdit::sizeHint().width(), height};
}

void PromptEdit::keyPressEvent(QKeyEvent* event) {
    const bool enter = event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter;
    if (enter && !(event->modifiers() & Qt::ShiftModifier)) {
        emit submitted();
        event->accept();
        return;
    }
    if (enter) {
        // Shift+Enter: a plain newline (QPlainTextEdit would insert a line separator).
        insertPlainText(QStringLiteral("\n"));
        event->accept();
        return;
    }
    QPlainTextEdit::keyPressEvent(event);
}

Composer::Composer(QWidget* parent) : QWidget(parent), edit_(new PromptEdit(this)), button_(new QPushButton(this)) {
    setObjectName(QStringLiteral("composer"));
    setAttribute(Qt::WA_StyledBackground);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(24, 8, 24, 16);
    edit_->setAccessibleName(tr("Message"));
    edit_->setAccessibleDescription(tr("Enter sends the message; Shift+Enter starts a new line."));
    edit_->setMinimumWidth(200);  // room to write in, however narrow the window
    layout->addWidget(edit_, 1);
    layout->addWidget(button_, 0, Qt::AlignBottom);
    button_->setMinimumWidth(88);
    connect(edit_, &PromptEdit::submitted, this, [this] {
        if (!generating_) onButton();
    });
    connect(button_, &QPushButton::clicked, this, &Composer::onButton);
    connect(edit_, &QPlainTextEdit::textChanged, this, &Composer::updateButton);
    updateButton();
}

QString Composer::text() const { return edit_->toPlainText(); }
void Composer::clear() { edit_->clear(); }
void Composer::focusInput() { edit_->setFocus(); }

void Composer::setGenerating(bool generating) {
    generating_ = generating;
    updateButton();
}

void Composer::setUnavailableReason(const QString& reason) {
    unavailableReason_ = reason;
    updateButton();
}

void Composer::onButton() {
    if (generating_) {
        emit stopRequested();
        return;
    }
    if (!unavailableReason_.isEmpty() || edit_->toPlainText().trimmed().isEmpty()) return;
    emit sendRequested(edit_->toPlainText());
}

void Composer::updateButton() {
    const QString placeholder = unavailableReason_.isEmpty() ? tr("Message the model — Enter sends, Shift+Enter adds a line")
                                                             : unavailableReason_;
    if (placeholder != edit_->placeholderText()) {
        edit_->setPlaceholderText(placeholder);
        // Qt 6.4 repaints the text area only when the placeholder appears or goes, not when it changes:
        // the old one ("The model is loading…") would stay on screen until something else repainted it.
        edit_->viewport()->update();
    }
    if (generating_) {
        button_->setText(tr("Stop"));
        button_->setAccessibleName(tr("Stop generating"));
        button_->setToolTip(tr("Stop the answer (Esc)"));
        button_->setEnabled(true);
        return;
    }
    button_->setText(tr("Send"));
    button_->setAccessibleName(tr("Send message"));
    button_->setToolTip(tr("Send (Enter)"));
    button_->setEnabled(unavailableReason_.isEmpty() && !edit_->toPlainText().trimmed().isEmpty());
}

}  // namespace tandem::ui
