#pragma once
// The window: conversations on the left, the chat in the middle, the dashboard docked on the right.
// It wires user actions to the controllers and shows what they report; the decisions live there.
#include <QMainWindow>
#include <QPointer>

#include "ui/wizard/wizard_hooks.h"

class QAction;
class QLabel;
class QMenu;
class QSplitter;
class QStackedWidget;
class QToolButton;

namespace tandem::ui {

// Declared only: the files that include this one (the app's wiring, the tests) get neither the
// controllers nor the wizard with it.
class AppSettings;
class ChatController;
class ChatView;
class Composer;
class ContextIndicator;
class ServerController;
class ConversationListModel;
class ConversationModels;
class ConversationSidebar;
class Dashboard;
class EmptyStatePage;
class MessageModel;
class ModelController;
class ModelPicker;
class ModelWizard;
class NotificationBanner;
class StatsModel;
class SystemMonitor;
struct SettingsValues;

struct MainWindowParts {
    ChatController* chat;
    ModelController* model;
    ConversationListModel* conversations;
    MessageModel* messages;
    StatsModel* stats;
    AppSettings* settings;
    SystemMonitor* monitor;
    ModelDownloaderFactory downloaderFactory = {};  // null: the Hub client
    MachineFiguresProvider machineFigures = {};     // null: this machine's
    // Each conversation's model: the model picker's choices go through it. Null: straight to the model.
    ConversationModels* conversationModels = nullptr;
    // Settings ▸ Server; null: no server (its status is not shown).
    ServerController* server = nullptr;
};

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(const MainWindowParts& parts, QWidget* parent = nullptr);

    // Saves `values` and applies what can be applied at once. Returns whether the engine settings
    // changed, which takes a model reload (for the GPU sessions reserved for the server: whether the loaded
    // model's differ from what the new settings ask for).
    bool applySettings(const SettingsValues& values);
    // Shows a problem that does not stop the user. Problems of the conversation store stay up until
    // dismissed; others go when a model finishes loading.
    void showProblem(const QString& message, bool isError = true);
    void showStoreProblem(const QString& message, bool isError = true);

    // For tests and the screenshot: the parts of the window.
    ChatView* chatView() const { return chatView_; }
    Composer* composer() const { return composer_; }
    ConversationSidebar* sidebar() const { return sidebar_; }
    Dashboard* dashboard() const { return dashboard_; }
    NotificationBanner* banner() const { return banner_; }
    // The model's state in the status bar ("name · ready · checking files 42%").
    QString modelStatusText() const;
    // The server's line in the status bar ("Serving on http://127.0.0.1:8080/v1"); empty while it is off.
    QString serverStatusText() const;
    EmptyStatePage* emptyState() const { return emptyState_; }
    ContextIndicator* contextIndicator() const { return context_; }
    ModelPicker* modelPicker() const { return picker_; }
    bool isShowingConversation() const;
    // The model wizard while it is open.
    ModelWizard* modelWizard() const;
    QAction* stopAction() const { return stopAction_; }

public slots:
    void openSettings();
    void openModelFolder();
    // Switches to the model in `dir` for the open conversation (stopping an answer in progress first).
    void chooseModel(const QString& dir);
    // Opens the model wizard, or brings it to the front when it is open already.
    void openModelWizard();
    // Add a Server…: a model on another computer (RemoteModelDialog); once added, it is the model in use.
    void addRemoteModel();
    // File ▸ Edit Server ▸ NAME: a model on a server (its address, key, model; or Remove); saved, it is
    // the model in use. `key` (remoteModelKey) empty: the one in use.
    void editRemoteModel(const QString& key = QString());
    void openConversationSettings();
    void openAbout();
    void confirmDelete(qint64 conversationId);
    void exportConversation(qint64 conversationId, bool markdown);

    // Whether the window is kept whole on its screen (on by default); the screenshot renderer turns it
    // off to draw a window of its own size, larger than the offscreen platform's screen.
    void setFitToScreen(bool fit) { fitToScreen_ = fit; }
    // Shows or hides the conversation list (View > Conversations; remembered).
    void setSidebarShown(bool shown);

protected:
    void closeEvent(QCloseEvent* event) override;
    void showEvent(QShowEvent* event) override;

private:
    QWidget* buildChatPane();
    // Brings the window whole onto a screen: a size saved on a larger screen (or at another scale
    // factor) shrinks to fit, a place on a screen that went away moves onto this one.
    void fitOnScreen();
    void buildMenus();
    void updateChatPage();
    void updateModelState();
    void updateTitle();
    // The status bar and the banner while the loaded store is read in full.
    void showVerification(const QString& name, double fraction);
    void onGeneratingChanged(bool generating);
    // The store takes writes again (a full disk has room): its problem is no longer true.
    void onSavingResumed();
    QString titleOf(qint64 conversationId) const;

    MainWindowParts parts_;
    ConversationSidebar* sidebar_;
    QSplitter* splitter_ = nullptr;
    QAction* showConversations_ = nullptr;
    QLabel* title_;
    ModelPicker* picker_;
    ContextIndicator* context_;
    QToolButton* conversationSettings_;
    NotificationBanner* banner_;
    QStackedWidget* pages_;
    EmptyStatePage* emptyState_;
    ChatView* chatView_;
    Composer* composer_;
    Dashboard* dashboard_;
    QLabel* modelStatus_;
    QLabel* storeStatus_;
    QLabel* serverStatus_ = nullptr;
    QAction* stopAction_ = nullptr;
    QAction* regenerateAction_ = nullptr;
    QMenu* editServerMenu_ = nullptr;
    QPointer<ModelWizard> wizard_;
    int shownVerificationPercent_ = -1;
    // A failed switch's message stays up when the model used before comes back.
    bool keepSwitchProblem_ = false;
    bool fitToScreen_ = true;
};

}  // namespace tandem::ui
