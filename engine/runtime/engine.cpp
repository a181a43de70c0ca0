#include <algorithm>
#include <chrono>

#include "cpu/thread_pool.h"
#include "io/checkpoint.h"
#include "model/config.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"
#include "tandem/engine.h"

namespace tandem {

struct Engine::Impl {
    Impl(const std::filesystem::path& dir, const EngineOptions& options)
        : config(model::loadModelConfig(dir)), checkpoint(dir), weights(model::loadWeights(checkpoint, config)),
          pool(options.threads), transformer(config, weights, pool) {
        info.modelType = config.modelType;
        info.vocabSize = config.vocabSize;
        info.hiddenSize = config.hiddenSize;
        info.numLayers = config.numLayers;
        info.numExperts = config.numExperts;
        info.expertsPerToken = config.numExperts ? config.router.topK : 0;
        info.contextLength = std::max(1, std::min(options.contextLength, config.maxPositionEmbeddings));
        info.eosTokenIds = config.eosTokenIds;
        if (config.generation.doSample) {
            info.defaultSampling.temperature = config.generation.temperature;
            info.defaultSampling.topP = config.generation.topP;
            info.defaultSampling.topK = config.generation.topK;
        }
        info.weightBytes = checkpoint.totalBytes();
    }

    model::ModelConfig config;
    io::Checkpoint checkpoint;
    model::ModelWeights weights;
    cpu::ThreadPool pool;
    model::Transformer transformer;
    ModelInfo info;
};

struct Session::Impl {
    explicit Impl(Engine::Impl& e) : engine(e), cache(e.transformer.makeCache(e.info.contextLength)) {}

    Engine::Impl& engine;
    runtime::KvCache cache;
    int position = 0;
    std::vector<float> logits;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::load(const std::filesystem::path& modelDir, const EngineOptions& options) {
    return std::unique_ptr<Engine>(new Engine(std::make_unique<Impl>(modelDir, options)));
}

const ModelInfo& Engine::info() const { return impl_->info; }
int Engine::threads() const { return impl_->pool.size(); }

std::unique_ptr<Session> Engine::newSession() {
    return std::unique_ptr<Session>(new Session(std::make_unique<Session::Impl>(*impl_)));
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

int Session::position() const { return impl_->position; }
void Session::reset() { impl_->position = 0; }

const std::vector<float>& Session::append(std::span<const int> tokens, Logits which) {
    impl_->engine.transformer.forward(tokens, impl_->position, impl_->cache,
                                      which == Logits::All ? model::LogitsFor::AllTokens : model::LogitsFor::LastToken,
                                      impl_->logits);
    impl_->position += static_cast<int>(tokens.size());
    return impl_->logits;
}

GenerationStats Session::generate(std::span<const int> prompt, const GenerateOptions& options,
                                  const std::function<bool(int)>& onToken) {
    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    const auto& eos = impl_->engine.info.eosTokenIds;
    runtime::Sampler sampler(options.sampling);
    GenerationStats stats;
    stats.promptTokens = static_cast<int>(prompt.size());

    const auto t0 = Clock::now();
    const std::vector<float>* logits = &append(prompt);
    const auto t1 = Clock::now();
    stats.prefillSeconds = seconds(t0, t1);

    for (int i = 0; i < options.maxNewTokens; ++i) {
        const int token = sampler.pick(*logits);
        ++stats.generatedTokens;
        if (options.stopAtEos && std::find(eos.begin(), eos.end(), token) != eos.end()) {
            stats.stoppedAtEos = true;
            break;
        }
        if (!onToken(token) || i + 1 == options.maxNewTokens) break;
        logits = &append(std::span<const int>(&token, 1));
    }
    stats.decodeSeconds = seconds(t1, Clock::now());
    return stats;
}

}  // namespace tandem
