#include "ui/controllers/conversation_models.h"

#include <QDir>
#include <utility>

#include "ui/controllers/chat_controller.h"
#include "ui/controllers/model_controller.h"
#include "ui/settings/app_paths.h"
#include "ui/settings/app_settings.h"

namespace tandem::ui {
ConversationModels::ConversationModels(ChatController* chat, ModelController* model, AppSettings* settings, QObject* parent)
    : QObject(parent), chat_(chat), model_(model), settings_(settings) {
    connect(chat_, &ChatController::currentConversationChanged, this, &ConversationModels::onConversationChanged);
    connect(chat_, &ChatController::generatingChanged, this, &ConversationModels::onGeneratingChanged);
    connect(model_, &ModelController::modelReady, this, [this](const ModelSummary& summary) {
        if (chosen_.isEmpty() || !paths::sameFolder(summary.dir, chosen_)) return;
        chosen_.clear();
        if (const qint64 id = chat_->currentConversationId(); id != 0) settings_->setModelForConversation(id, summary.dir);
    });
    const auto forgetChoice = [this] { chosen_.clear(); };
    connect(model_, &ModelController::switchFailed, this, forgetChoice);
    connect(model_, &ModelController::loadFailed, this, forgetChoice);
}

QString ConversationModels::modelOf(qint64 conversationId) const {
    return conversationId == 0 ? QString() : settings_->modelForConversation(conversationId);
}

void ConversationModels::choose(const QString& dir) {
    switchAfterAnswer_ = false;  // the user's choice wins over the open conversation's
    chosen_ = QDir::cleanPath(dir);
    if (!model_->loadModelFolder(chosen_).isEmpty()) chosen_.clear();
}

void ConversationModels::follow() { following_ = true; }

void ConversationModels::onConversationChanged(qint64 id) {
    if (!following_ || id == 0) return;  // a new chat goes on with the model in use
    if (chat_->isGenerating()) {
        // An answer streams (into another conversation): it finishes with its model first.
        switchAfterAnswer_ = true;
        return;
    }
    switchToCurrent();
}

void ConversationModels::onGeneratingChanged(bool generating) {
    if (generating) {
        // A message was sent: this conversation talks to the model in use.
        switchAfterAnswer_ = false;
        if (const qint64 id = chat_->currentConversationId(); id != 0 && model_->isReady())
            settings_->setModelForConversation(id, model_->summary().dir);
        return;
    }
    if (std::exchange(switchAfterAnswer_, false)) switchToCurrent();
}

void ConversationModels::switchToCurrent() {
    const QString dir = modelOf(chat_->currentConversationId());
    if (dir.isEmpty()) return;
    const bool inUse = model_->state() == ModelController::State::Loading ? paths::sameFolder(dir, model_->loadingDir())
                                                                          : model_->isReady() && paths::sameFolder(dir, model_->summary().dir);
    if (inUse) return;
    model_->loadModelFolder(dir);
}

}  // namespace tandem::ui
