#pragma once
// Values the UI thread and the engine thread exchange through queued signals. Plain copyable structs.
#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <optional>

#include "tandem/engine.h"
#include "ui/text/chat_formatter.h"

namespace tandem::ui {

enum class NumaPolicy { Auto, Off, SplitExperts };
enum class CpuKernel { Auto, Amx, Avx512, Avx2 };

// A model on another computer, spoken to over OpenAI's HTTP API (vLLM, SGLang, another Tandem's
// `tandem-cli serve`, ...): what the user entered in Add a Server (ui/widgets/remote_model_dialog.h), kept
// in the settings (AppSettings::remoteModels). Its key (remoteModelKey) stands where a local model's
// folder stands: the configured model, each conversation's model, the model picker's rows.
struct RemoteEndpoint {
    QString id;       // made when it is added; never changes (the key is made of it)
    QString name;     // what the user calls it
    QString baseUrl;  // http(s)://host:port, with or without a trailing /v1
    QString apiKey;   // sent as "Authorization: Bearer KEY"; empty: none
    QString model;    // the server's model id (GET /v1/models lists them)

    bool isValid() const { return !id.isEmpty(); }
    bool operator==(const RemoteEndpoint&) const = default;
};

// "tandem-remote:ID": the key of a remote model, where a local model has its folder.
QString remoteModelKey(const QString& id);
// Whether `dir` is such a key, and its id (empty when it is a folder).
bool isRemoteModelKey(const QString& dir);
QString remoteModelId(const QString& dir);

// What a model is loaded with. The engine takes threads and context length today; NUMA policy, kernel
// and GPU device travel to the worker so that only engineOptionsFor() changes when the engine grows them.
// Settings' "every GPU" (EngineSettings::gpuDevice, LoadRequest::gpuDevice): the model as a pipeline by layer
// over all the machine's GPUs (tandem::kEveryGpu); with one GPU, that one.
inline constexpr int kEveryGpuDevice = -2;
// Settings' GPU 0 chosen by number (EngineSettings::gpuDevice, LoadRequest::gpuDevice): 0 itself means no GPU
// in particular (with several GPUs, the engine's choice: the one with the most memory), so GPU 0 in
// particular has its own value.
inline constexpr int kFirstGpuDevice = -3;
// The GPU a Settings value names by number (nvidia-smi's), or -1 where it names none (CPU only, automatic,
// every GPU).
inline int chosenGpuNumber(int gpuDevice) { return gpuDevice == kFirstGpuDevice ? 0 : gpuDevice > 0 ? gpuDevice : -1; }

struct LoadRequest {
    QString modelDir;
    int threads = 0;  // 0 = all hardware threads
    NumaPolicy numaPolicy = NumaPolicy::Auto;
    CpuKernel cpuKernel = CpuKernel::Auto;
    int gpuDevice = 0;  // -1 = CPU only; 0 = automatic; kFirstGpuDevice or N > 0: that GPU; kEveryGpuDevice
    int contextLength = 4096;
    int gpuExpertMemoryGb = -1;  // EngineSettings::gpuExpertMemoryGb
    bool int8Dense = true;       // EngineSettings::int8Dense
    bool int8KvCache = false;    // EngineSettings::int8KvCache
    // Sessions the GPU plan reserves (tandem::EngineOptions::gpuSessions): the chat's, and with
    // EngineSettings::serverGpuBatch above 1 the app's server's.
    int gpuSessions = 1;
    int deferredExperts = 0;
    // Set: the model is this server's (modelDir is its key), nothing is loaded here.
    RemoteEndpoint remote;
};

struct ModelSummary {
    quint64 serial = 0;  // which load of the worker this is (EngineWorker::post's tasks compare it)
    QString dir;
    QString name;  // the folder name, which is how people know their models
    QString modelType;
    int layers = 0;
    int experts = 0;
    int expertsPerToken = 0;
    int contextLength = 0;
    int maxContextLength = 0;       // the most the model holds (tandem::ModelInfo)
    quint64 kvBytesPerPosition = 0;  // one conversation's KV cache per position, as held (kvCache)
    // The same for each choice of Settings' KV cache (tandem::ModelInfo), how it is held ("float32",
    // "int8").
    quint64 kvBytesPerPositionFloat32 = 0;
    quint64 kvBytesPerPositionInt8 = 0;
    QString kvCache;
    QString kvCacheNotice;  // why not as Settings asked (tandem::ModelInfo::kvCacheNotice)
    bool onGpu = false;  // the hybrid GPU path runs it
    int gpuDevice = -1;  // which GPU (nvidia-smi's number; a pipeline's first), tandem::ModelInfo::gpuDevice
    int gpuSessions = 1;  // reserved on the GPU (tandem::ModelInfo): with more than one, the server decodes that many less one together
    QString gpuSessionsNotice;  // fewer reserved than asked for, and why (tandem::ModelInfo::gpuSessionsNotice)
    int threads = 0;
    quint64 weightBytes = 0;
    tandem::SamplingOptions recommendedSampling;
    QString textHandling;  // which tokenizer and template are in use
    // A packed store's verification record at load (tandem/store_check.h): Unverified means it should
    // be read in full, which the model controller does in the background.
    tandem::StoreState store = tandem::StoreState::NotAStore;
    QString storeNotice;
    QString placement;  // where the routed experts run (tandem::ModelInfo::placement)
    QString expertLayers;  // the same per layer (tandem::ModelInfo::expertLayers)
    // The GPU path as a pipeline over several GPUs: each GPU's share, one line per GPU
    // (tandem::ModelInfo::gpuStages); empty with one GPU or on the CPU.
    QStringList gpuStages;
    // On the CPU only: what a decode step reads and the speed that allows at this computer's memory speed
    // (empty on the GPU, or when the speed could not be measured).
    QString cpuExpectation;
    // A model on a server (LoadRequest::remote): the address and model id it answers with; the engine's
    // figures above are absent (0), contextLength is what the server's /v1/models says, if it does.
    bool remote = false;
    QString remoteUrl;    // the API's base, ".../v1"
    QString remoteModel;  // the server's model id
};

struct GenerationRequest {
    quint64 id = 0;
    QList<PromptMessage> messages;
    tandem::GenerateOptions options;
    QStringList stopStrings;  // the answer ends before the first of these, which is not part of it
    // The context policy: more than 0 leaves out the oldest turns after the system prompt until the
    // prompt takes at most this many tokens (ui/text/prompt_fit.h); 0 sends the whole conversation.
    int promptBudget = 0;
    // A model on a server and the app's sampling is "the model's recommendation": temperature, top_p and
    // the rest are left to the server (which applies the model's own defaults); max_tokens, seed and the
    // stop strings are sent all the same.
    bool samplingFromServer = false;
};

// Where one layer's time went during the last answer, as fractions of that layer's time.
struct LayerSplit {
    double gpuAttention = 0;
    double cpuExperts = 0;
    double waiting = 0;
};

struct AnswerStats {
    int promptTokens = 0;
    int reusedTokens = 0;
    int generatedTokens = 0;
    double timeToFirstTokenSeconds = 0;
    double decodeTokensPerSecond = 0;
    double prefillTokensPerSecond = 0;
    int contextLength = 0;
    bool stoppedAtEos = false;
    bool stoppedByUser = false;
    bool stoppedByStopString = false;
    bool filledContext = false;  // ended because the context had no room for more tokens
    int omittedMessages = 0;     // earlier messages the context policy left out of the prompt
    QString gpuFailure;          // the GPU failed during this answer and the engine went on on the CPU: its notice
    QList<LayerSplit> layerSplit;  // empty while the engine does not report it
    // Whether promptTokens was counted: a server that sends no usage leaves it unknown (0).
    bool promptCounted = true;

    int contextUsed() const { return promptTokens + generatedTokens; }
};

// Measured while an answer streams; absent values are ones the engine does not report yet.
struct LiveEngineStats {
    double decodeTokensPerSecond = 0;
    int generatedTokens = 0;
    std::optional<double> expertPoolBusy;  // 0..1
    std::optional<double> gpuBusy;        // 0..1
};

}  // namespace tandem::ui

Q_DECLARE_METATYPE(tandem::ui::LoadRequest)
Q_DECLARE_METATYPE(tandem::ui::ModelSummary)
Q_DECLARE_METATYPE(tandem::ui::GenerationRequest)
Q_DECLARE_METATYPE(tandem::ui::AnswerStats)
Q_DECLARE_METATYPE(tandem::ui::LiveEngineStats)
