#pragma once
// The engine's public API, used by tandem-cli and the desktop app. Plain C++; no Qt, no CUDA.
//
//   auto engine = tandem::Engine::load("/models/Qwen3-30B-A3B");
//   auto session = engine->newSession();
//   session->generate(promptIds, options, [](int token) { ...; return true; });
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tandem/error.h"

namespace tandem {

enum class Device {
    Auto,  // the GPU when one is usable, else the CPU (with a notice in ModelInfo)
    Cpu,   // everything on the CPU
    Gpu,   // the hybrid GPU path; loading fails when no GPU is usable
};

// How the routed experts are stored for the CPU. A packed store decides for itself; a Hugging Face
// folder is packed at load into the chosen type.
enum class ExpertPrecision {
    Auto,       // a store's own type; for a Hugging Face folder BF16, or Reference when the checkpoint is
                // FP8 (which bf16 cannot hold exactly) or packing would not fit in free memory
    BF16,       // the checkpoint's bf16 values (FP8 checkpoints: dequantized, rounded to bf16)
    INT8,       // symmetric per output channel
    INT4,       // symmetric, groups of 32 inputs (4.5 bits per weight)
    Reference,  // the checkpoint's matrices as they are, float32 arithmetic: exact but slow
    MXFP4,      // OCP microscaling FP4 (gpt-oss's release format, kept exactly; others rounded to nearest)
};

// How the dense weights are held, on the CPU path and the GPU: attention's projections, dense and shared
// MLPs, the output head (not the embedding, routers or routed experts).
enum class DensePrecision {
    Checkpoint,  // as the checkpoint or store has them (bf16 mostly)
    Int8,        // int8 with a scale per row, quantized at load: half of bf16's bytes per decode step, with
                 // an error of ~0.5% of each row's largest weight (not yet the default: issue 25)
    Int4,        // CPU path only: int4 in groups of 32 inputs (fp16 scales), packed at load for the expert
                 // kernels: a quarter of bf16's bytes, less exact; with a GPU the weights stay as they are
};

// How a session's KV cache holds the keys and values (issue 28).
enum class KvCacheType {
    Float32,  // exact (the default)
    Int8,     // each position's row quantized per head (MLA: the latent row and the rope row) to int8 with a
              // float scale (absmax / 127, rounded to nearest): a quarter of float32's bytes plus 4 bytes a
              // head, so about 3.9x the context in the same memory. Both paths, the same codes (the GPU's
              // since 2026-12-04; its runner keeps one layer's rows as float32 beside them).
};

struct EngineOptions {
    int threads = 0;             // CPU threads; 0 = one per physical core
    int contextLength = 4096;    // tokens a session can hold; capped by the model's own limit
    Device device = Device::Auto;
    ExpertPrecision experts = ExpertPrecision::Auto;
    // GPU memory for routed experts (whole MoE layers, the last first): < 0 what is free once the rest of
    // the model and the context are counted; 0 none (every routed expert on the CPU); > 0 that many bytes.
    std::int64_t gpuExpertMemory = -1;
    // The dense weights, on both paths (an FP8 checkpoint's stay FP8 on the GPU).
    DensePrecision dense = DensePrecision::Checkpoint;
    KvCacheType kvCache = KvCacheType::Float32;
    // Sessions that hold a GPU KV cache at once (tandem-cli serve --batch, its kept conversations): the GPU
    // plan reserves each one's KV cache and buffers at contextLength before it gives the routed experts
    // what is left. The CPU path ignores it.
    int gpuSessions = 1;
    // The GPUs to run on, by number as nvidia-smi gives them (Settings' GPU, tandem-cli --gpus): one runs the
    // model on that GPU; several run it as a pipeline by layer over them, in this order (issue 29; not yet
    // run on a machine with two GPUs); {kEveryGpu}: every GPU of the machine, in order (one GPU: that one).
    // Empty: TANDEM_GPU_DEVICES when set, else the GPU with the most memory (the first of equals, so GPU 0
    // of like GPUs; another's name says its number). A GPU this machine lacks leaves the model on the CPU
    // with Device::Auto (ModelInfo::deviceNotice says why) and is an error with Device::Gpu.
    std::vector<int> gpuDevices;
};

// EngineOptions::gpuDevices' {kEveryGpu}: every GPU the machine has.
inline constexpr int kEveryGpu = -1;

// GPU numbers as nvidia-smi (and NVML, which the app's GPU list and monitor read) give them, by PCI bus,
// instead of CUDA's default of the fastest first, for EngineOptions::gpuDevices: sets CUDA_DEVICE_ORDER to
// PCI_BUS_ID unless the user set it. Call at the start of main, before any thread (setenv) and before
// CUDA starts (it reads the variable once).
void numberGpusAsNvidiaSmi();

// "1" or "0,1": distinct GPU numbers (0-63) separated by commas, or "all" ({kEveryGpu}), as --gpus and
// TANDEM_GPU_DEVICES take them; throws tandem::Error naming `source` otherwise.
std::vector<int> parseGpuDevices(const std::string& text, const std::string& source);

struct SamplingOptions {
    float temperature = 0.0f;       // 0 = greedy
    float topP = 1.0f;
    int topK = 0;                   // 0 = no limit
    float minP = 0.0f;              // drop tokens below minP x the most likely token's probability
    float repetitionPenalty = 1.0f; // transformers-style: divide positive logits, multiply negative ones
    float presencePenalty = 0.0f;   // subtracted once from every token already in the context
    float frequencyPenalty = 0.0f;  // subtracted per occurrence in the context
    int penaltyWindow = 0;          // penalties look at the last N tokens of the context; 0 = all
    std::uint64_t seed = 0;
};

struct GenerateOptions {
    int maxNewTokens = 256;
    SamplingOptions sampling;
    bool stopAtEos = true;
    std::vector<int> stopTokenIds;  // end generation like the model's EOS ids (e.g. a chat's end token)
    // > 0: ids from this one on are never chosen. Models often have more output rows than their
    // tokenizer has tokens (padding); a chat never wants one of those.
    int vocabularyLimit = 0;
};

// A packed store's verification (tandem/store_check.h): it was read in full once and that record still
// matches the files (Verified), or it has not been / no longer matches (Unverified: it loads, and the
// caller verifies it, in the background if it likes). A store known to be damaged does not load.
enum class StoreState { NotAStore, Verified, Unverified, Damaged };

struct ModelInfo {
    std::string modelType;       // config.json model_type
    int vocabSize = 0;
    int hiddenSize = 0;
    int numLayers = 0;
    int numExperts = 0;
    int expertsPerToken = 0;
    int contextLength = 0;       // what a session can hold
    int maxContextLength = 0;    // the most the model was made for (max_position_embeddings)
    // One session's KV cache per position of context, every layer, as the sessions hold it (kvCache): at
    // contextLength it is what each conversation may take.
    std::uint64_t kvBytesPerPosition = 0;
    // The same for each choice of EngineOptions::kvCache (Settings shows both): float32, and int8 with its
    // scales.
    std::uint64_t kvBytesPerPositionFloat32 = 0;
    std::uint64_t kvBytesPerPositionInt8 = 0;
    std::string kvCache;         // how the sessions hold it: "float32" or "int8"
    std::string kvCacheNotice;   // why it is not as EngineOptions::kvCache asked (the GPU cannot hold this model's int8)
    std::vector<int> eosTokenIds;
    SamplingOptions defaultSampling;  // from generation_config.json
    std::uint64_t weightBytes = 0;
    std::string device;          // "CPU" or the GPU's name
    std::string deviceNotice;    // why the CPU runs what the GPU would have, if so
    std::string experts;         // how the routed experts run: "bf16", "int4", "reference", ...
    std::string expertsNotice;   // why Auto chose the slow reference path, and what to do about it
    std::string placement;       // where the routed experts run: "all routed experts on the CPU", "48 of 48 MoE
                                 // layers wholly on the GPU (16.3 GB)"; empty for a model without experts
    // The GPU path as a pipeline by layer (issue 29): each GPU's share, one line per GPU ("GPU 0 (NVIDIA
    // H200): layers 0-23, 9.10 GB dense + KV, 30.20 GB for experts"); empty with one stage.
    std::vector<std::string> gpuStages;
    // The GPU the model runs on, numbered as nvidia-smi numbers them (a pipeline's first); -1 on the CPU. With
    // no GPU chosen the engine picks the one with the most memory, so this is where to look for its load.
    int gpuDevice = -1;
    // Sessions the GPU plan reserved (EngineOptions::gpuSessions; 0 on the CPU path), and why fewer than
    // asked for, if so (they did not fit beside the model: the GPU then holds one).
    int gpuSessions = 0;
    std::string gpuSessionsNotice;
    // The same per layer, one character each: 'G' routed experts on the GPU, 'P' split (the most used on
    // the GPU, the rest on the CPU), 'S' on the CPU and streamed through the GPU for long prompts, 'C' on
    // the CPU, '-' a layer without routed experts; empty for a model without experts.
    std::string expertLayers;
    std::uint64_t routedBytesPerToken = 0;  // expert bytes a decode step reads from RAM (packed experts)
    // On the CPU path: the bytes a decode step reads, the dense weights as held (int8 or the checkpoint's
    // form; the embedding's one row left out) and routedBytesPerToken; 0 on the GPU path.
    std::uint64_t cpuBytesPerToken = 0;
    std::string cpuKernels;      // the instruction set of the expert kernels: "avx512", "amx", ...
    std::string dense;           // how the CPU path holds the dense weights: "checkpoint" or "int8"
    StoreState store = StoreState::NotAStore;  // NotAStore for a Hugging Face folder
    std::string storeNotice;     // Verified: when; Unverified: why (tandem::verifyStore reads it in full)
};

// Where the time of a decode step goes, per MoE layer, averaged over a generation's decode steps.
// On the GPU path a MoE layer's wall time is gpuMs + overlapMs + waitMs: the GPU alone (attention,
// router) until it hands the routed experts to the CPU, the GPU's shared experts while the CPU computes,
// then the GPU waiting for the CPU to finish. On the CPU path only cpuExpertsMs is measured.
struct LayerTiming {
    int layer = 0;
    double gpuMs = 0.0;         // GPU work since the previous MoE layer, up to the hand-over
    double overlapMs = 0.0;     // GPU and CPU both working
    double waitMs = 0.0;        // the GPU blocked, waiting for the CPU
    double cpuExpertsMs = 0.0;  // the CPU pool computing this layer's routed experts
};

struct DecodeProfile {
    long steps = 0;
    long graphLaunches = 0;          // one per decode step on the GPU path
    double stepMs = 0.0;             // mean wall time of a step
    double gpuBusyFraction = 0.0;    // of decode wall time (0 on the CPU path)
    double betweenStepsMs = 0.0;     // GPU idle between steps: the host reading logits, sampling, launching
    double expertPoolBusyFraction = 0.0;
    std::vector<LayerTiming> layers;
    // Batched steps on the GPU path (several sequences' steps together), per step, summed over the MoE
    // layers whose experts the CPU computes, from the GPU's clocks (0 elsewhere):
    long batchedSteps = 0;
    double batchSpreadMs = 0.0;  // the last member's hand-over after the first's (members arriving apart)
    double batchRoundMs = 0.0;   // the last hand-over to the first member getting its rows back (the CPU's turn)
    double batchGpuMs = 0.0;     // a member's GPU work between getting its rows and its next hand-over (mean)
};

struct GenerationStats {
    int promptTokens = 0;
    int reusedTokens = 0;        // prompt tokens whose keys and values were already cached
    int prefilledTokens = 0;     // prompt tokens actually run
    int generatedTokens = 0;
    double prefillSeconds = 0.0;
    double decodeSeconds = 0.0;
    bool stoppedAtEos = false;
    bool fellBackToCpu = false;  // the GPU failed during this generation; it went on on the CPU
    double timeToFirstTokenSeconds = 0.0;
    DecodeProfile decode;

    double prefillTokensPerSecond() const { return prefillSeconds > 0 ? prefilledTokens / prefillSeconds : 0.0; }
    // Decode speed counts the tokens produced by decode steps, i.e. all but the first.
    double decodeTokensPerSecond() const {
        return decodeSeconds > 0 && generatedTokens > 1 ? (generatedTokens - 1) / decodeSeconds : 0.0;
    }
};

enum class Logits { Last, All };

// Sees the router's choice scores of every MoE layer of a forward pass (tandem-cli eval --router-out):
// `tokens` rows of `experts` scores per layer, in layer order. The CPU path only: the GPU routes on the GPU.
using RoutingObserver = std::function<void(int layer, std::size_t tokens, int experts, const float* scores)>;

class Engine;

// One conversation: a KV cache and the position in it.
class Session {
public:
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Tokens whose keys and values are in the cache.
    int position() const;
    const std::vector<int>& context() const;
    void reset();

    // Expert Deferral from the next token on: of each token's k routed experts, the `deferred`
    // lowest-weighted ones overlap the next layer instead of being waited for (0 = exact; clamped to
    // 0..k-1, so one expert always stays immediate). With `skip` they are dropped instead, for
    // comparison. Safe to call while generating on another thread, or from onToken.
    void setDeferral(int deferred, bool skip = false);
    int deferral() const;
    // Whether deferral also applies to prompt chunks (several tokens at once). Off by default: Expert
    // Deferral is a decode technique, and with it off a prompt's logits and KV cache do not depend on
    // the deferral setting. On, a teacher-forced prompt computes every row as decode with deferral would.
    void setPrefillDeferral(bool on);
    bool prefillDeferral() const;

    // Runs `tokens` after the current context and returns the logits: [vocab] for the last token, or
    // [tokens.size(), vocab] with Logits::All. The reference stays valid until the next call.
    const std::vector<float>& append(std::span<const int> tokens, Logits which = Logits::Last);

    // `conversation` is the whole conversation so far as tokens (e.g. the rendered chat). The session
    // keeps the cached part it shares with the conversation, prefills only the rest, then samples up to
    // maxNewTokens tokens, calling onToken for each; onToken returns false to stop. The last sampled
    // token is not yet in the context.
    GenerationStats generate(std::span<const int> conversation, const GenerateOptions& options,
                             const std::function<bool(int token)>& onToken);

    // The profile of the single-token forward passes since the last call (append() or generate()).
    DecodeProfile takeDecodeProfile();

    // Every forward pass from now on reports its routing to `observer` (empty: none). Not while a pass runs.
    void setRoutingObserver(RoutingObserver observer);

    // One decode step of several sessions of one engine together (issue 27): session i runs tokens[i]
    // after its context, as sessions[i]->append({tokens[i]}) would, and the result's row i is its logits
    // [vocab] (valid until that session's next call). On the CPU path the step is one forward pass of
    // sessions.size() tokens whose routed experts run as one call, so an expert that several sequences
    // chose is read from memory once for all of them; the GPU path runs them one after another for now.
    // Each row equals the session's own append() within float rounding. Sessions with different
    // deferral settings (or one moved to the CPU by a GPU failure) run in separate batches. All or
    // nothing: when it throws, no session's context has changed. Throws tandem::Error for sessions of
    // different engines, a session given twice, or a token a session could not append.
    static std::vector<std::span<const float>> decodeTogether(std::span<Session* const> sessions, std::span<const int> tokens);

private:
    friend class Engine;
    friend class Generation;
    struct Impl;
    explicit Session(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Session::generate a token at a time, so that generations in several sessions of one engine decode
// together (decodeTogether): a server's clients (issue 27). Session::generate is
//
//   Generation g(session, conversation, options);   // keeps the cached prefix, prefills the rest
//   while (const auto token = g.next()) {            // samples; nothing once an end token came
//       if (!onToken(*token) || g.full()) break;
//       Generation* one = &g;
//       Generation::decodeTogether({&one, 1});       // runs the token: the logits next() samples from
//   }
//   return g.finish();
//
// The session must outlive the generation, and run nothing else meanwhile.
//
// A server that must not hold its running generations up for a long prompt constructs one with
// Prefill::InChunks and runs the prompt a piece at a time between their decode steps:
//
//   Generation g(session, conversation, options, Generation::Prefill::InChunks);
//   while (!g.prefill(512)) { /* a decode step of the others */ }
//   ... as above
class Generation {
public:
    enum class Prefill {
        Now,       // the constructor prefills the whole prompt
        InChunks,  // prefill() runs it, as many tokens at a time as it is given
    };
    // Keeps the cached prefix the session shares with `conversation` and prefills the rest (at least its
    // last token, whose logits the first token is sampled from), now or with prefill().
    Generation(Session& session, std::span<const int> conversation, const GenerateOptions& options,
               Prefill when = Prefill::Now);
    ~Generation();
    Generation(const Generation&) = delete;
    Generation& operator=(const Generation&) = delete;

    // Runs up to `maxTokens` more of the prompt after the cached prefix (the rest when maxTokens <= 0) and
    // says whether all of it has run. The cache then holds what one prefill of the whole prompt would,
    // within float rounding: every piece is run as a prompt (Expert Deferral only with prefillDeferral).
    // A generation given up half-way leaves its session's context at the prompt's tokens run so far.
    bool prefill(int maxTokens);
    // Prompt tokens still to run before next() may sample (0 once prefilled).
    int prefillLeft() const;
    // Samples the next token from the last logits: the token, or nothing when it is an end token
    // (options.stopAtEos with an EOS or stop id; stats().stoppedAtEos), which ends the generation.
    // Throws tandem::Error while the prompt is not all prefilled.
    std::optional<int> next();
    // Whether options.maxNewTokens tokens were sampled: the generation has ended (its last token is not run).
    bool full() const;
    // Runs each generation's last sampled token after its context, all in one decode step
    // (Session::decodeTogether), so that next() can sample again. Throws as that does (nothing ran then),
    // or tandem::Error for a generation with no token to run.
    static void decodeTogether(std::span<Generation* const> generations);
    // The figures of the generation, its decode time up to now (call it once it has ended).
    GenerationStats finish();
    Session& session() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

class Engine {
public:
    // Loads a Hugging Face model folder. Throws tandem::Error with a message for the user.
    static std::unique_ptr<Engine> load(const std::filesystem::path& modelDir, const EngineOptions& options = {});
    // Random weights with the exact shapes of a real model, for benchmarks without the checkpoint:
    // "deepseek-v2-lite", "qwen3-30b-a3b", "deepseek-v3-4l" (DeepSeek-V3's dimensions, 1 dense + 3 MoE
    // layers), "tiny". The routed experts are packed straight into options.experts (not Reference).
    static std::unique_ptr<Engine> synthetic(const std::string& shape, const EngineOptions& options = {},
                                             std::uint64_t seed = 1);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const ModelInfo& info() const;
    int threads() const;
    // GB/s the engine's CPU threads read from memory (a streaming read of a buffer larger than the
    // caches, best of a few passes). With info().routedBytesPerToken it gives the decode ceiling.
    double measureMemoryBandwidth();
    std::unique_ptr<Session> newSession();

private:
    friend class Session;
    struct Impl;
    explicit Engine(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
