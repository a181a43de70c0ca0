#pragma once
// What the user does with conversations: open, send, stop, regenerate, edit and resend (each a new
// version beside the old one, which stays: showVersion flips between them), delete a message, rename,
// delete, export. Applies the context policy: a conversation longer than the context is sent as its
// system prompt and latest turns (AppSettings::fitConversationToContext), and the context indicator
// counts what is sent. Keeps the message model and the store in step with the answer the engine streams, saving it
// in small batches while it grows so that a crash loses at most the last fraction of a second. An answer
// the store cannot take (a full disk) stays in memory and on screen, and every later save tries again
// until it is stored, text and final state.
#include <QObject>
#include <QTimer>
#include <optional>

#include "ui/controllers/model_controller.h"
#include "ui/models/message_model.h"
#include "ui/store/conversation_store.h"

namespace tandem::ui {

class ChatController : public QObject {
    Q_OBJECT
public:
    // How often a streaming answer is written to the store.
    static constexpr int kSaveIntervalMs = 250;
    enum class ExportFormat { Markdown, Json };

    ChatController(ConversationStore* store, MessageModel* messages, ModelController* model, EngineWorker* worker,
                   AppSettings* settings, QObject* parent = nullptr);
    ~ChatController() override;

    qint64 currentConversationId() const { return currentId_; }
    QString currentTitle() const;
    bool isGenerating() const { return streaming_.has_value(); }
    ConversationSettings currentSettings() const;
    int contextUsed() const { return contextUsed_; }
    int contextCapacity() const { return contextCapacity_; }
    // Earlier messages the context policy leaves out of what is sent now.
    int contextOmitted() const { return contextOmitted_; }
    bool fitsToContext() const;

public slots:
    void newConversation();
    void openConversation(qint64 id);
    // The conversation open when the app last ended, if it still exists.
    void openLastConversation();
    // Returns false (and says why through errorOccurred) when the message cannot be sent now.
    bool send(const QString& text);
    void stop();
    // A new answer to the last question, shown as the next version of the last answer (if any).
    void regenerate();
    // The question as a new version of message `messageId`, answered anew; what followed the old
    // version stays with it.
    void editAndResend(qint64 messageId, const QString& text);
    // Shows version `version` (from 1) of the message's place in the open conversation.
    void showVersion(qint64 messageId, int version);
    // Deletes one message of the open conversation; what followed it stays.
    void deleteMessage(qint64 messageId);
    // Turns the context policy on or off (saved in the settings).
    void setFitToContext(bool fit);
    void setConversationSettings(const tandem::ui::ConversationSettings& settings);
    bool renameConversation(qint64 id, const QString& title);
    void deleteConversation(qint64 id);
    // Returns an error message, or an empty string.
    QString exportConversation(qint64 id, const QString& path, tandem::ui::ChatController::ExportFormat format);
    // Ends a streaming answer for good (app quitting): saved as interrupted, with one last try at any
    // answer not saved yet.
    void shutDown();

signals:
    void generationRequested(const tandem::ui::GenerationRequest& request);
    void tokenCountRequested(quint64 requestId, const QList<tandem::ui::PromptMessage>& messages, int promptBudget);
    void currentConversationChanged(qint64 id);
    void generatingChanged(bool generating);
    // `omitted`: earlier messages the context policy leaves out of what `used` counts.
    void contextUsageChanged(int used, int capacity, int omitted);
    void fitToContextChanged(bool fit);
    void answerCompleted(const tandem::ui::AnswerStats& stats);
    // A streaming answer's text so far has been committed to the store.
    void streamingAnswerSaved(qint64 messageId, const QString& content);
    void errorOccurred(const QString& message);
    // The store takes writes again after failing (a full disk has room again).
    void savingResumed();
    // Something the user should know that is not an error, e.g. a full context.
    void noticeOccurred(const QString& message);

private:
    struct StreamingAnswer {
        quint64 requestId = 0;
        ChatMessage message;
        bool unsaved = false;
    };

    // Starts an answer at the end of the conversation, or as a new version of answer `replacing`.
    void startAnswer(qint64 replacing = 0);
    QList<PromptMessage> promptMessages() const;
    // The context policy's budget for the open conversation's prompt; 0 when it is off.
    int promptBudget() const;
    // The open conversation's messages again from the store (another version shown, one deleted).
    void reloadMessages();
    // Saves what is not saved yet: the answers that ended unsaved, then the streaming one's text.
    void saveAnswers();
    void saveStreamingAnswer();
    // An answer the store has not taken yet, in place of its stored copy.
    ChatMessage unsavedVersion(const ChatMessage& stored) const;
    // Forgets unsaved answers whose rows were deleted: message `messageId`, or all of the conversation's (0).
    void forgetUnsavedAnswers(qint64 conversationId, qint64 messageId = 0);
    void finishStreaming(ChatMessage message);
    void requestTokenCount();
    void onAnswerText(quint64 requestId, const QString& answer, const QString& reasoning);
    void onAnswerFinished(quint64 requestId, const AnswerStats& stats);
    void onAnswerFailed(quint64 requestId, const QString& message);
    void onTokensCounted(quint64 requestId, int tokens, int contextLength, int omitted);
    void setContextUsage(int used, int capacity, int omitted = 0);

    ConversationStore* store_;
    MessageModel* messages_;
    ModelController* model_;
    EngineWorker* worker_;
    AppSettings* settings_;
    qint64 currentId_ = 0;
    ConversationSettings newConversationSettings_;  // for a chat not yet saved (no message sent)
    std::optional<StreamingAnswer> streaming_;
    // Answers that ended while the store could not save them, oldest first; the save timer keeps running
    // while there are any.
    QList<ChatMessage> unsavedAnswers_;
    quint64 nextRequestId_ = 0;
    quint64 countRequestId_ = 0;
    QTimer saveTimer_;
    int contextUsed_ = 0;
    int contextCapacity_ = 0;
    int contextOmitted_ = 0;
};

}  // namespace tandem::ui
