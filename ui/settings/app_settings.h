#pragma once
// Typed access to the app's QSettings, with the defaults that work without reading any documentation.
#include <QSettings>
#include <memory>

#include "tandem/engine.h"
#include "ui/worker/engine_types.h"

namespace tandem::ui {

enum class ThemeChoice { System, Light, Dark };

// The most requests Settings lets the app's server decode together on the GPU (EngineSettings::serverGpuBatch).
inline constexpr int kMaxServerGpuBatch = 8;

// What the model is loaded with: changing any of it needs a reload.
struct EngineSettings {
    QString modelDir;  // empty: the model that ships with Tandem
    int threads = 0;   // 0: all hardware threads
    NumaPolicy numaPolicy = NumaPolicy::Auto;
    CpuKernel cpuKernel = CpuKernel::Auto;
    // -1: CPU only; 0: automatic (the GPU with the most memory); N > 0 or kFirstGpuDevice (-3, GPU 0): that
    // GPU; kEveryGpuDevice (-2): every GPU, a pipeline by layer.
    int gpuDevice = 0;
    int contextLength = 4096;
    // GPU memory for routed experts, in GB (whole MoE layers, the last first): -1 automatic (what is free
    // once the rest of the model and the context are counted), 0 none (all on the CPU).
    int gpuExpertMemoryGb = -1;
    // The dense weights in int8 when the model runs on the CPU (tandem::DensePrecision::Int8): about twice
    // the decode speed, nearly the same answers (docs/BENCHMARKS.md).
    bool int8Dense = true;
    // Each conversation's KV cache in int8 with a scale per head (tandem::KvCacheType::Int8): about a quarter
    // of the memory, so about 3.9x the context fits, on the CPU or the GPU; off by default.
    bool int8KvCache = false;
    // Requests the app's server decodes together when the model runs on the GPU (Settings ▸ Server): above 1
    // and with the server on, the GPU holds that many more conversations' KV caches and buffers, reserved at
    // load before the routed experts get what is left (gpuSessionsFor); 1 answers them one at a time through
    // the chat's session. The CPU path decodes four together whatever this is.
    int serverGpuBatch = 1;

    bool operator==(const EngineSettings&) const = default;
};

struct SamplingDefaults {
    bool useModelRecommendation = true;  // generation_config.json of the model
    tandem::SamplingOptions sampling;
    int maxNewTokens = 1024;

    bool operator==(const SamplingDefaults& other) const;
};

struct Appearance {
    ThemeChoice theme = ThemeChoice::System;
    int fontPointSize = 0;  // 0: the system's

    bool operator==(const Appearance&) const = default;
};

// Where the model wizard stopped, so that reopening Tandem offers to carry on: the files of an
// interrupted download stay in downloadDir and an interrupted conversion in storeDir + ".partial".
struct ModelWizardState {
    enum class Stage { None, Downloading, Converting, Loading };
    Stage stage = Stage::None;
    QString name;         // what the user knows the model as: "DeepSeek-V3", a repository id, a folder name
    QString repo;         // a Hugging Face repository; empty for a local folder or .gguf
    QString revision;
    QString filesJson;    // the repository's files to download: [{"path", "size", "sha256"}]
    QString sourcePath;   // what is converted: the download folder, a local folder or a .gguf file
    QString storeDir;     // the packed store being made
    QString experts;      // "bf16", "int8" or "int4"

    bool operator==(const ModelWizardState&) const = default;
};

// Settings ▸ Server: the loaded model over OpenAI's HTTP API (issue 27), off by default.
struct ServerSettings {
    bool enabled = false;
    QString host = QStringLiteral("127.0.0.1");  // loopback: this computer only
    int port = 8080;
    QString apiKey;  // clients send it as "Authorization: Bearer KEY"; needed for any other host

    bool operator==(const ServerSettings&) const = default;
};

// The sessions the GPU plan reserves for a load (LoadRequest::gpuSessions): the chat's, and with the server
// on and EngineSettings::serverGpuBatch above 1 (and the GPU not turned off: gpuDevice -1; and the build has
// the server: AppServer::available), the server's.
int gpuSessionsFor(const EngineSettings& engine, const ServerSettings& server);

// The GPU the dashboard follows (nvidia-smi's number; -1 CPU only, kEveryGpuDevice every GPU): the one
// Settings chose, or, where it chose none in particular (0) and the loaded model runs on a GPU, that one (the
// engine's pick by memory).
int monitoredGpuDevice(const EngineSettings& engine, const ModelSummary* loaded);

// Whether only this computer reaches `host`: 127.0.0.0/8, ::1 or localhost.
bool isLoopbackAddress(const QString& host);
// Why the server cannot run with `server` (an address for other computers without an API key, a key with
// spaces, no address), or empty. A server that is off is never a problem.
QString serverSettingsProblem(const ServerSettings& server);
// A new random API key: "tandem-" and 40 hexadecimal digits (160 bits from the system's random source).
QString generateApiKey();

class AppSettings {
public:
    // Takes the QSettings to use; tests pass an INI file in a temporary folder.
    explicit AppSettings(std::unique_ptr<QSettings> settings);

    EngineSettings engine() const;
    void setEngine(const EngineSettings& engine);
    SamplingDefaults sampling() const;
    void setSampling(const SamplingDefaults& sampling);
    Appearance appearance() const;
    void setAppearance(const Appearance& appearance);
    ServerSettings server() const;
    void setServer(const ServerSettings& server);
    int defaultDeferral() const;
    void setDefaultDeferral(int experts);
    // The context policy (on by default): a conversation longer than the context is sent as its system
    // prompt and latest turns, the turns in between left out; off, it is refused whole.
    bool fitConversationToContext() const;
    void setFitConversationToContext(bool fit);

    // The deferral last chosen for a model folder, or the default.
    int deferralForModel(const QString& modelDir) const;
    void setDeferralForModel(const QString& modelDir, int experts);

    // The folder the model wizard puts models in: <XDG data dir>/models unless the user chose another.
    QString modelsFolder() const;
    void setModelsFolder(const QString& folder);
    // Where models are downloaded from: a Hugging Face mirror's address, or empty for $HF_ENDPOINT or
    // else https://huggingface.co. An address without a scheme gets https://.
    QString hubEndpoint() const;
    void setHubEndpoint(const QString& endpoint);
    ModelWizardState modelWizardState() const;
    void setModelWizardState(const ModelWizardState& state);
    void clearModelWizardState();

    // Model folders loaded before, the latest first (the model picker's "Recent"); at most kRecentModels.
    static constexpr int kRecentModels = 8;
    QStringList recentModelFolders() const;
    void addRecentModelFolder(const QString& dir);
    // The model folder a conversation was last used with (empty: none remembered). Kept here, by
    // conversation id, rather than in the conversation store.
    QString modelForConversation(qint64 conversationId) const;
    void setModelForConversation(qint64 conversationId, const QString& dir);

    // Models on servers (Add a Server…), in the order they were added; the API keys with them, as the
    // server's own key is kept (server/apiKey).
    QList<RemoteEndpoint> remoteModels() const;
    // The one with `id`, or an invalid one.
    RemoteEndpoint remoteModel(const QString& id) const;
    // Adds `endpoint`, or replaces the one with its id; one without an id gets a new one. Returns its id.
    QString saveRemoteModel(RemoteEndpoint endpoint);
    void removeRemoteModel(const QString& id);

    QByteArray windowState() const;
    void setWindowState(const QByteArray& state);
    QByteArray windowGeometry() const;
    void setWindowGeometry(const QByteArray& geometry);
    // Whether the conversation list is shown (View > Conversations).
    bool sidebarVisible() const;
    void setSidebarVisible(bool visible);

    QString fileName() const { return settings_->fileName(); }
    void sync() { settings_->sync(); }

private:
    std::unique_ptr<QSettings> settings_;
};

}  // namespace tandem::ui
