#include "ui/shell/tandem_app.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include "ui/settings/app_paths.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/theme.h"

namespace tandem::ui {
namespace {

// Why the database's lock could not be taken, for the user: another Tandem holds it, or the folder cannot
// be written (read-only, full disk, no permission), which the system's own reason says.
QString lockProblem(const QLockFile& lock, const QString& path) {
    const QString shown = QDir::toNativeSeparators(path);
    if (lock.error() == QLockFile::LockFailedError)
        return TandemApp::tr("Another Tandem is open and using your conversations (%1). This window does not save its "
                             "conversations; use the other one, or close it and start Tandem again.")
            .arg(shown);
    const QString folder = QFileInfo(path).absolutePath();
    QFile probe(folder + QStringLiteral("/.tandem-write-check"));
    const QString reason = probe.open(QIODevice::WriteOnly) ? TandemApp::tr("the lock file could not be created")
                                                             : probe.errorString();
    probe.remove();
    return TandemApp::tr("Tandem cannot save conversations in %1: %2. This window keeps them only until it closes; "
                         "make room on the disk or make the folder writable, then start Tandem again.")
        .arg(QDir::toNativeSeparators(folder), reason);
}

}  // namespace

TandemApp::TandemApp(TandemAppOptions options)
    : settings_(std::make_unique<AppSettings>(options.settings ? std::move(options.settings) : paths::userSettings())),
      monitorSystem_(options.monitorSystem), offerModelWizard_(options.offerModelWizard) {
    std::unique_ptr<Database> database;
    if (options.inMemoryDatabase) {
        database = Database::openInMemory();
    } else {
        const QString path = options.databasePath.isEmpty() ? defaultDatabasePath() : options.databasePath;
        QDir().mkpath(QFileInfo(path).absolutePath());
        // A second Tandem would mark the first one's streaming answer as interrupted; a lock left by a
        // crashed Tandem is stale (its process is gone) and taken over.
        databaseLock_ = std::make_unique<QLockFile>(path + QStringLiteral(".lock"));
        if (!databaseLock_->tryLock(200)) {
            databaseProblem_ = lockProblem(*databaseLock_, path);
        } else {
            auto opened = Database::open(path);
            databaseProblem_ = opened.problem;
            database = std::move(opened.database);
        }
        // A file that cannot be used is left alone; this session keeps its conversations in memory.
        if (!database) database = Database::openInMemory();
    }
    store_ = std::make_unique<ConversationStore>(std::move(database));
    store_->markInterruptedAnswers();
    messages_ = std::make_unique<MessageModel>();
    conversations_ = std::make_unique<ConversationListModel>(store_.get());
    stats_ = std::make_unique<StatsModel>();
    monitor_ = std::make_unique<SystemMonitor>();
    monitor_->setGpuDevice(monitoredGpuDevice(settings_->engine(), nullptr));
    host_ = std::make_unique<EngineHost>(options.modelLoader ? options.modelLoader : ModelLoader(loadEngineModel));
    const QString embedded = options.embeddedModelDir ? *options.embeddedModelDir : findEmbeddedModel();
    model_ = std::make_unique<ModelController>(host_->worker(), settings_.get(), embedded, nullptr,
                                               std::move(options.storeVerifier));
    appServer_ = std::make_unique<AppServer>(host_->worker());
    serverController_ = std::make_unique<ServerController>(appServer_.get(), model_.get(), settings_.get());
    chat_ = std::make_unique<ChatController>(store_.get(), messages_.get(), model_.get(), host_->worker(), settings_.get());

    connect(monitor_.get(), &SystemMonitor::sampled, stats_.get(), &StatsModel::addSample);
    connect(host_->worker(), &EngineWorker::liveStatsMeasured, stats_.get(), &StatsModel::setLiveEngineStats);
    connect(chat_.get(), &ChatController::generatingChanged, stats_.get(), &StatsModel::setGenerating);
    connect(chat_.get(), &ChatController::answerCompleted, stats_.get(), &StatsModel::setAnswerStats);
    // A speed measured on a model that is gone (or being replaced) is not this model's.
    connect(model_.get(), &ModelController::stateChanged, stats_.get(), [s = stats_.get()](ModelController::State state) {
        if (state != ModelController::State::Ready) s->forgetEngine();
    });
    // The dashboard's GPU: the one the loaded model runs on where Settings chose none in particular; with no
    // model (none, or one that failed to load), Settings' again. While one loads it stays as it was.
    connect(model_.get(), &ModelController::stateChanged, monitor_.get(), [this](ModelController::State state) {
        if (state == ModelController::State::Ready)
            monitor_->setGpuDevice(monitoredGpuDevice(settings_->engine(), &model_->summary()));
        else if (state != ModelController::State::Loading)
            monitor_->setGpuDevice(monitoredGpuDevice(settings_->engine(), nullptr));
    });

    conversationModels_ = std::make_unique<ConversationModels>(chat_.get(), model_.get(), settings_.get());
    window_ = std::make_unique<MainWindow>(MainWindowParts{chat_.get(), model_.get(), conversations_.get(), messages_.get(),
                                                           stats_.get(), settings_.get(), monitor_.get(),
                                                           std::move(options.downloaderFactory), std::move(options.machineFigures),
                                                           conversationModels_.get(), serverController_.get()});
    // No model to load is the moment to get one: the wizard opens instead of an error. Queued, so that
    // it opens over the window once that is shown.
    if (offerModelWizard_)
        connect(model_.get(), &ModelController::modelMissing, window_.get(), &MainWindow::openModelWizard, Qt::QueuedConnection);
    connect(store_.get(), &ConversationStore::writeFailed, window_.get(),
            [w = window_.get()](const QString& m) { w->showStoreProblem(m); });
    if (!databaseProblem_.isEmpty()) window_->showStoreProblem(databaseProblem_);
}

TandemApp::~TandemApp() {
    // Requests in flight end with an error and the port is let go before anything else closes.
    serverController_.reset();
    appServer_.reset();
    chat_->shutDown();
    window_.reset();
}

void TandemApp::start() {
    applyTheme(settings_->appearance());
    chat_->openLastConversation();
    model_->loadConfigured();
    // From now on opening a conversation switches to its model (the one reopened here goes on with the
    // model just asked for: the last one used).
    conversationModels_->follow();
    // A download or conversion that stopped when the app was closed: offer to carry on.
    if (offerModelWizard_ && settings_->modelWizardState().stage != ModelWizardState::Stage::None)
        QMetaObject::invokeMethod(window_.get(), &MainWindow::openModelWizard, Qt::QueuedConnection);
    if (monitorSystem_) monitor_->start();
}

QString TandemApp::defaultDatabasePath() { return paths::databaseFile(); }

QString TandemApp::findEmbeddedModel() {
    QStringList candidates;
    if (const QString env = qEnvironmentVariable("TANDEM_DEFAULT_MODEL"); !env.isEmpty()) candidates << env;
    candidates << paths::shippedModelDir();
    if (const QString fixtures = qEnvironmentVariable("TANDEM_FIXTURES"); !fixtures.isEmpty())
        candidates << fixtures + QStringLiteral("/tiny-qwen3moe");
    for (const QString& dir : candidates)
        if (QFileInfo::exists(dir + QStringLiteral("/config.json"))) return QDir(dir).canonicalPath();
    return {};
}

}  // namespace tandem::ui
