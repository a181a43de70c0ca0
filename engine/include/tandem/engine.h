#pragma once
// The engine's public API, used by tandem-cli and the desktop app. Plain C++; no Qt, no CUDA.
//
//   auto engine = tandem::Engine::load("/models/Qwen3-30B-A3B");
//   auto session = engine->newSession();
//   session->generate(promptIds, options, [](int token) { ...; return true; });
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tandem/error.h"

namespace tandem {

struct EngineOptions {
    int threads = 0;             // CPU threads; 0 = all hardware threads
    int contextLength = 4096;    // tokens a session can hold; capped by the model's own limit
};

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
};

struct ModelInfo {
    std::string modelType;       // config.json model_type
    int vocabSize = 0;
    int hiddenSize = 0;
    int numLayers = 0;
    int numExperts = 0;
    int expertsPerToken = 0;
    int contextLength = 0;       // what a session can hold
    std::vector<int> eosTokenIds;
    SamplingOptions defaultSampling;  // from generation_config.json
    std::uint64_t weightBytes = 0;
};

struct GenerationStats {
    int promptTokens = 0;
    int reusedTokens = 0;        // prompt tokens whose keys and values were already cached
    int prefilledTokens = 0;     // prompt tokens actually run
    int generatedTokens = 0;
    double prefillSeconds = 0.0;
    double decodeSeconds = 0.0;
    bool stoppedAtEos = false;

    double prefillTokensPerSecond() const { return prefillSeconds > 0 ? prefilledTokens / prefillSeconds : 0.0; }
    // Decode speed counts the tokens produced by decode steps, i.e. all but the first.
    double decodeTokensPerSecond() const {
        return decodeSeconds > 0 && generatedTokens > 1 ? (generatedTokens - 1) / decodeSeconds : 0.0;
    }
};

enum class Logits { Last, All };

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

    // Runs `tokens` after the current context and returns the logits: [vocab] for the last token, or
    // [tokens.size(), vocab] with Logits::All. The reference stays valid until the next call.
    const std::vector<float>& append(std::span<const int> tokens, Logits which = Logits::Last);

    // `conversation` is the whole conversation so far as tokens (e.g. the rendered chat). The session
    // keeps the cached part it shares with the conversation, prefills only the rest, then samples up to
    // maxNewTokens tokens, calling onToken for each; onToken returns false to stop. The last sampled
    // token is not yet in the context.
    GenerationStats generate(std::span<const int> conversation, const GenerateOptions& options,
                             const std::function<bool(int token)>& onToken);

    // Expert Deferral (DESIGN.md): how many of each token's k routed experts run deferred, clamped to
    // 0..k-1. Safe to call from onToken, so a change applies from the next token on. The CPU path runs
    // every expert immediately (exact) whatever the value; the hybrid scheduler will read it per step.
    void setDeferredExperts(int count);
    int deferredExperts() const;

private:
    friend class Engine;
    struct Impl;
    explicit Session(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

class Engine {
public:
    // Loads a Hugging Face model folder. Throws tandem::Error with a message for the user.
    static std::unique_ptr<Engine> load(const std::filesystem::path& modelDir, const EngineOptions& options = {});
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const ModelInfo& info() const;
    int threads() const;
    std::unique_ptr<Session> newSession();

private:
    friend class Session;
    struct Impl;
    explicit Engine(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
