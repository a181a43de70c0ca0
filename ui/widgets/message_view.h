#pragma once
// One message of the conversation: who wrote it, the reasoning (answers), the text (answers as Markdown,
// questions as typed), a note when earlier messages were left out of an answer's prompt, the per-answer
// figures, and the actions that apply to it (copy; edit for questions; regenerate for the last answer;
// < 1/2 > between the versions of its place; delete). Actions are signals; the chat view forwards them.
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
    // "Earlier messages were left out" on an answer; empty when none were.
    QString contextNoteText() const;
    // "1/2" when its place has several versions, else empty.
    QString versionText() const;

signals:
    void copyRequested(qint64 messageId);
    void editSubmitted(qint64 messageId, const QString& text);
    void regenerateRequested();
    void versionRequested(qint64 messageId, int version);
    void deleteRequested(qint64 messageId);

private:
    void finishEditing();
    QString footerFor(const ChatMessage& m) const;
    QString contextNoteFor(const ChatMessage& m) const;

    QLabel* author_;
    QToolButton* copy_;
    QToolButton* edit_;
    QToolButton* regenerate_;
    QToolButton* previousVersion_;
    QLabel* versionLabel_;
    QToolButton* nextVersion_;
    QToolButton* delete_;
    QLabel* contextNote_;
    ReasoningSection* reasoning_;
    MarkdownView* body_;
    QWidget* editor_;
    QPlainTextEdit* editorText_;
    QLabel* footer_;
    ChatMessage message_;
    bool busy_ = false;
};

}  // namespace tandem::ui
