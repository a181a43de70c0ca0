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
            info.defaultSampling.minP = config.generation.minP;
        }
        info.defaultSampling.repetitionPenalty = config.generation.repetitionPenalty;
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
    std::vector<int> context;  // the tokens whose keys and values are in the cache
    std::vector<float> logits;
    int deferredExperts = 0;
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

int Session::position() const { return static_cast<int>(impl_->context.size()); }
const std::vector<int>& Session::context() const { return impl_->context; }
void Session::reset() { impl_->context.clear(); }

void Session::setDeferredExperts(int count) {
    impl_->deferredExperts = std::clamp(count, 0, std::max(0, impl_->engine.info.expertsPerToken - 1));
}
int Session::deferredExperts() const { return impl_->deferredExperts; }

const std::vector<float>& Session::append(std::span<const int> tokens, Logits which) {
    impl_->engine.transformer.forward(tokens, position(), impl_->cache,
                                      which == Logits::All ? model::LogitsFor::AllTokens : model::LogitsFor::LastToken,
                                      impl_->logits);
    impl_->context.insert(impl_->context.end(), tokens.begin(), tokens.end());
    return impl_->logits;
}

GenerationStats Session::generate(std::span<const int> conversation, const GenerateOptions& options,
                                  const std::function<bool(int)>& onToken) {
    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    if (conversation.empty()) throw Error("nothing to generate from: the prompt is empty");
    const auto& eos = impl_->engine.info.eosTokenIds;
    runtime::Sampler sampler(options.sampling);
    GenerationStats stats;
    stats.promptTokens = static_cast<int>(conversation.size());

    // Keep the cached prefix the conversation shares; at least its last token is run again, since its
    // logits are needed to sample. Cache rows past the prefix are simply overwritten.
    auto& context = impl_->context;
    const auto shared = std::mismatch(context.begin(), context.end(), conversation.begin(), conversation.end());
    const std::size_t reuse = std::min<std::size_t>(static_cast<std::size_t>(shared.first - context.begin()),
                                                    conversation.size() - 1);
    context.resize(reuse);
    stats.reusedTokens = static_cast<int>(reuse);
    stats.prefilledTokens = static_cast<int>(conversation.size() - reuse);

    const auto t0 = Clock::now();
    const std::vector<float>* logits = &append(conversation.subspan(reuse));
    const auto t1 = Clock::now();
    stats.prefillSeconds = seconds(t0, t1);

    for (int i = 0; i < options.maxNewTokens; ++i) {
        const int token = sampler.pick(*logits, context);
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
