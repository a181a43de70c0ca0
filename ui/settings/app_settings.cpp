#include "ui/settings/app_settings.h"

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QDir>
#include <QHostAddress>
#include <QRandomGenerator>
#include <QUuid>

#include "hub/hub_client.h"
#include "ui/settings/app_paths.h"
#include "ui/worker/app_server.h"

namespace tandem::ui {
namespace {

// QSettings keys cannot hold a path; a hash of the canonical folder names the model.
QString modelKey(const QString& modelDir) {
    const QString canonical = QDir(modelDir).canonicalPath();
    const QByteArray hash = QCryptographicHash::hash((canonical.isEmpty() ? modelDir : canonical).toUtf8(),
                                                     QCryptographicHash::Sha1);
    return QStringLiteral("models/%1/deferral").arg(QString::fromLatin1(hash.toHex().left(16)));
}

template <typename Enum>
Enum enumValue(const QSettings& s, const char* key, Enum fallback, int count) {
    const int v = s.value(QLatin1String(key), static_cast<int>(fallback)).toInt();
    return v >= 0 && v < count ? static_cast<Enum>(v) : fallback;
}

}  // namespace

bool SamplingDefaults::operator==(const SamplingDefaults& o) const {
    const auto& a = sampling;
    const auto& b = o.sampling;
    return useModelRecommendation == o.useModelRecommendation && maxNewTokens == o.maxNewTokens &&
           a.temperature == b.temperature && a.topP == b.topP && a.topK == b.topK && a.minP == b.minP &&
           a.repetitionPenalty == b.repetitionPenalty;
}

AppSettings::AppSettings(std::unique_ptr<QSettings> settings) : settings_(std::move(settings)) {}

EngineSettings AppSettings::engine() const {
    const EngineSettings d;
    EngineSettings e;
    e.modelDir = settings_->value("engine/modelDir", d.modelDir).toString();
    e.threads = std::max(0, settings_->value("engine/threads", d.threads).toInt());
    e.numaPolicy = enumValue(*settings_, "engine/numaPolicy", d.numaPolicy, 3);
    e.cpuKernel = enumValue(*settings_, "engine/cpuKernel", d.cpuKernel, 4);
    e.gpuDevice = settings_->value("engine/gpuDevice", d.gpuDevice).toInt();
    if (e.gpuDevice < kFirstGpuDevice) e.gpuDevice = d.gpuDevice;  // not a value Tandem writes: automatic
    e.contextLength = std::clamp(settings_->value("engine/contextLength", d.contextLength).toInt(), 256, 1 << 20);
    e.gpuExpertMemoryGb = std::clamp(settings_->value("engine/gpuExpertMemoryGb", d.gpuExpertMemoryGb).toInt(), -1, 1 << 16);
    e.int8Dense = settings_->value("engine/int8Dense", d.int8Dense).toBool();
    e.int8KvCache = settings_->value("engine/kvCache", d.int8KvCache ? "int8" : "float32").toString() == QLatin1String("int8");
    e.serverGpuBatch = std::clamp(settings_->value("engine/serverGpuBatch", d.serverGpuBatch).toInt(), 1, kMaxServerGpuBatch);
    return e;
}

void AppSettings::setEngine(const EngineSettings& e) {
    settings_->setValue("engine/modelDir", e.modelDir);
    settings_->setValue("engine/threads", e.threads);
    settings_->setValue("engine/numaPolicy", static_cast<int>(e.numaPolicy));
    settings_->setValue("engine/cpuKernel", static_cast<int>(e.cpuKernel));
    settings_->setValue("engine/gpuDevice", e.gpuDevice);
    settings_->setValue("engine/contextLength", e.contextLength);
    settings_->setValue("engine/gpuExpertMemoryGb", e.gpuExpertMemoryGb);
    settings_->setValue("engine/int8Dense", e.int8Dense);
    settings_->setValue("engine/kvCache", e.int8KvCache ? "int8" : "float32");
    settings_->setValue("engine/serverGpuBatch", e.serverGpuBatch);
}

SamplingDefaults AppSettings::sampling() const {
    const SamplingDefaults d;
    SamplingDefaults s;
    s.useModelRecommendation = settings_->value("sampling/useModelRecommendation", d.useModelRecommendation).toBool();
    s.sampling.temperature = settings_->value("sampling/temperature", d.sampling.temperature).toFloat();
    s.sampling.topP = settings_->value("sampling/topP", d.sampling.topP).toFloat();
    s.sampling.topK = settings_->value("sampling/topK", d.sampling.topK).toInt();
    s.sampling.minP = settings_->value("sampling/minP", d.sampling.minP).toFloat();
    s.sampling.repetitionPenalty = settings_->value("sampling/repetitionPenalty", d.sampling.repetitionPenalty).toFloat();
    s.maxNewTokens = std::max(1, settings_->value("sampling/maxNewTokens", d.maxNewTokens).toInt());
    return s;
}

void AppSettings::setSampling(const SamplingDefaults& s) {
    settings_->setValue("sampling/useModelRecommendation", s.useModelRecommendation);
    settings_->setValue("sampling/temperature", s.sampling.temperature);
    settings_->setValue("sampling/topP", s.sampling.topP);
    settings_->setValue("sampling/topK", s.sampling.topK);
    settings_->setValue("sampling/minP", s.sampling.minP);
    settings_->setValue("sampling/repetitionPenalty", s.sampling.repetitionPenalty);
    settings_->setValue("sampling/maxNewTokens", s.maxNewTokens);
}

Appearance AppSettings::appearance() const {
    Appearance a;
    a.theme = enumValue(*settings_, "appearance/theme", ThemeChoice::System, 3);
    a.fontPointSize = std::clamp(settings_->value("appearance/fontPointSize", 0).toInt(), 0, 48);
    return a;
}

void AppSettings::setAppearance(const Appearance& a) {
    settings_->setValue("appearance/theme", static_cast<int>(a.theme));
    settings_->setValue("appearance/fontPointSize", a.fontPointSize);
}

bool isLoopbackAddress(const QString& host) {
    QString bare = host.trimmed();
    if (bare.compare(QLatin1String("localhost"), Qt::CaseInsensitive) == 0) return true;
    if (bare.startsWith(QLatin1Char('[')) && bare.endsWith(QLatin1Char(']'))) bare = bare.mid(1, bare.size() - 2);
    const QHostAddress address(bare);
    return !address.isNull() && address.isLoopback();
}

QString serverSettingsProblem(const ServerSettings& s) {
    const auto tr = [](const char* text) { return QCoreApplication::translate("ServerSettings", text); };
    if (!s.enabled) return {};
    const QString host = s.host.trimmed();
    if (host.isEmpty()) return tr("Enter the address to serve on: 127.0.0.1 lets only this computer in.");
    if (host.contains(QLatin1Char(' ')) || host.contains(QLatin1Char('/')))
        return tr("\"%1\" is not an address: enter an IP address such as 127.0.0.1 or 0.0.0.0, or a host name.").arg(host);
    if (s.port < 1 || s.port > 65535) return tr("The port must be from 1 to 65535.");
    for (const QChar c : s.apiKey)
        if (c.isSpace() || c.unicode() < 0x21 || c.unicode() > 0x7e)
            return tr("The API key may hold letters, digits and punctuation only, no spaces.");
    if (!isLoopbackAddress(host) && s.apiKey.isEmpty())
        return tr("Serving on %1 lets other computers use the model, so it needs an API key: press Generate, or "
                  "serve on 127.0.0.1 (this computer only).")
            .arg(host);
    return {};
}

QString generateApiKey() {
    quint32 words[5];
    QRandomGenerator::system()->fillRange(words);
    QByteArray bytes(reinterpret_cast<const char*>(words), sizeof words);
    return QStringLiteral("tandem-") + QString::fromLatin1(bytes.toHex());
}

int monitoredGpuDevice(const EngineSettings& engine, const ModelSummary* loaded) {
    if (engine.gpuDevice == 0 && loaded && loaded->onGpu && !loaded->remote && loaded->gpuDevice >= 0) return loaded->gpuDevice;
    return engine.gpuDevice == kFirstGpuDevice ? 0 : engine.gpuDevice;
}

int gpuSessionsFor(const EngineSettings& engine, const ServerSettings& server) {
    // CPU only: nothing is reserved (the CPU path decodes four together anyway); nor in a build without the
    // server, where a saved "on" serves nothing.
    return server.enabled && AppServer::available() && engine.serverGpuBatch > 1 && engine.gpuDevice != -1
               ? 1 + engine.serverGpuBatch
               : 1;
}

ServerSettings AppSettings::server() const {
    const ServerSettings d;
    ServerSettings s;
    s.enabled = settings_->value("server/enabled", d.enabled).toBool();
    s.host = settings_->value("server/host", d.host).toString().trimmed();
    if (s.host.isEmpty()) s.host = d.host;
    s.port = settings_->value("server/port", d.port).toInt();
    if (s.port < 1 || s.port > 65535) s.port = d.port;
    s.apiKey = settings_->value("server/apiKey", d.apiKey).toString();
    return s;
}

void AppSettings::setServer(const ServerSettings& s) {
    settings_->setValue("server/enabled", s.enabled);
    settings_->setValue("server/host", s.host.trimmed());
    settings_->setValue("server/port", s.port);
    if (s.apiKey.isEmpty())
        settings_->remove("server/apiKey");
    else
        settings_->setValue("server/apiKey", s.apiKey);
}

int AppSettings::defaultDeferral() const { return std::max(0, settings_->value("engine/defaultDeferral", 0).toInt()); }
void AppSettings::setDefaultDeferral(int experts) { settings_->setValue("engine/defaultDeferral", std::max(0, experts)); }

bool AppSettings::fitConversationToContext() const { return settings_->value("chat/fitToContext", true).toBool(); }
void AppSettings::setFitConversationToContext(bool fit) { settings_->setValue("chat/fitToContext", fit); }

int AppSettings::deferralForModel(const QString& modelDir) const {
    return std::max(0, settings_->value(modelKey(modelDir), defaultDeferral()).toInt());
}

void AppSettings::setDeferralForModel(const QString& modelDir, int experts) {
    settings_->setValue(modelKey(modelDir), std::max(0, experts));
}

QString AppSettings::modelsFolder() const {
    const QString chosen = settings_->value("wizard/modelsFolder").toString();
    if (!chosen.isEmpty()) return chosen;
    return paths::modelsDir();
}

QString AppSettings::hubEndpoint() const { return settings_->value("hub/endpoint").toString(); }

void AppSettings::setHubEndpoint(const QString& endpoint) {
    const QString cleaned = hub::normalizedEndpoint(endpoint);
    if (cleaned.isEmpty())
        settings_->remove("hub/endpoint");
    else
        settings_->setValue("hub/endpoint", cleaned);
}

void AppSettings::setModelsFolder(const QString& folder) { settings_->setValue("wizard/modelsFolder", QDir::cleanPath(folder)); }

ModelWizardState AppSettings::modelWizardState() const {
    ModelWizardState w;
    w.stage = enumValue(*settings_, "wizard/stage", ModelWizardState::Stage::None, 4);
    w.name = settings_->value("wizard/name").toString();
    w.repo = settings_->value("wizard/repo").toString();
    w.revision = settings_->value("wizard/revision").toString();
    w.filesJson = settings_->value("wizard/files").toString();
    w.sourcePath = settings_->value("wizard/sourcePath").toString();
    w.storeDir = settings_->value("wizard/storeDir").toString();
    w.experts = settings_->value("wizard/experts").toString();
    return w;
}

void AppSettings::setModelWizardState(const ModelWizardState& w) {
    settings_->setValue("wizard/stage", static_cast<int>(w.stage));
    settings_->setValue("wizard/name", w.name);
    settings_->setValue("wizard/repo", w.repo);
    settings_->setValue("wizard/revision", w.revision);
    settings_->setValue("wizard/files", w.filesJson);
    settings_->setValue("wizard/sourcePath", w.sourcePath);
    settings_->setValue("wizard/storeDir", w.storeDir);
    settings_->setValue("wizard/experts", w.experts);
    // Written at once: the point is to survive the app being closed or killed mid-way.
    settings_->sync();
}

void AppSettings::clearModelWizardState() {
    const QString folder = settings_->value("wizard/modelsFolder").toString();
    settings_->remove("wizard");
    if (!folder.isEmpty()) settings_->setValue("wizard/modelsFolder", folder);
    settings_->sync();
}

QStringList AppSettings::recentModelFolders() const {
    QStringList folders = settings_->value("models/recent").toStringList();
    folders.removeAll(QString());
    return folders.mid(0, kRecentModels);
}

void AppSettings::addRecentModelFolder(const QString& dir) {
    const QString cleaned = QDir::cleanPath(dir);
    QStringList folders = recentModelFolders();
    folders.removeAll(cleaned);
    folders.prepend(cleaned);
    settings_->setValue("models/recent", folders.mid(0, kRecentModels));
}

QString AppSettings::modelForConversation(qint64 conversationId) const {
    return settings_->value(QStringLiteral("conversationModels/%1").arg(conversationId)).toString();
}

void AppSettings::setModelForConversation(qint64 conversationId, const QString& dir) {
    const QString key = QStringLiteral("conversationModels/%1").arg(conversationId);
    if (dir.isEmpty()) settings_->remove(key);
    else settings_->setValue(key, QDir::cleanPath(dir));
}

QList<RemoteEndpoint> AppSettings::remoteModels() const {
    QList<RemoteEndpoint> list;
    const int n = settings_->beginReadArray("remoteModels");
    for (int i = 0; i < n; ++i) {
        settings_->setArrayIndex(i);
        RemoteEndpoint e;
        e.id = settings_->value("id").toString();
        e.name = settings_->value("name").toString();
        e.baseUrl = settings_->value("baseUrl").toString();
        e.apiKey = settings_->value("apiKey").toString();
        e.model = settings_->value("model").toString();
        if (e.isValid()) list.append(e);
    }
    settings_->endArray();
    return list;
}

RemoteEndpoint AppSettings::remoteModel(const QString& id) const {
    for (const RemoteEndpoint& e : remoteModels())
        if (e.id == id) return e;
    return {};
}

namespace {

void writeRemoteModels(QSettings& settings, const QList<RemoteEndpoint>& list) {
    settings.remove("remoteModels");
    settings.beginWriteArray("remoteModels", static_cast<int>(list.size()));
    for (int i = 0; i < list.size(); ++i) {
        settings.setArrayIndex(i);
        const RemoteEndpoint& e = list[i];
        settings.setValue("id", e.id);
        settings.setValue("name", e.name);
        settings.setValue("baseUrl", e.baseUrl);
        if (!e.apiKey.isEmpty()) settings.setValue("apiKey", e.apiKey);
        settings.setValue("model", e.model);
    }
    settings.endArray();
}

}  // namespace

QString AppSettings::saveRemoteModel(RemoteEndpoint endpoint) {
    if (!endpoint.isValid()) endpoint.id = QUuid::createUuid().toString(QUuid::Id128).left(12);
    endpoint.name = endpoint.name.trimmed();
    endpoint.baseUrl = endpoint.baseUrl.trimmed();
    endpoint.apiKey = endpoint.apiKey.trimmed();
    endpoint.model = endpoint.model.trimmed();
    QList<RemoteEndpoint> list = remoteModels();
    bool replaced = false;
    for (RemoteEndpoint& e : list)
        if (e.id == endpoint.id) {
            e = endpoint;
            replaced = true;
        }
    if (!replaced) list.append(endpoint);
    writeRemoteModels(*settings_, list);
    settings_->sync();
    return endpoint.id;
}

void AppSettings::removeRemoteModel(const QString& id) {
    QList<RemoteEndpoint> list = remoteModels();
    list.removeIf([&](const RemoteEndpoint& e) { return e.id == id; });
    writeRemoteModels(*settings_, list);
    settings_->sync();
}

QByteArray AppSettings::windowState() const { return settings_->value("window/state").toByteArray(); }
void AppSettings::setWindowState(const QByteArray& state) { settings_->setValue("window/state", state); }
QByteArray AppSettings::windowGeometry() const { return settings_->value("window/geometry").toByteArray(); }
void AppSettings::setWindowGeometry(const QByteArray& geometry) { settings_->setValue("window/geometry", geometry); }
bool AppSettings::sidebarVisible() const { return settings_->value("window/sidebarVisible", true).toBool(); }
void AppSettings::setSidebarVisible(bool visible) { settings_->setValue("window/sidebarVisible", visible); }

}  // namespace tandem::ui
