#pragma once
// One message of the conversation: who wrote it, the reasoning (answers), the Markdown text, the
// per-answer figures, and the actions that apply to it (copy; edit for questions; regenerate for the
// last answer). Actions are signals; the chat view forwards them.
#include <QFrame>

#include "ui/store/chat_types.h"

class QLabel;
class QPlainTextEdit;
class QToolButton;

namespace tandem::ui {

class MarkdownView;
class ReasoningSection;

class MessageView : public QFrame {
    Q_OBJECT
public:
    explicit MessageView(QWidget* parent = nullptr);

    // `isLastAnswer`: the conversation's last message and an answer, so it can be regenerated.
    // `busy`: an answer is being generated, so nothing may be regenerated or edited.
    void setMessage(const ChatMessage& message, bool isLastAnswer, bool busy);
    qint64 messageId() const { return message_.id; }
    const ChatMessage& message() const { return message_; }

    void startEditing();
    bool isEditing() const;
    // What the message shows as text (prose and code), for accessibility and tests.
    QString visibleText() const;
    ReasoningSection* reasoningSection() const { return reasoning_; }
    QString footerText() const;

signals:
    void copyRequested(qint64 messageId);
    void editSubmitted(qint64 messageId, const QString& text);
    void regenerateRequested();

private:
    void finishEditing();
    QString footerFor(const ChatMessage& m) const;

    QLabel* author_;
    QToolButton* copy_;
    QToolButton* edit_;
    QToolButton* regenerate_;
    ReasoningSection* reasoning_;
    MarkdownView* body_;
    QWidget* editor_;
    QPlainTextEdit* editorText_;
    QLabel* footer_;
    ChatMessage message_;
    bool busy_ = false;
};

}  // namespace tandem::ui
