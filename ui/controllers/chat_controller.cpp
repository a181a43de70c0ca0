#include "ui/controllers/chat_controller.h"

#include "ui/controllers/generation_options.h"
#include "ui/store/conversation_export.h"

namespace tandem::ui {

ChatController::ChatController(ConversationStore* store, MessageModel* messages, ModelController* model,
                               EngineWorker* worker, AppSettings* settings, QObject* parent)
    : QObject(parent), store_(store), messages_(messages), model_(model), worker_(worker), settings_(settings) {
    connect(this, &ChatController::generationRequested, worker_, &EngineWorker::generate);
    connect(this, &ChatController::tokenCountRequested, worker_, &EngineWorker::countTokens);
    connect(worker_, &EngineWorker::answerTextArrived, this, &ChatController::onAnswerText);
    connect(worker_, &EngineWorker::answerFinished, this, &ChatController::onAnswerFinished);
    connect(worker_, &EngineWorker::answerFailed, this, &ChatController::onAnswerFailed);
    connect(worker_, &EngineWorker::tokensCounted, this, &ChatController::onTokensCounted);
    connect(model_, &ModelController::modelReady, this, [this] { requestTokenCount(); });
    // A store found damaged while in use: the answer in progress stops, and the model is unloaded.
    connect(model_, &ModelController::storeDamaged, this, &ChatController::stop);
    saveTimer_.setInterval(kSaveIntervalMs);
    connect(&saveTimer_, &QTimer::timeout, this, &ChatController::saveAnswers);
    // An in-memory store (a database file that could not be used) stays unsaved whatever succeeds.
    connect(store_, &ConversationStore::writesResumed, this, [this] {
        if (store_->isPersistent()) emit savingResumed();
    });
}

ChatController::~ChatController() = default;

QString ChatController::currentTitle() const {
    if (currentId_ == 0) return QStringLiteral("New chat");
    const auto c = store_->conversation(currentId_);
    return c ? c->title : QString();
}

ConversationSettings ChatController::currentSettings() const {
    if (currentId_ == 0) return newConversationSettings_;
    const auto c = store_->conversation(currentId_);
    return c ? c->settings : ConversationSettings{};
}

bool ChatController::fitsToContext() const { return settings_->fitConversationToContext(); }

void ChatController::newConversation() {
    currentId_ = 0;
    newConversationSettings_ = {};
    messages_->setMessages({});
    emit currentConversationChanged(0);
    setContextUsage(0, model_->summary().contextLength);
}

void ChatController::reloadMessages() {
    QList<ChatMessage> list = store_->messages(currentId_);
    for (ChatMessage& m : list) m = unsavedVersion(m);
    messages_->updateMessages(list);
}

void ChatController::openConversation(qint64 id) {
    if (id == currentId_) return;
    if (!store_->conversation(id)) return;
    currentId_ = id;
    QList<ChatMessage> list = store_->messages(id);
    // The store may hold an older copy of an answer that is still streaming or not saved yet.
    for (ChatMessage& m : list) m = unsavedVersion(m);
    messages_->setMessages(list);
    store_->setLastConversationId(id);
    emit currentConversationChanged(id);
    requestTokenCount();
}

void ChatController::openLastConversation() {
    const qint64 last = store_->lastConversationId();
    if (last != 0 && store_->conversation(last)) openConversation(last);
    else newConversation();
}

bool ChatController::send(const QString& text) {
    if (text.trimmed().isEmpty()) return false;
    if (streaming_) {
        emit errorOccurred(QStringLiteral("Wait for the answer to finish, or stop it, before sending another message."));
        return false;
    }
    if (!model_->isReady()) {
        emit errorOccurred(QStringLiteral("No model is loaded yet, so there is nobody to answer. Open a model folder "
                                          "(File ▸ Open Model Folder…)."));
        return false;
    }
    if (currentId_ == 0) {
        const qint64 id = store_->createConversation(titleFromMessage(text), newConversationSettings_);
        if (id == 0) return false;
        currentId_ = id;
        store_->setLastConversationId(id);
        emit currentConversationChanged(id);
    }
    ChatMessage user;
    user.conversationId = currentId_;
    user.role = QStringLiteral("user");
    user.content = text;
    if (store_->appendMessage(user) == 0) return false;
    messages_->append(user);
    startAnswer();
    return true;
}

QList<PromptMessage> ChatController::promptMessages() const {
    QList<PromptMessage> prompt;
    const QString system = currentSettings().systemPrompt.trimmed();
    if (!system.isEmpty()) prompt.append({QStringLiteral("system"), system});
    for (const ChatMessage& m : messages_->messages()) {
        // A failed or empty answer is not part of what the model said.
        if (m.role == QLatin1String("assistant") && (m.state == MessageState::Streaming || m.content.isEmpty())) continue;
        // The answer's reasoning goes back too: a template decides whether the model sees it again.
        prompt.append({m.role, m.content, m.reasoning});
    }
    return prompt;
}

int ChatController::promptBudget() const {
    // A model on a server: its tokenizer is there, so the whole conversation is sent (and a server that
    // finds it too long says so).
    if (model_->summary().remote) return 0;
    const tandem::GenerateOptions options = generateOptionsFor(currentSettings(), settings_->sampling(), model_->summary());
    return promptBudgetFor(settings_->fitConversationToContext(), model_->summary().contextLength, options.maxNewTokens);
}

void ChatController::startAnswer(qint64 replacing) {
    StreamingAnswer answer;
    answer.requestId = ++nextRequestId_;
    answer.message.conversationId = currentId_;
    answer.message.role = QStringLiteral("assistant");
    answer.message.state = MessageState::Streaming;
    answer.message.model = model_->summary().name;
    if ((replacing ? store_->appendVersion(answer.message, replacing) : store_->appendMessage(answer.message)) == 0) return;
    streaming_ = answer;
    if (replacing) reloadMessages();
    else messages_->append(answer.message);

    GenerationRequest request;
    request.id = answer.requestId;
    request.messages = promptMessages();  // the empty answer in state streaming is not part of it
    request.options = generateOptionsFor(currentSettings(), settings_->sampling(), model_->summary());
    request.stopStrings = currentSettings().stopStrings;
    request.promptBudget = promptBudget();
    request.samplingFromServer = model_->summary().remote && !currentSettings().overrideSampling &&
                                 settings_->sampling().useModelRecommendation;
    saveTimer_.start();
    emit generatingChanged(true);
    emit generationRequested(request);
}

void ChatController::stop() {
    if (streaming_) worker_->stop(streaming_->requestId);
}

void ChatController::regenerate() {
    if (streaming_ || !model_->isReady() || currentId_ == 0 || messages_->rowCount() == 0) return;
    const ChatMessage& tail = messages_->message(messages_->rowCount() - 1);
    startAnswer(tail.role == QLatin1String("assistant") ? tail.id : 0);
}

void ChatController::editAndResend(qint64 messageId, const QString& text) {
    const int row = messages_->rowOfId(messageId);
    if (streaming_ || !model_->isReady() || row < 0 || text.trimmed().isEmpty()) return;
    if (messages_->message(row).role != QLatin1String("user")) return;
    ChatMessage edited;
    edited.conversationId = currentId_;
    edited.role = QStringLiteral("user");
    edited.content = text;
    if (store_->appendVersion(edited, messageId) == 0) return;
    reloadMessages();
    startAnswer();
}

void ChatController::showVersion(qint64 messageId, int version) {
    // The answer being written stays in view while it streams.
    if (streaming_ && streaming_->message.conversationId == currentId_) return;
    if (currentId_ == 0 || messages_->rowOfId(messageId) < 0) return;
    if (!store_->showVersion(messageId, version)) return;
    reloadMessages();
    requestTokenCount();
}

void ChatController::deleteMessage(qint64 messageId) {
    if (streaming_ && streaming_->message.conversationId == currentId_) return;
    if (currentId_ == 0 || messages_->rowOfId(messageId) < 0) return;
    if (!store_->deleteMessage(messageId)) return;
    forgetUnsavedAnswers(currentId_, messageId);
    reloadMessages();
    requestTokenCount();
}

void ChatController::setFitToContext(bool fit) {
    if (fit == settings_->fitConversationToContext()) return;
    settings_->setFitConversationToContext(fit);
    emit fitToContextChanged(fit);
    requestTokenCount();
}

void ChatController::setConversationSettings(const ConversationSettings& settings) {
    if (currentId_ == 0) newConversationSettings_ = settings;
    else store_->setConversationSettings(currentId_, settings);
    requestTokenCount();
}

bool ChatController::renameConversation(qint64 id, const QString& title) {
    const QString clean = title.simplified();
    return !clean.isEmpty() && store_->renameConversation(id, clean);
}

void ChatController::deleteConversation(qint64 id) {
    if (streaming_ && streaming_->message.conversationId == id) {
        // Its messages go with it; the engine stops at its next token and that answer is forgotten.
        worker_->stop(streaming_->requestId);
        streaming_.reset();
        if (unsavedAnswers_.isEmpty()) saveTimer_.stop();
        emit generatingChanged(false);
    }
    if (!store_->deleteConversation(id)) return;
    forgetUnsavedAnswers(id);
    if (id == currentId_) newConversation();
}

QString ChatController::exportConversation(qint64 id, const QString& path, ExportFormat format) {
    saveAnswers();
    const auto conversation = store_->conversation(id);
    if (!conversation) return QStringLiteral("That conversation no longer exists.");
    const QList<ChatMessage> list = store_->messages(id);
    const QByteArray bytes = format == ExportFormat::Markdown ? conversationToMarkdown(*conversation, list).toUtf8()
                                                              : conversationToJson(*conversation, list);
    return writeExportFile(path, bytes);
}

void ChatController::shutDown() {
    if (streaming_) {
        worker_->stop(streaming_->requestId);
        ChatMessage m = streaming_->message;
        m.state = MessageState::Interrupted;
        finishStreaming(m);
    }
    // What is still unsaved now is lost with the process; its row keeps the text saved last and is
    // marked interrupted at the next start.
    saveAnswers();
}

void ChatController::onAnswerText(quint64 requestId, const QString& answer, const QString& reasoning) {
    if (!streaming_ || streaming_->requestId != requestId) return;
    streaming_->message.content += answer;
    streaming_->message.reasoning += reasoning;
    streaming_->unsaved = true;
    if (streaming_->message.conversationId == currentId_) messages_->appendText(streaming_->message.id, answer, reasoning);
}

void ChatController::saveAnswers() {
    // The first failure stops the round: the next ones would fail the same way.
    while (!unsavedAnswers_.isEmpty() && store_->finishMessage(unsavedAnswers_.first())) unsavedAnswers_.removeFirst();
    if (unsavedAnswers_.isEmpty()) saveStreamingAnswer();
    if (!streaming_ && unsavedAnswers_.isEmpty()) saveTimer_.stop();
}

ChatMessage ChatController::unsavedVersion(const ChatMessage& stored) const {
    const ChatMessage* unsaved = nullptr;
    if (streaming_ && streaming_->message.id == stored.id) unsaved = &streaming_->message;
    for (const ChatMessage& m : unsavedAnswers_)
        if (m.id == stored.id) unsaved = &m;
    if (!unsaved) return stored;
    // Its text and state from memory; its place among the versions from the store.
    ChatMessage m = *unsaved;
    m.parentId = stored.parentId;
    m.version = stored.version;
    m.versions = stored.versions;
    return m;
}

void ChatController::forgetUnsavedAnswers(qint64 conversationId, qint64 messageId) {
    unsavedAnswers_.removeIf(
        [&](const ChatMessage& m) { return m.conversationId == conversationId && (messageId == 0 || m.id == messageId); });
    if (!streaming_ && unsavedAnswers_.isEmpty()) saveTimer_.stop();
}

void ChatController::saveStreamingAnswer() {
    if (!streaming_ || !streaming_->unsaved) return;
    const ChatMessage& m = streaming_->message;
    if (store_->updateMessageText(m.id, m.content, m.reasoning)) {
        streaming_->unsaved = false;
        emit streamingAnswerSaved(m.id, m.content);
    }
}

void ChatController::finishStreaming(ChatMessage message) {
    streaming_.reset();
    // Its text and final state in one write, which also covers text the timer could not save.
    if (!store_->finishMessage(message)) unsavedAnswers_.append(message);
    if (unsavedAnswers_.isEmpty()) saveTimer_.stop();
    if (message.conversationId == currentId_) messages_->update(message);
    emit generatingChanged(false);
}

void ChatController::onAnswerFinished(quint64 requestId, const AnswerStats& stats) {
    if (!streaming_ || streaming_->requestId != requestId) return;
    ChatMessage m = streaming_->message;
    m.state = stats.stoppedByUser ? MessageState::Stopped : MessageState::Complete;
    m.metrics.promptTokens = stats.promptTokens;
    m.metrics.generatedTokens = stats.generatedTokens;
    m.metrics.tokensPerSecond = stats.decodeTokensPerSecond;
    m.metrics.timeToFirstTokenSeconds = stats.timeToFirstTokenSeconds;
    m.omittedMessages = stats.omittedMessages;
    const bool current = m.conversationId == currentId_;
    finishStreaming(m);
    // A server that sent no usage leaves the count unknown (-1).
    if (current) setContextUsage(stats.promptCounted ? stats.contextUsed() : -1, stats.contextLength, stats.omittedMessages);
    if (stats.filledContext)
        emit noticeOccurred(tr("The answer stopped because the context is full (%1 tokens). Start a new chat, or raise "
                               "the context length in Settings.").arg(stats.contextLength));
    if (!stats.gpuFailure.isEmpty()) {
        QString what = stats.gpuFailure;
        what[0] = what[0].toUpper();
        emit noticeOccurred(tr("%1. The answer finished on the CPU, more slowly, and nothing was lost; load the model again "
                               "to go back to the GPU.").arg(what));
    }
    emit answerCompleted(stats);
}

void ChatController::onAnswerFailed(quint64 requestId, const QString& message) {
    if (!streaming_ || streaming_->requestId != requestId) return;
    ChatMessage m = streaming_->message;
    m.state = MessageState::Failed;
    m.error = message;
    const bool current = m.conversationId == currentId_;
    finishStreaming(m);
    // What the conversation takes now, which a failure (one too long for the context) changes.
    if (current) requestTokenCount();
}

void ChatController::requestTokenCount() {
    if (!model_->isReady()) return;
    emit tokenCountRequested(++countRequestId_, promptMessages(), promptBudget());
}

void ChatController::onTokensCounted(quint64 requestId, int tokens, int contextLength, int omitted) {
    if (requestId == countRequestId_) setContextUsage(tokens, contextLength, omitted);
}

void ChatController::setContextUsage(int used, int capacity, int omitted) {
    contextUsed_ = used;
    contextCapacity_ = capacity;
    contextOmitted_ = omitted;
    emit contextUsageChanged(used, capacity, omitted);
}

}  // namespace tandem::ui
