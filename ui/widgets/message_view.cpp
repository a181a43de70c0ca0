#include "ui/widgets/message_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/widgets/markdown_view.h"
#include "ui/widgets/reasoning_section.h"

namespace tandem::ui {
namespace {

QToolButton* actionButton(const QString& text, const QString& accessibleName, const QString& tip, QWidget* parent) {
    auto* b = new QToolButton(parent);
    b->setText(text);
    b->setAutoRaise(true);
    b->setAccessibleName(accessibleName);
    b->setToolTip(tip);
    b->setObjectName(QStringLiteral("messageAction"));
    return b;
}

}  // namespace

MessageView::MessageView(QWidget* parent)
    : QFrame(parent), author_(new QLabel(this)),
      copy_(actionButton(tr("Copy"), tr("Copy message"), tr("Copy this message as Markdown"), this)),
      edit_(actionButton(tr("Edit"), tr("Edit message"),
                         tr("Edit this message and send it again; the earlier version stays, with what followed it"), this)),
      regenerate_(actionButton(tr("Regenerate"), tr("Regenerate answer"),
                               tr("Write another answer; this one stays as an earlier version"), this)),
      previousVersion_(actionButton(QStringLiteral("‹"), tr("Previous version"), tr("Show the previous version"), this)),
      versionLabel_(new QLabel(this)),
      nextVersion_(actionButton(QStringLiteral("›"), tr("Next version"), tr("Show the next version"), this)),
      delete_(actionButton(tr("Delete"), tr("Delete message"),
                           tr("Delete this message from the conversation; the messages after it stay"), this)),
      contextNote_(new QLabel(this)), reasoning_(new ReasoningSection(this)), body_(new MarkdownView(this)), editor_(new QWidget(this)),
      editorText_(new QPlainTextEdit(editor_)), footer_(new QLabel(this)) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(14, 10, 14, 10);
    layout->setSpacing(6);

    auto* header = new QHBoxLayout;
    author_->setObjectName(QStringLiteral("messageAuthor"));
    header->addWidget(author_);
    header->addStretch();
    versionLabel_->setObjectName(QStringLiteral("messageVersion"));
    header->addWidget(previousVersion_);
    header->addWidget(versionLabel_);
    header->addWidget(nextVersion_);
    header->addWidget(copy_);
    header->addWidget(edit_);
    header->addWidget(regenerate_);
    header->addWidget(delete_);
    layout->addLayout(header);
    contextNote_->setObjectName(QStringLiteral("contextNote"));
    contextNote_->setWordWrap(true);
    contextNote_->setVisible(false);
    layout->addWidget(contextNote_);
    layout->addWidget(reasoning_);
    layout->addWidget(body_);

    auto* editorLayout = new QVBoxLayout(editor_);
    editorLayout->setContentsMargins(0, 0, 0, 0);
    editorText_->setAccessibleName(tr("Edited message"));
    editorText_->setTabChangesFocus(true);
    auto* buttons = new QHBoxLayout;
    auto* resend = new QPushButton(tr("Send"), editor_);
    resend->setAccessibleName(tr("Send edited message"));
    resend->setDefault(true);
    auto* cancel = new QPushButton(tr("Cancel"), editor_);
    cancel->setAccessibleName(tr("Cancel editing"));
    buttons->addStretch();
    buttons->addWidget(cancel);
    buttons->addWidget(resend);
    editorLayout->addWidget(editorText_);
    editorLayout->addLayout(buttons);
    editor_->setVisible(false);
    layout->addWidget(editor_);

    footer_->setObjectName(QStringLiteral("messageFooter"));
    footer_->setWordWrap(true);
    footer_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(footer_);

    connect(copy_, &QToolButton::clicked, this, [this] { emit copyRequested(message_.id); });
    connect(edit_, &QToolButton::clicked, this, &MessageView::startEditing);
    connect(regenerate_, &QToolButton::clicked, this, &MessageView::regenerateRequested);
    connect(previousVersion_, &QToolButton::clicked, this, [this] { emit versionRequested(message_.id, message_.version - 1); });
    connect(nextVersion_, &QToolButton::clicked, this, [this] { emit versionRequested(message_.id, message_.version + 1); });
    connect(delete_, &QToolButton::clicked, this, [this] { emit deleteRequested(message_.id); });
    connect(cancel, &QPushButton::clicked, this, &MessageView::finishEditing);
    connect(resend, &QPushButton::clicked, this, [this] {
        const QString text = editorText_->toPlainText();
        if (text.trimmed().isEmpty()) return;
        finishEditing();
        emit editSubmitted(message_.id, text);
    });
}

void MessageView::setMessage(const ChatMessage& m, bool isLastAnswer, bool busy) {
    const bool isUser = m.role == QLatin1String("user");
    const bool streaming = m.state == MessageState::Streaming;
    if (objectName().isEmpty() || message_.role != m.role) {
        setObjectName(isUser ? QStringLiteral("userMessage") : QStringLiteral("assistantMessage"));
        style()->unpolish(this);
        style()->polish(this);
    }
    message_ = m;
    busy_ = busy;
    author_->setText(isUser ? tr("You") : (m.model.isEmpty() ? tr("Assistant") : m.model));
    setAccessibleName(isUser ? tr("Your message") : tr("Answer"));
    reasoning_->setVisible(!isUser && !m.reasoning.isEmpty());
    reasoning_->setReasoning(m.reasoning, streaming && m.content.isEmpty());
    // A question is shown as it was typed; an answer is Markdown.
    if (isUser) body_->setPlainText(m.content);
    else body_->setMarkdown(m.content);
    body_->setVisible(!m.content.isEmpty() && !isEditing());
    edit_->setVisible(isUser && !busy);
    regenerate_->setVisible(!isUser && isLastAnswer && !busy);
    delete_->setVisible(!busy && !streaming);
    const bool versions = m.versions > 1;
    versionLabel_->setText(versions ? QStringLiteral("%1/%2").arg(m.version).arg(m.versions) : QString());
    versionLabel_->setAccessibleName(tr("Version %1 of %2").arg(m.version).arg(m.versions));
    for (QWidget* w : {static_cast<QWidget*>(previousVersion_), static_cast<QWidget*>(versionLabel_),
                       static_cast<QWidget*>(nextVersion_)})
        w->setVisible(versions);
    previousVersion_->setEnabled(!busy && m.version > 1);
    nextVersion_->setEnabled(!busy && m.version < m.versions);
    const QString note = contextNoteFor(m);
    contextNote_->setText(note);
    contextNote_->setVisible(!note.isEmpty());
    copy_->setEnabled(!m.content.isEmpty());
    const QString footer = footerFor(m);
    footer_->setText(footer);
    footer_->setVisible(!footer.isEmpty());
    footer_->setProperty("problem", m.state == MessageState::Failed || m.state == MessageState::Interrupted);
    footer_->style()->unpolish(footer_);
    footer_->style()->polish(footer_);
}

QString MessageView::footerFor(const ChatMessage& m) const {
    if (m.role == QLatin1String("user")) return {};
    const QLocale locale;
    QStringList parts;
    if (m.metrics.generatedTokens > 0) {
        parts << tr("%1 tokens").arg(locale.toString(m.metrics.generatedTokens));
        if (m.metrics.tokensPerSecond > 0) parts << tr("%1 tokens/s").arg(locale.toString(m.metrics.tokensPerSecond, 'f', 1));
        parts << tr("%1 s to first token").arg(locale.toString(m.metrics.timeToFirstTokenSeconds, 'f', 2));
    }
    const QString figures = parts.join(QStringLiteral(" · "));
    switch (m.state) {
    case MessageState::Streaming:
        return m.content.isEmpty() && m.reasoning.isEmpty() ? tr("Waiting for the first token…") : tr("Writing…");
    case MessageState::Stopped: return figures.isEmpty() ? tr("Stopped") : tr("Stopped · %1").arg(figures);
    case MessageState::Failed: return tr("This answer failed: %1").arg(m.error);
    case MessageState::Interrupted: return tr("Interrupted: Tandem closed before this answer was finished.");
    case MessageState::Complete: return figures;
    }
    return figures;
}

QString MessageView::contextNoteFor(const ChatMessage& m) const {
    if (m.role == QLatin1String("user") || m.omittedMessages <= 0) return {};
    return m.omittedMessages == 1
               ? tr("1 earlier message was left out of this answer's prompt: the conversation is longer than the "
                    "model's context.")
               : tr("%1 earlier messages were left out of this answer's prompt: the conversation is longer than the "
                    "model's context.")
                     .arg(m.omittedMessages);
}

QString MessageView::footerText() const { return footer_->text(); }
QString MessageView::contextNoteText() const { return contextNote_->text(); }
QString MessageView::versionText() const { return versionLabel_->text(); }

void MessageView::startEditing() {
    if (busy_ || message_.role != QLatin1String("user")) return;
    editorText_->setPlainText(message_.content);
    body_->setVisible(false);
    editor_->setVisible(true);
    edit_->setVisible(false);
    editorText_->setFocus();
}

bool MessageView::isEditing() const { return editor_->isVisibleTo(this); }

void MessageView::finishEditing() {
    editor_->setVisible(false);
    body_->setVisible(!message_.content.isEmpty());
    edit_->setVisible(!busy_);
}

QString MessageView::visibleText() const { return body_->visibleText(); }

}  // namespace tandem::ui
