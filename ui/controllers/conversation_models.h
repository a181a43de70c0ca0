#pragma once
// Each conversation keeps the model it was used with (issue 24, item 4). A conversation's model is
// remembered when a message is sent in it and when the user picks a model while it is open (once that
// model loaded); opening the conversation again switches to that model, after the answer in progress if
// there is one, never in the middle of it. The models are kept in the settings by conversation id
// (AppSettings::modelForConversation), not in the conversation store.
#include <QObject>

namespace tandem::ui {

class AppSettings;
class ChatController;
class ModelController;

class ConversationModels : public QObject {
    Q_OBJECT
public:
    ConversationModels(ChatController* chat, ModelController* model, AppSettings* settings, QObject* parent = nullptr);

    // The model folder remembered for a conversation, or empty.
    QString modelOf(qint64 conversationId) const;

public slots:
    // The user picked `dir`: switch to it (checked, as ModelController::loadModelFolder does); once it
    // loaded it is the open conversation's model.
    void choose(const QString& dir);
    // From now on, opening a conversation switches to its model. The app calls this once its start-up
    // load is on its way, so that the conversation reopened at start does not ask for a second load.
    void follow();

private:
    void onConversationChanged(qint64 id);
    void onGeneratingChanged(bool generating);
    // Loads the model of the open conversation if it is not the one in use (or on its way).
    void switchToCurrent();

    ChatController* chat_;
    ModelController* model_;
    AppSettings* settings_;
    QString chosen_;              // picked, not loaded yet
    bool following_ = false;
    bool switchAfterAnswer_ = false;
};

}  // namespace tandem::ui
