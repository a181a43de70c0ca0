#pragma once
// Builds the app's parts and wires them: settings, the conversation store, the engine thread, the
// models, the controllers and the window. Used by the `tandem` executable, the screenshot renderer
// and the tests, which swap in their own settings file, database and model loader.
#include <QLockFile>
#include <QObject>
#include <QSettings>
#include <memory>
#include <optional>

#include "ui/controllers/chat_controller.h"
#include "ui/controllers/conversation_models.h"
#include "ui/controllers/model_controller.h"
#include "ui/controllers/server_controller.h"
#include "ui/models/conversation_list_model.h"
#include "ui/models/message_model.h"
#include "ui/models/stats_model.h"
#include "ui/monitor/system_monitor.h"
#include "ui/settings/app_settings.h"
#include "ui/store/conversation_store.h"
#include "ui/wizard/wizard_hooks.h"
#include "ui/worker/engine_host.h"

namespace tandem::ui {

class MainWindow;

struct TandemAppOptions {
    QString databasePath;                 // empty: defaultDatabasePath()
    bool inMemoryDatabase = false;        // nothing is saved (screenshots)
    std::unique_ptr<QSettings> settings;  // null: ~/.config/tandem/tandem.ini
    ModelLoader modelLoader;              // null: the real engine
    StoreVerifyFunction storeVerifier;    // null: tandem::verifyStore in the background
    std::optional<QString> embeddedModelDir;  // unset: findEmbeddedModel(); empty: none
    bool monitorSystem = true;
    ModelDownloaderFactory downloaderFactory;  // null: the Hub client
    MachineFiguresProvider machineFigures;     // null: this machine's
    // Open the model wizard when there is no model to load, or an earlier run of it stopped mid-way.
    bool offerModelWizard = true;
};

class TandemApp : public QObject {
    Q_OBJECT
public:
    explicit TandemApp(TandemAppOptions options = {});
    ~TandemApp() override;

    // Applies the theme, restores the last conversation and starts loading the model and sampling the
    // machine. Does not show the window.
    void start();

    // <XDG data dir>/conversations.sqlite, e.g. ~/.local/share/tandem/conversations.sqlite.
    static QString defaultDatabasePath();
    // The model that ships with Tandem: $TANDEM_DEFAULT_MODEL, paths::shippedModelDir(), or the
    // tiny-qwen3moe fixture under $TANDEM_FIXTURES; empty if none.
    static QString findEmbeddedModel();

    MainWindow* window() const { return window_.get(); }
    ChatController* chat() const { return chat_.get(); }
    ConversationModels* conversationModels() const { return conversationModels_.get(); }
    ModelController* model() const { return model_.get(); }
    ConversationStore* store() const { return store_.get(); }
    EngineWorker* worker() const { return host_->worker(); }
    MessageModel* messages() const { return messages_.get(); }
    ConversationListModel* conversations() const { return conversations_.get(); }
    StatsModel* stats() const { return stats_.get(); }
    SystemMonitor* monitor() const { return monitor_.get(); }
    AppSettings* settings() const { return settings_.get(); }
    // Settings ▸ Server: the loaded model over the OpenAI API.
    ServerController* server() const { return serverController_.get(); }
    // Why the database file could not be used (then conversations live in memory only), or empty.
    QString databaseProblem() const { return databaseProblem_; }

private:
    // Members in construction order; destruction runs backwards, window first, engine thread before
    // the models it reports to.
    std::unique_ptr<AppSettings> settings_;
    std::unique_ptr<QLockFile> databaseLock_;  // one Tandem writes a database at a time
    std::unique_ptr<ConversationStore> store_;
    QString databaseProblem_;
    std::unique_ptr<MessageModel> messages_;
    std::unique_ptr<ConversationListModel> conversations_;
    std::unique_ptr<StatsModel> stats_;
    std::unique_ptr<SystemMonitor> monitor_;
    std::unique_ptr<EngineHost> host_;
    std::unique_ptr<ModelController> model_;
    // After the engine thread and the model controller: stopped before either goes.
    std::unique_ptr<AppServer> appServer_;
    std::unique_ptr<ServerController> serverController_;
    std::unique_ptr<ChatController> chat_;
    std::unique_ptr<ConversationModels> conversationModels_;
    std::unique_ptr<MainWindow> window_;
    bool monitorSystem_;
    bool offerModelWizard_;
};

}  // namespace tandem::ui
