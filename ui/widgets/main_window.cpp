#include "ui/widgets/main_window.h"

#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QRegularExpression>
#include <QPainter>
#include <QScreen>
#include <QScrollArea>
#include <QShowEvent>
#include <QSplitter>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <QWindow>
#include <functional>
#include <algorithm>

#include "ui/controllers/chat_controller.h"
#include "ui/controllers/conversation_models.h"
#include "ui/controllers/generation_options.h"
#include "ui/controllers/model_controller.h"
#include "ui/controllers/server_controller.h"
#include "ui/models/conversation_list_model.h"
#include "ui/models/message_model.h"
#include "ui/models/stats_model.h"
#include "ui/monitor/system_monitor.h"
#include "ui/widgets/about_dialog.h"
#include "ui/widgets/chat_view.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/context_indicator.h"
#include "ui/widgets/conversation_settings_dialog.h"
#include "ui/widgets/conversation_sidebar.h"
#include "ui/widgets/dashboard.h"
#include "ui/widgets/empty_state_page.h"
#include "ui/widgets/model_picker.h"
#include "ui/widgets/notification_banner.h"
#include "ui/widgets/remote_model_dialog.h"
#include "ui/widgets/settings_dialog.h"
#include "ui/widgets/theme.h"
#include "ui/wizard/model_wizard.h"
#include "ui/worker/remote_api.h"

namespace tandem::ui {
namespace {

// The conversation's title, cut short with "…" rather than widen the window ("text()" stays whole).
// The chat's header: in a narrow window its buttons take their short texts.
class ChatHeader : public QWidget {
public:
    using QWidget::QWidget;
    std::function<void(int)> onWidth;

protected:
    void resizeEvent(QResizeEvent* event) override {
        QWidget::resizeEvent(event);
        if (onWidth) onWidth(width());
    }
};

class ElidingLabel : public QLabel {
public:
    using QLabel::QLabel;
    QSize minimumSizeHint() const override { return {0, QLabel::minimumSizeHint().height()}; }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter painter(this);
        painter.setPen(palette().color(foregroundRole()));
        const QRect r = contentsRect();
        painter.drawText(r, static_cast<int>(alignment()), fontMetrics().elidedText(text(), Qt::ElideRight, r.width()));
    }
};

}  // namespace

MainWindow::MainWindow(const MainWindowParts& parts, QWidget* parent)
    : QMainWindow(parent), parts_(parts), sidebar_(new ConversationSidebar(parts.conversations, this)),
      dashboard_(new Dashboard(parts.stats, this)), modelStatus_(new QLabel(this)), storeStatus_(new QLabel(this)) {
    setWindowTitle(QStringLiteral("Tandem"));
    auto* splitter = new QSplitter(Qt::Horizontal, this);
    splitter->setObjectName(QStringLiteral("mainSplitter"));
    splitter->addWidget(sidebar_);
    splitter->addWidget(buildChatPane());
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({260, 800});
    // The conversation list can be dragged shut (View > Conversations brings it back); the chat cannot.
    splitter->setCollapsible(0, true);
    splitter->setCollapsible(1, false);
    sidebar_->setMinimumWidth(140);
    setCentralWidget(splitter);
    splitter_ = splitter;

    auto* dock = new QDockWidget(tr("Dashboard"), this);
    dock->setObjectName(QStringLiteral("dashboardDock"));
    auto* scroll = new QScrollArea(dock);
    scroll->setWidget(dashboard_);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    // Narrow enough that the window, with both side panels, fits an 800-pixel-wide screen.
    scroll->setMinimumWidth(200);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    dock->setWidget(scroll);
    addDockWidget(Qt::RightDockWidgetArea, dock);

    storeStatus_->setVisible(false);
    statusBar()->addPermanentWidget(storeStatus_);
    if (parts_.server) {
        // Settings ▸ Server: where the model is served, or why it is not.
        serverStatus_ = new QLabel(this);
        serverStatus_->setObjectName(QStringLiteral("serverStatus"));
        serverStatus_->setAccessibleName(tr("Server status"));
        serverStatus_->setTextInteractionFlags(Qt::TextSelectableByMouse);
        statusBar()->addPermanentWidget(serverStatus_);
        const auto showServer = [this] {
            const ServerController* server = parts_.server;
            const bool failed = server->state() == ServerController::State::Failed;
            serverStatus_->setText(server->statusText());
            serverStatus_->setStyleSheet(failed ? QStringLiteral("color: #c62828;") : QString());
            serverStatus_->setToolTip(failed ? server->problem()
                                      : server->state() == ServerController::State::Serving
                                          ? tr("OpenAI-compatible API of the loaded model: /v1/chat/completions, "
                                               "/v1/completions, /v1/models (Settings ▸ Server)")
                                          : QString());
            serverStatus_->setVisible(server->state() != ServerController::State::Off);
        };
        connect(parts_.server, &ServerController::statusChanged, this, showServer);
        showServer();
    }
    statusBar()->addPermanentWidget(modelStatus_);
    buildMenus();

    ChatController* chat = parts_.chat;
    ModelController* model = parts_.model;
    connect(sidebar_, &ConversationSidebar::conversationActivated, chat, &ChatController::openConversation);
    connect(sidebar_, &ConversationSidebar::newChatRequested, chat, &ChatController::newConversation);
    connect(sidebar_, &ConversationSidebar::deleteRequested, this, &MainWindow::confirmDelete);
    connect(sidebar_, &ConversationSidebar::exportRequested, this, [this](qint64 id, ConversationSidebar::ExportFormat f) {
        exportConversation(id, f == ConversationSidebar::ExportFormat::Markdown);
    });
    connect(chatView_, &ChatView::copyRequested, this, [this](qint64 id) {
        const int row = parts_.messages->rowOfId(id);
        if (row >= 0) QGuiApplication::clipboard()->setText(parts_.messages->message(row).content);
        statusBar()->showMessage(tr("Message copied"), 2000);
    });
    connect(chatView_, &ChatView::editSubmitted, chat, &ChatController::editAndResend);
    connect(chatView_, &ChatView::regenerateRequested, chat, &ChatController::regenerate);
    connect(chatView_, &ChatView::versionRequested, chat, &ChatController::showVersion);
    connect(chatView_, &ChatView::deleteRequested, chat, &ChatController::deleteMessage);
    context_->setFitToContext(chat->fitsToContext());
    connect(context_, &ContextIndicator::fitToContextToggled, chat, &ChatController::setFitToContext);
    connect(chat, &ChatController::fitToContextChanged, context_, &ContextIndicator::setFitToContext);
    connect(composer_, &Composer::sendRequested, this, [this](const QString& text) {
        if (parts_.chat->send(text)) composer_->clear();
    });
    connect(composer_, &Composer::stopRequested, chat, &ChatController::stop);
    connect(chat, &ChatController::generatingChanged, this, &MainWindow::onGeneratingChanged);
    connect(chat, &ChatController::errorOccurred, this, [this](const QString& m) { showProblem(m); });
    connect(chat, &ChatController::noticeOccurred, this, [this](const QString& m) { showProblem(m, false); });
    connect(chat, &ChatController::savingResumed, this, &MainWindow::onSavingResumed);
    connect(chat, &ChatController::currentConversationChanged, this, [this](qint64 id) {
        sidebar_->setCurrentConversation(id);
        updateTitle();
        updateChatPage();
    });
    connect(parts_.conversations, &QAbstractItemModel::modelReset, this, &MainWindow::updateTitle);
    connect(parts_.conversations, &QAbstractItemModel::dataChanged, this, &MainWindow::updateTitle);
    connect(chat, &ChatController::contextUsageChanged, context_, &ContextIndicator::setUsage);
    connect(model, &ModelController::stateChanged, this, &MainWindow::updateModelState);
    connect(model, &ModelController::loadFailed, this, [this](const QString& message) {
        banner_->showMessage(NotificationBanner::Kind::Error, message, tr("Open Model Folder…"), QStringLiteral("model"));
    });
    connect(model, &ModelController::switchFailed, this, [this](const QString& message) {
        // When the model used before is loading again, the message outlives its Ready.
        keepSwitchProblem_ = parts_.model->state() == ModelController::State::Loading;
        banner_->showMessage(NotificationBanner::Kind::Error, message, tr("Open Model Folder…"), QStringLiteral("model-switch"));
    });
    connect(model, &ModelController::verificationStarted, this, [this](const QString& name) {
        shownVerificationPercent_ = -1;
        showVerification(name, 0);
    });
    connect(model, &ModelController::verificationProgressed, this, &MainWindow::showVerification);
    connect(model, &ModelController::verificationFinished, this, [this](const QString& name, const QString& note) {
        updateModelState();
        if (banner_->topic() == QLatin1String("verify")) banner_->hide();
        if (!note.isEmpty())
            banner_->showMessage(NotificationBanner::Kind::Warning, tr("The files of %1 are intact, but %2").arg(name, note));
        statusBar()->showMessage(tr("The files of %1 are intact.").arg(name), 8000);
    });
    connect(model, &ModelController::verificationFailed, this, [this](const QString& message) {
        updateModelState();
        banner_->showMessage(NotificationBanner::Kind::Warning, message);
    });
    connect(model, &ModelController::storeDamaged, this, [this](const QString& message) {
        banner_->showMessage(NotificationBanner::Kind::Error,
                             tr("This model's files are damaged, so Tandem stopped using it. %1").arg(message),
                             tr("Get a Model…"), QStringLiteral("model-damaged"));
    });
    connect(model, &ModelController::deferralChanged, dashboard_, &Dashboard::setDeferral);
    connect(dashboard_, &Dashboard::deferralChosen, model, &ModelController::setDeferral);
    connect(banner_, &NotificationBanner::actionTriggered, this, [this] {
        if (banner_->topic() == QLatin1String("demo-model") || banner_->topic() == QLatin1String("model-damaged"))
            openModelWizard();
        else
            openModelFolder();
    });
    connect(emptyState_, &EmptyStatePage::openModelRequested, this, &MainWindow::openModelFolder);
    connect(emptyState_, &EmptyStatePage::downloadModelRequested, this, &MainWindow::openModelWizard);
    connect(parts_.messages, &QAbstractItemModel::modelReset, this, &MainWindow::updateChatPage);
    connect(parts_.messages, &QAbstractItemModel::rowsInserted, this, &MainWindow::updateChatPage);
    connect(parts_.messages, &QAbstractItemModel::rowsRemoved, this, &MainWindow::updateChatPage);

    updateModelState();
    updateTitle();
    composer_->focusInput();
    resize(1360, 860);
    if (const QByteArray g = parts_.settings->windowGeometry(); !g.isEmpty()) restoreGeometry(g);
    if (const QByteArray s = parts_.settings->windowState(); !s.isEmpty()) restoreState(s);
    showConversations_->setChecked(parts_.settings->sidebarVisible());
    setSidebarShown(parts_.settings->sidebarVisible());
    // Dragged shut, the list is hidden, and the menu says so.
    connect(splitter_, &QSplitter::splitterMoved, this, [this] {
        if (splitter_->sizes().value(0) == 0 && sidebar_->isVisible()) showConversations_->setChecked(false);
    });
    fitOnScreen();
}

void MainWindow::setSidebarShown(bool shown) {
    if (showConversations_->isChecked() != shown) {
        showConversations_->setChecked(shown);  // comes back here through toggled
        return;
    }
    parts_.settings->setSidebarVisible(shown);
    if (shown == sidebar_->isVisibleTo(this) && (!shown || splitter_->sizes().value(0) > 0)) return;
    sidebar_->setVisible(shown);
    if (shown && splitter_->sizes().value(0) == 0) {
        // Dragged shut before: open it at its usual width.
        const int total = std::max(splitter_->width(), 600);
        splitter_->setSizes({260, total - 260});
    }
}

void MainWindow::fitOnScreen() {
    if (!fitToScreen_) return;
    // The screen the window is on, or (a screen that went away) the primary one.
    QScreen* target = QGuiApplication::screenAt(geometry().center());
    if (!target) target = screen() ? screen() : QGuiApplication::primaryScreen();
    if (!target) return;
    const QRect available = target->availableGeometry();
    // The frame is known once the window manager framed the window; until then, a usual title bar.
    QMargins frame(geometry().left() - frameGeometry().left(), geometry().top() - frameGeometry().top(),
                   frameGeometry().right() - geometry().right(), frameGeometry().bottom() - geometry().bottom());
    if (frame.isNull() && !(windowHandle() && windowHandle()->isExposed())) frame = QMargins(4, 30, 4, 4);
    const QSize room(available.width() - frame.left() - frame.right(), available.height() - frame.top() - frame.bottom());
    const QSize least = minimumSizeHint().expandedTo(minimumSize());
    const QSize size = this->size().boundedTo(room).expandedTo(least.boundedTo(room));
    const int x = std::clamp(geometry().x(), available.left() + frame.left(),
                             std::max(available.left() + frame.left(), available.right() + 1 - frame.right() - size.width()));
    const int y = std::clamp(geometry().y(), available.top() + frame.top(),
                             std::max(available.top() + frame.top(), available.bottom() + 1 - frame.bottom() - size.height()));
    const QRect fitted(QPoint(x, y), size);
    if (fitted != geometry()) setGeometry(fitted);
}

void MainWindow::showEvent(QShowEvent* event) {
    QMainWindow::showEvent(event);
    // A saved size or place from another screen (or another scale factor) comes back on this one; once
    // the window is framed, with its real frame.
    if (!event->spontaneous()) QTimer::singleShot(0, this, &MainWindow::fitOnScreen);
}

QWidget* MainWindow::buildChatPane() {
    auto* pane = new QWidget(this);
    auto* layout = new QVBoxLayout(pane);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);

    auto* header = new ChatHeader(pane);
    header->setObjectName(QStringLiteral("chatHeader"));
    header->setAttribute(Qt::WA_StyledBackground);
    auto* headerLayout = new QHBoxLayout(header);
    headerLayout->setContentsMargins(24, 10, 16, 10);
    title_ = new ElidingLabel(header);
    title_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    title_->setObjectName(QStringLiteral("chatHeaderTitle"));
    picker_ = new ModelPicker(parts_.model, header);
    connect(picker_, &ModelPicker::modelChosen, this, &MainWindow::chooseModel);
    connect(picker_, &ModelPicker::openFolderRequested, this, &MainWindow::openModelFolder);
    connect(picker_, &ModelPicker::getModelRequested, this, &MainWindow::openModelWizard);
    connect(picker_, &ModelPicker::addServerRequested, this, &MainWindow::addRemoteModel);
    // Chosen: back to writing (typing on would go to the picker's type-ahead).
    connect(picker_, &ModelPicker::modelChosen, this, [this] { composer_->focusInput(); });
    title_->setAccessibleName(tr("Conversation title"));
    context_ = new ContextIndicator(header);
    conversationSettings_ = new QToolButton(header);
    conversationSettings_->setText(tr("System prompt…"));
    conversationSettings_->setAccessibleName(tr("Conversation settings"));
    conversationSettings_->setToolTip(tr("This conversation's system prompt, sampling and stop strings"));
    conversationSettings_->setAutoRaise(true);
    connect(conversationSettings_, &QToolButton::clicked, this, &MainWindow::openConversationSettings);
    headerLayout->addWidget(picker_);
    headerLayout->addWidget(title_, 1);
    headerLayout->addWidget(context_);
    headerLayout->addWidget(conversationSettings_);
    layout->addWidget(header);
    // Narrow: "Prompt…" instead of "System prompt…" (the tooltip and accessible name say it whole).
    const QString longText = conversationSettings_->text();
    const QString shortText = tr("Prompt…");
    const int longWidth = conversationSettings_->sizeHint().width();
    conversationSettings_->setText(shortText);
    conversationSettings_->setMinimumWidth(conversationSettings_->sizeHint().width());
    conversationSettings_->setText(longText);
    header->onWidth = [this, header, headerLayout, longText, shortText, longWidth](int width) {
        // Room for the long text: what the header needs at its narrowest, plus the difference.
        const int narrowest = headerLayout->minimumSize().width();
        const bool roomy = width >= narrowest + (longWidth - conversationSettings_->minimumWidth()) + 160;
        const QString text = roomy ? longText : shortText;
        if (conversationSettings_->text() != text) conversationSettings_->setText(text);
        Q_UNUSED(header);
    };

    banner_ = new NotificationBanner(pane);
    auto* bannerBox = new QWidget(pane);
    bannerBox->setObjectName(QStringLiteral("chatHeader"));
    bannerBox->setAttribute(Qt::WA_StyledBackground);
    auto* bannerLayout = new QHBoxLayout(bannerBox);
    bannerLayout->setContentsMargins(16, 0, 16, 6);
    bannerLayout->addWidget(banner_);
    layout->addWidget(bannerBox);

    pages_ = new QStackedWidget(pane);
    emptyState_ = new EmptyStatePage(pages_);
    chatView_ = new ChatView(parts_.messages, pages_);
    pages_->addWidget(emptyState_);
    pages_->addWidget(chatView_);
    layout->addWidget(pages_, 1);

    composer_ = new Composer(pane);
    layout->addWidget(composer_);
    return pane;
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&New Chat"), QKeySequence::New, parts_.chat, [this] {
        parts_.chat->newConversation();
        composer_->focusInput();
    });
    file->addAction(tr("&Get a Model…"), this, &MainWindow::openModelWizard)->setObjectName(QStringLiteral("getModelAction"));
    file->addAction(tr("&Open Model Folder…"), QKeySequence::Open, this, &MainWindow::openModelFolder);
    QAction* chooseModel = file->addAction(tr("&Choose Model…"), this, [this] {
        picker_->setFocus();
        picker_->showPopup();
    });
    chooseModel->setObjectName(QStringLiteral("chooseModelAction"));
    chooseModel->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_M));
    file->addAction(tr("Add a &Server…"), this, &MainWindow::addRemoteModel)->setObjectName(QStringLiteral("addServerAction"));
    // One entry per model on a server: its address, key and model, or Remove. Listed when it opens.
    editServerMenu_ = file->addMenu(tr("Edit &Server"));
    editServerMenu_->setObjectName(QStringLiteral("editServerMenu"));
    connect(editServerMenu_, &QMenu::aboutToShow, this, [this] {
        editServerMenu_->clear();
        const QList<RemoteEndpoint> servers = parts_.settings->remoteModels();
        if (servers.isEmpty()) editServerMenu_->addAction(tr("None added yet"))->setEnabled(false);
        for (const RemoteEndpoint& e : servers) {
            const QString key = remoteModelKey(e.id);
            QAction* a = editServerMenu_->addAction(tr("%1 (%2)").arg(e.name, remoteServerName(e.baseUrl)).replace('&', "&&"),
                                                    this, [this, key] { editRemoteModel(key); });
            a->setToolTip(tr("%1 at %2").arg(e.model, remoteApiBase(e.baseUrl)));
        }
    });
    file->addAction(tr("&Reload Model"), this, [this] {
        parts_.chat->stop();  // a load waits for the answer in progress; stop it first
        parts_.model->loadConfigured();
    });
    file->addSeparator();
    file->addAction(tr("Export as &Markdown…"), this, [this] { exportConversation(parts_.chat->currentConversationId(), true); });
    file->addAction(tr("Export as &JSON…"), this, [this] { exportConversation(parts_.chat->currentConversationId(), false); });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    edit->addAction(tr("&Find in Conversations"), QKeySequence::Find, sidebar_, &ConversationSidebar::focusSearch);
    edit->addSeparator();
    QAction* settings = edit->addAction(tr("&Settings…"), this, &MainWindow::openSettings);
    settings->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Comma));
    settings->setMenuRole(QAction::PreferencesRole);

    QMenu* conversation = menuBar()->addMenu(tr("&Conversation"));
    stopAction_ = conversation->addAction(tr("&Stop Answer"), parts_.chat, &ChatController::stop);
    stopAction_->setShortcut(Qt::Key_Escape);
    stopAction_->setEnabled(false);
    regenerateAction_ = conversation->addAction(tr("&Regenerate Answer"), parts_.chat, &ChatController::regenerate);
    regenerateAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    conversation->addAction(tr("R&ename…"), QKeySequence(Qt::Key_F2), this, [this] {
        sidebar_->rename(parts_.chat->currentConversationId());
    });
    conversation->addAction(tr("System Prompt, &Sampling and Stop Strings…"), this, &MainWindow::openConversationSettings);
    conversation->addSeparator();
    conversation->addAction(tr("&Delete…"), this, [this] { confirmDelete(parts_.chat->currentConversationId()); });

    QMenu* view = menuBar()->addMenu(tr("&View"));
    showConversations_ = view->addAction(tr("&Conversations"));
    showConversations_->setObjectName(QStringLiteral("showConversationsAction"));
    showConversations_->setCheckable(true);
    showConversations_->setChecked(true);
    showConversations_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_L));
    showConversations_->setToolTip(tr("Show or hide the list of conversations"));
    connect(showConversations_, &QAction::toggled, this, &MainWindow::setSidebarShown);
    QAction* dashboard = findChild<QDockWidget*>(QStringLiteral("dashboardDock"))->toggleViewAction();
    dashboard->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_D));
    view->addAction(dashboard);

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* about = help->addAction(tr("&About Tandem"), this, &MainWindow::openAbout);
    about->setMenuRole(QAction::AboutRole);
}

void MainWindow::openAbout() {
    // Not modal to the app: it shows facts, and the chat can go on behind it.
    auto* dialog = new AboutDialog(parts_.model->summary(), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->show();
}

bool MainWindow::isShowingConversation() const { return pages_->currentWidget() == chatView_; }

ModelWizard* MainWindow::modelWizard() const { return wizard_; }

void MainWindow::updateChatPage() {
    if (parts_.messages->rowCount() > 0) {
        pages_->setCurrentWidget(chatView_);
        return;
    }
    ModelController* m = parts_.model;
    switch (m->state()) {
    case ModelController::State::NoModel: emptyState_->setMode(EmptyStatePage::Mode::NoModel, m->lastError()); break;
    case ModelController::State::Loading:
        emptyState_->setMode(EmptyStatePage::Mode::Loading, m->nameOf(m->loadingDir()));
        break;
    case ModelController::State::Failed: emptyState_->setMode(EmptyStatePage::Mode::LoadFailed, m->lastError()); break;
    case ModelController::State::Ready: emptyState_->setMode(EmptyStatePage::Mode::Ready, m->summary().name); break;
    }
    pages_->setCurrentWidget(emptyState_);
}

void MainWindow::updateModelState() {
    ModelController* m = parts_.model;
    switch (m->state()) {
    case ModelController::State::NoModel:
        modelStatus_->setText(tr("No model"));
        composer_->setUnavailableReason(tr("Get a model or open a model folder to start chatting"));
        dashboard_->setModel(nullptr, 0);
        break;
    case ModelController::State::Loading:
        modelStatus_->setText(m->isRemote() ? tr("Connecting to %1…").arg(m->nameOf(m->loadingDir()))
                                            : tr("Loading %1…").arg(m->nameOf(m->loadingDir())));
        composer_->setUnavailableReason(m->isRemote() ? tr("Connecting to the server…") : tr("The model is loading…"));
        dashboard_->setModel(nullptr, 0);
        break;
    case ModelController::State::Failed:
        modelStatus_->setText(tr("Model failed to load"));
        composer_->setUnavailableReason(tr("No model loaded: open another model folder"));
        dashboard_->setModel(nullptr, 0);
        break;
    case ModelController::State::Ready: {
        const ModelSummary& s = m->summary();
        modelStatus_->setText(s.remote ? tr("%1 · on %2 · ready").arg(s.name, remoteServerName(s.remoteUrl)) : tr("%1 · ready").arg(s.name));
        modelStatus_->setToolTip(s.remote                ? tr("%1: the model %2 of the server at %3").arg(s.name, s.remoteModel, s.remoteUrl)
                                 : s.placement.isEmpty() ? tr("%1 (%2), %3").arg(s.name, s.modelType, s.textHandling)
                                                         : tr("%1 (%2), %3; routed experts: %4")
                                                               .arg(s.name, s.modelType, s.textHandling, s.placement));
        composer_->setUnavailableReason({});
        dashboard_->setModel(&s, m->deferral());
        const bool keep = banner_->topic() == QLatin1String("store") || banner_->topic() == QLatin1String("verify") ||
                          (banner_->topic() == QLatin1String("model-switch") && keepSwitchProblem_);
        keepSwitchProblem_ = false;
        if (!keep) banner_->hide();
        // The shipped model is a pocket dictionary, not an assistant: say so before anyone asks it more.
        if (m->isEmbeddedModelReady() && banner_->isHidden())
            banner_->showMessage(NotificationBanner::Kind::Information,
                                 tr("%1 is the small demo model that ships with Tandem: it only knows what English "
                                    "words mean (try “What does serendipity mean?”) and makes up anything else. "
                                    "For real conversations, get a real model.")
                                     .arg(s.name),
                                 tr("Get a Model…"), QStringLiteral("demo-model"));
        break;
    }
    }
    updateChatPage();
}

QString MainWindow::serverStatusText() const { return serverStatus_ && serverStatus_->isVisibleTo(this) ? serverStatus_->text() : QString(); }

QString MainWindow::modelStatusText() const { return modelStatus_->text(); }

void MainWindow::showVerification(const QString& name, double fraction) {
    // Whole percents: the engine reports ten times a second, the text changes when it would show.
    const int percent = static_cast<int>(100 * std::clamp(fraction, 0.0, 1.0));
    if (percent == shownVerificationPercent_) return;
    const bool first = shownVerificationPercent_ < 0;
    shownVerificationPercent_ = percent;
    modelStatus_->setText(tr("%1 · ready · checking its files %2%").arg(name).arg(percent));
    // The banner comes up once (unless it says that conversations are not being saved, which matters
    // more); dismissed, it stays down, and the status bar goes on counting.
    const bool storeProblemShown = !banner_->isHidden() && banner_->topic() == QLatin1String("store");
    if ((first && !storeProblemShown) || (!banner_->isHidden() && banner_->topic() == QLatin1String("verify")))
        banner_->showMessage(NotificationBanner::Kind::Information,
                             tr("Checking the files of %1 (%2%): Tandem reads them in full once, to be sure they are "
                                "intact. You can chat meanwhile.")
                                 .arg(name)
                                 .arg(percent),
                             {}, QStringLiteral("verify"));
}

void MainWindow::updateTitle() {
    const QString title = parts_.chat->currentTitle();
    title_->setText(title);
    setWindowTitle(parts_.chat->currentConversationId() ? tr("%1 — Tandem").arg(title) : QStringLiteral("Tandem"));
}

void MainWindow::onGeneratingChanged(bool generating) {
    composer_->setGenerating(generating);
    chatView_->setBusy(generating);
    stopAction_->setEnabled(generating);
    regenerateAction_->setEnabled(!generating);
}

void MainWindow::showProblem(const QString& message, bool isError) {
    banner_->showMessage(isError ? NotificationBanner::Kind::Error : NotificationBanner::Kind::Warning, message);
}

void MainWindow::showStoreProblem(const QString& message, bool isError) {
    // The status bar keeps saying it after the banner is dismissed or replaced.
    storeStatus_->setText(tr("⚠ Conversations are not being saved"));
    storeStatus_->setToolTip(message);
    storeStatus_->setVisible(true);
    banner_->showMessage(isError ? NotificationBanner::Kind::Error : NotificationBanner::Kind::Warning, message, {},
                         QStringLiteral("store"));
}

void MainWindow::onSavingResumed() {
    storeStatus_->setVisible(false);
    if (banner_->topic() == QLatin1String("store")) banner_->hide();
    statusBar()->showMessage(tr("Conversations are being saved again."), 6000);
}

void MainWindow::openModelFolder() {
    const QString configured = parts_.settings->engine().modelDir;
    const QString start = configured.isEmpty() || isRemoteModelKey(configured) ? QStandardPaths::writableLocation(QStandardPaths::HomeLocation)
                                                                               : configured;
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open Model Folder"), start);
    if (dir.isEmpty()) return;
    chooseModel(dir);
}

void MainWindow::chooseModel(const QString& dir) {
    if (banner_->topic() == QLatin1String("model") || banner_->topic() == QLatin1String("model-switch")) banner_->hide();
    parts_.chat->stop();  // a load waits for the answer in progress
    if (parts_.conversationModels)
        parts_.conversationModels->choose(dir);
    else
        parts_.model->loadModelFolder(dir);
}

void MainWindow::addRemoteModel() {
    RemoteModelDialog dialog(RemoteEndpoint{}, this);
    if (dialog.exec() != QDialog::Accepted) return;
    const QString id = parts_.settings->saveRemoteModel(dialog.endpoint());
    chooseModel(remoteModelKey(id));
}

void MainWindow::editRemoteModel(const QString& which) {
    ModelController* m = parts_.model;
    const QString current = m->state() == ModelController::State::Loading ? m->loadingDir() : m->summary().dir;
    const QString key = which.isEmpty() ? current : which;
    const RemoteEndpoint endpoint = m->remoteModel(key);
    if (!endpoint.isValid()) return;
    RemoteModelDialog dialog(endpoint, this);
    if (dialog.exec() != QDialog::Accepted) return;
    const bool inUse = key == current && m->state() != ModelController::State::NoModel && m->state() != ModelController::State::Failed;
    if (dialog.removeRequested()) {
        parts_.settings->removeRemoteModel(endpoint.id);
        // It is no model any more: the one that ships with Tandem takes over, if there is one.
        if (inUse && !m->embeddedModelDir().isEmpty()) chooseModel(m->embeddedModelDir());
        picker_->refresh();
        return;
    }
    parts_.settings->saveRemoteModel(dialog.endpoint());
    // Connects (again) with what was changed: a server fixed after it failed is the one wanted now.
    chooseModel(key);
}

void MainWindow::openModelWizard() {
    if (!wizard_) {
        wizard_ = new ModelWizard({parts_.settings, parts_.model, parts_.chat, parts_.downloaderFactory, parts_.machineFigures}, this);
        wizard_->setAttribute(Qt::WA_DeleteOnClose);
    }
    // Not modal: a download takes hours, and the conversations stay readable meanwhile.
    wizard_->show();
    wizard_->raise();
    wizard_->activateWindow();
}

bool MainWindow::applySettings(const SettingsValues& values) {
    const SettingsValues before = SettingsValues::read(*parts_.settings);
    values.write(*parts_.settings);
    applyTheme(values.appearance);
    parts_.monitor->setGpuDevice(
        monitoredGpuDevice(values.engine, parts_.model->isReady() ? &parts_.model->summary() : nullptr));
    if (parts_.server) parts_.server->apply();
    if (!values.needsReloadComparedTo(before)) return false;
    // Only the server's GPU sessions changed (the server turned on or off, or its requests together): a
    // reload only where the loaded model holds another number of them than the new settings ask for (not on
    // the CPU, not for a model on a server, not again after a reload that was declined and then undone).
    SettingsValues rest = values;
    rest.server = before.server;
    rest.engine.serverGpuBatch = before.engine.serverGpuBatch;
    if (!rest.needsReloadComparedTo(before) && parts_.model->isReady()) {
        const ModelSummary& loaded = parts_.model->summary();
        return loaded.onGpu && !loaded.remote && loaded.gpuSessions != gpuSessionsFor(values.engine, values.server);
    }
    return true;
}

void MainWindow::openSettings() {
    SettingsDialog dialog(SettingsValues::read(*parts_.settings), parts_.monitor->gpuNames(), this);
    dialog.setInEffect(parts_.model->isReady() && !parts_.model->summary().remote ? &parts_.model->summary() : nullptr);
    if (dialog.exec() != QDialog::Accepted) return;
    if (!applySettings(dialog.values())) return;
    if (parts_.model->state() != ModelController::State::Ready) {
        parts_.model->loadConfigured();
        return;
    }
    const auto answer = QMessageBox::question(this, tr("Reload the Model?"),
                                              tr("The model, threads, NUMA policy, CPU kernel, device, context length, "
                                                 "KV cache and the server's requests on the GPU take effect when the "
                                                 "model is loaded again. Reload it now?"),
                                              QMessageBox::Yes | QMessageBox::No, QMessageBox::Yes);
    if (answer == QMessageBox::Yes) {
        parts_.chat->stop();
        parts_.model->loadConfigured();
    } else {
        statusBar()->showMessage(tr("The new engine settings apply the next time the model loads."), 8000);
    }
}

void MainWindow::openConversationSettings() {
    const SamplingDefaults defaults = parts_.settings->sampling();
    const tandem::SamplingOptions base =
        defaults.useModelRecommendation ? parts_.model->summary().recommendedSampling : defaults.sampling;
    ConversationSettingsDialog dialog(parts_.chat->currentSettings(), base, this);
    if (dialog.exec() == QDialog::Accepted) parts_.chat->setConversationSettings(dialog.settings());
}

QString MainWindow::titleOf(qint64 conversationId) const {
    const int row = parts_.conversations->rowOf(conversationId);
    return row >= 0 ? parts_.conversations->data(parts_.conversations->index(row), Qt::DisplayRole).toString()
                    : parts_.chat->currentTitle();
}

void MainWindow::confirmDelete(qint64 conversationId) {
    if (conversationId == 0) return;
    QMessageBox box(QMessageBox::Warning, tr("Delete Conversation?"),
                    tr("Delete “%1” and all its messages? This cannot be undone.").arg(titleOf(conversationId)),
                    QMessageBox::Cancel, this);
    QPushButton* del = box.addButton(tr("Delete"), QMessageBox::DestructiveRole);
    box.setDefaultButton(QMessageBox::Cancel);
    box.exec();
    if (box.clickedButton() == del) parts_.chat->deleteConversation(conversationId);
}

void MainWindow::exportConversation(qint64 conversationId, bool markdown) {
    if (conversationId == 0) {
        statusBar()->showMessage(tr("Nothing to export yet: send a message first."), 5000);
        return;
    }
    QString name = titleOf(conversationId);
    name.replace(QRegularExpression(QStringLiteral("[^\\w\\- ]")), QStringLiteral("_"));
    const QString suggested = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation) + QLatin1Char('/') +
                              name + (markdown ? QStringLiteral(".md") : QStringLiteral(".json"));
    const QString path = QFileDialog::getSaveFileName(this, markdown ? tr("Export as Markdown") : tr("Export as JSON"), suggested,
                                                      markdown ? tr("Markdown (*.md)") : tr("JSON (*.json)"));
    if (path.isEmpty()) return;
    const QString error = parts_.chat->exportConversation(
        conversationId, path, markdown ? ChatController::ExportFormat::Markdown : ChatController::ExportFormat::Json);
    if (error.isEmpty()) statusBar()->showMessage(tr("Exported to %1").arg(QDir::toNativeSeparators(path)), 6000);
    else showProblem(error);
}

void MainWindow::closeEvent(QCloseEvent* event) {
    parts_.settings->setWindowGeometry(saveGeometry());
    parts_.settings->setWindowState(saveState());
    parts_.settings->sync();
    parts_.chat->shutDown();
    QMainWindow::closeEvent(event);
}

}  // namespace tandem::ui
