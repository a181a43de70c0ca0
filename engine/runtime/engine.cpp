#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <optional>
#include <span>

#include "cpu/cpu_features.h"
#include "cpu/pool/cpu_topology.h"
#include "io/dtype.h"
#include "io/expert_layout.h"
#include "cpu/pool/memory_bandwidth.h"
#include "cpu/pool/thread_pool.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/packed_store.h"
#include "model/config.h"
#include "model/synthetic.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "convert/expert_precision.h"
#include "runtime/gpu_backend.h"
#include "runtime/model_runner.h"
#include "runtime/packed_experts.h"
#include "runtime/sampler.h"
#include "tandem/engine.h"

namespace tandem {

namespace runtime {
namespace {
GpuBackendFactory& gpuBackendForTests() {
    static GpuBackendFactory factory;
    return factory;
}
}  // namespace

void setGpuBackendFactoryForTests(GpuBackendFactory factory) { gpuBackendForTests() = std::move(factory); }
}  // namespace runtime

using runtime::gpuBackendForTests;
using convert::packedType;

namespace {

// A packed store, refused when its verification record says it is damaged (and its files have not
// changed since). An unverified one loads: reading it in full is the caller's to start.
std::unique_ptr<io::PackedStore> openStore(const std::filesystem::path& dir) {
    if (!io::PackedStore::isStore(dir)) return nullptr;
    auto store = std::make_unique<io::PackedStore>(dir);
    if (store->verification().state == io::VerificationState::Damaged) throw Error(store->verification().message);
    return store;
}

// Whether every value is finite. Run on every step's logits (152k of them for Qwen3), so written to
// vectorize: a float is NaN or infinite when its exponent bits are all set; 16 lanes OR their findings
// with no early exit (a third of std::all_of over std::isfinite's time, ~25 us a step less).
bool allFinite(std::span<const float> values) {
    constexpr std::uint32_t kExponent = 0x7f800000u;
    std::uint32_t lanes[16] = {};
    std::size_t i = 0;
    for (; i + 16 <= values.size(); i += 16)
        for (std::size_t j = 0; j < 16; ++j) lanes[j] |= (std::bit_cast<std::uint32_t>(values[i + j]) & kExponent) == kExponent;
    std::uint32_t bad = 0;
    for (const std::uint32_t lane : lanes) bad |= lane;
    for (; i < values.size(); ++i) bad |= !std::isfinite(values[i]);
    return bad == 0;
}

// The bytes a CPU decode step reads from the dense weights as they are held: attention, dense and
// shared MLPs, routers and the output head (the embedding is one row a token).
std::uint64_t denseBytesPerToken(const model::ModelWeights& w) {
    const auto bytes = [](const cpu::WeightMatrix& m) {
        if (m.packed) return static_cast<std::uint64_t>(m.packed->bytes());
        return m.data ? static_cast<std::uint64_t>(m.rows) * io::dtypeRowBytes(m.dtype, m.cols) : std::uint64_t{0};
    };
    const auto mlp = [&](const model::MlpWeights& m) { return bytes(m.gate) + bytes(m.up) + bytes(m.down); };
    std::uint64_t n = bytes(w.lmHead);
    for (const model::LayerWeights& l : w.layers) {
        n += bytes(l.gqa.q) + bytes(l.gqa.k) + bytes(l.gqa.v) + bytes(l.gqa.o);
        if (l.mla.qA) n += bytes(*l.mla.qA);
        n += bytes(l.mla.q) + bytes(l.mla.kvA) + bytes(l.mla.kvB) + bytes(l.mla.o);
        if (l.dense) n += mlp(*l.dense);
        if (l.moe) {
            n += bytes(l.moe->router);
            if (l.moe->shared) n += mlp(*l.moe->shared);
        }
    }
    return n;
}

// The CPU path's routed experts, counting each routing slot they compute (runtime::UsageCounter); the
// GPU path counts in its expert bridge.
class CountingExperts : public model::RoutedExperts {
public:
    CountingExperts(model::RoutedExperts& inner, runtime::UsageCounter& counter) : inner_(inner), counter_(counter) {}
    void run(int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK, int firstSlot,
             int lastSlot, float* out) override {
        if (firstSlot == 0 && lastSlot == topK)
            counter_.add(layer, ids, tokens * static_cast<std::size_t>(topK));
        else
            for (std::size_t t = 0; t < tokens; ++t)
                counter_.add(layer, ids + t * static_cast<std::size_t>(topK) + firstSlot, static_cast<std::size_t>(lastSlot - firstSlot));
        inner_.run(layer, x, tokens, ids, weights, topK, firstSlot, lastSlot, out);
    }

private:
    model::RoutedExperts& inner_;
    runtime::UsageCounter& counter_;
};

}  // namespace

struct Engine::Impl {
    // A Hugging Face model folder, or a packed store (tandem-cli convert): its model.safetensors holds
    // the dense tensors in their checkpoint form, its expert files the routed experts packed.
    Impl(const std::filesystem::path& dir, const EngineOptions& options)
        : config(model::loadModelConfig(dir)),
          store(openStore(dir)),
          checkpoint(std::in_place, dir), pool(options.threads),
          weights(model::loadWeights(*checkpoint, config, store == nullptr)) {
        info.weightBytes = checkpoint->totalBytes();
        if (store) {
            const bool verified = store->verification().state == io::VerificationState::Verified;
            info.store = verified ? StoreState::Verified : StoreState::Unverified;
            info.storeNotice = store->verification().message;
        }
        finish(options);
    }

    // Random weights with the exact shapes of a real model (benchmarks).
    Impl(const std::string& shape, const EngineOptions& options, std::uint64_t seed)
        : config(model::syntheticConfig(shape)), pool(options.threads),
          synthetic(std::make_unique<model::SyntheticWeights>(config, seed, pool)), weights(synthetic->weights()),
          syntheticSeed(seed) {
        info.weightBytes = synthetic->bytes();
        finish(options);
    }

    void finish(const EngineOptions& options) {
        kvCache = options.kvCache;
        info.modelType = config.modelType;
        info.vocabSize = config.vocabSize;
        info.hiddenSize = config.hiddenSize;
        info.numLayers = config.numLayers;
        info.numExperts = config.numExperts;
        info.expertsPerToken = config.numExperts ? config.router.topK : 0;
        info.contextLength = std::max(1, std::min(options.contextLength, config.maxPositionEmbeddings));
        info.maxContextLength = config.maxPositionEmbeddings;
        info.kvBytesPerPositionFloat32 = kvBytesPerPosition(KvCacheType::Float32);
        info.kvBytesPerPositionInt8 = kvBytesPerPosition(KvCacheType::Int8);
        info.eosTokenIds = config.eosTokenIds;
        if (config.generation.doSample) {
            info.defaultSampling.temperature = config.generation.temperature;
            info.defaultSampling.topP = config.generation.topP;
            info.defaultSampling.topK = config.generation.topK;
            info.defaultSampling.minP = config.generation.minP;
        }
        info.defaultSampling.repetitionPenalty = config.generation.repetitionPenalty;
        info.cpuKernels = std::string(cpu::isaName(cpu::selectedIsa()));
        experts = makeExperts(options.experts);
        if (packed) info.weightBytes += packed->ownedBytes();
        if (config.numExperts > 0) {
            // How often each expert is chosen: counted on both paths, kept beside a store (placement.h).
            usage.emplace(store ? runtime::ExpertUsage::load(store->dir(), config) : runtime::ExpertUsage::empty(config));
            countingExperts = std::make_unique<CountingExperts>(*experts, *usage);
        }
        transformer = std::make_unique<model::Transformer>(config, weights, countingExperts ? *countingExperts : *experts, pool);
        // Int8 dense weights serve both paths: quantized before the GPU's upload, which keeps them int8 (its
        // FP8 stays FP8, already a byte a weight), and the CPU path (and a GPU fallback) reads the same.
        // A store converted with --dense int8 holds them so already.
        info.dense = "checkpoint";
        model::forEachDenseProduct(weights, config, [&](const std::string&, cpu::WeightMatrix& m) {
            if (m.dtype == io::DType::I8) info.dense = "int8 (store)";
        });
        const bool int8Dense = options.dense == DensePrecision::Int8;
        if (int8Dense) model::quantizeDenseInt8(weights, config, pool, /*keepFp8=*/options.device != Device::Cpu);
        // The KV cache's type holds on both paths: the GPU's 8-bit cache has the CPU's groups and rounding.
        chooseDevice(options.device, options.gpuExpertMemory, options.gpuSessions, options.gpuDevices, kvCache);
        info.kvCache = kvCache == KvCacheType::Int8 ? "int8" : "float32";
        info.kvBytesPerPosition = kvBytesPerPosition(kvCache);
        if (int8Dense) {
            if (!gpu) model::quantizeDenseInt8(weights, config, pool, false);  // FP8 too, for the CPU's int8 kernels
            info.dense = "int8";
        }
        // Int4 dense weights are packed for the CPU's expert kernels, which the GPU does not read: with a GPU
        // they stay as they are.
        if (options.dense == DensePrecision::Int4) {
            if (!gpu) {
                model::packDenseInt4(weights, config, pool);
                info.dense = "int4";
            } else {
                info.dense += " (int4 is for the CPU path; the GPU keeps them)";
            }
        }
        if (packed) {  // the layers whose experts stay in system memory
            const double cpuLayers = config.moeLayerCount() - (gpu ? gpu->expertLayersOnGpu() : 0.0);
            info.routedBytesPerToken =
                static_cast<std::uint64_t>(cpuLayers * config.router.topK * static_cast<double>(packed->expertDataBytes()));
        }
        if (!gpu) info.cpuBytesPerToken = denseBytesPerToken(weights) + info.routedBytesPerToken;
    }

    // One session's cache per position (every layer) of `type`, as Transformer::makeCache shapes it.
    std::uint64_t kvBytesPerPosition(KvCacheType type) const {
        if (config.attention == model::AttentionKind::Mla)
            return model::KvCache::bytesPerPosition(config.numLayers, {config.kvLoraRank, config.qkRopeHeadDim},
                                                    {config.kvLoraRank, config.qkRopeHeadDim}, type);
        const int kvDim = config.numKvHeads * config.headDim;
        return model::KvCache::bytesPerPosition(config.numLayers, {kvDim, kvDim}, {config.headDim, config.headDim}, type);
    }

    // The routed experts for the CPU: packed for the expert kernels, or the float32 reference.
    std::unique_ptr<model::RoutedExperts> makeExperts(ExpertPrecision precision) {
        if (store && config.numExperts > 0) return storeExperts(precision);
        if (precision == ExpertPrecision::Auto && !synthetic) precision = autoPrecision();
        if (config.numExperts == 0 || precision == ExpertPrecision::Reference) {
            if (synthetic && config.numExperts > 0)
                throw Error("a synthetic model has no reference experts; choose bf16, int8 or int4");
            info.experts = config.numExperts ? "reference" : "none";
            return model::makeReferenceExperts(weights, pool);
        }
        const io::ExpertType type = packedType(precision).value_or(io::ExpertType::BF16);
        if (synthetic) {
            const std::uint64_t seed = syntheticSeed;
            const int hidden = config.hiddenSize, inter = config.moeIntermediateSize;
            packed = std::make_unique<runtime::PackedExperts>(config, type, pool, [=](int layer, int expert) {
                return model::randomExpertRows(seed, layer, expert, hidden, inter);
            });
        } else {
            packed = std::make_unique<runtime::PackedExperts>(config, weights, type, pool);
        }
        packed->setEpilogues(weights);
        info.experts = std::string(io::expertTypeName(type));
        return packed->newRunner();
    }

    // Packing a Hugging Face folder's experts at load makes an exact bf16 copy in memory (int4 of compressed-tensors
    // int4 experts); the reference path reads the checkpoint in place. Pack when that is exact and fits.
    ExpertPrecision autoPrecision() {
        if (config.numExperts == 0) return ExpertPrecision::Reference;
        const auto& first = *std::find_if(weights.layers.begin(), weights.layers.end(), [](const auto& l) { return l.moe.has_value(); });
        // compressed-tensors int4 experts (Kimi-K2-Thinking) are INT4 already, gpt-oss's MXFP4 ones MXFP4:
        // packed as they are, exactly.
        const bool int4 = first.moe->experts.front().gate.dtype == io::DType::I4;
        const bool mxfp4 = first.moe->experts.front().gate.dtype == io::DType::E2M1;
        if (first.moe->experts.front().gate.dtype == io::DType::F8_E4M3) {
            info.expertsNotice = "the experts are FP8, which bf16 cannot hold exactly; they run on the slower reference "
                                 "path. Convert the model (tandem-cli convert) to int8 or int4 for the fast kernels.";
            return ExpertPrecision::Reference;
        }
        const auto layout = io::ExpertLayout::make(int4 ? io::ExpertType::INT4 : mxfp4 ? io::ExpertType::MXFP4 : io::ExpertType::BF16,
                                                   config.hiddenSize, config.moeIntermediateSize);
        const std::uint64_t packedBytes =
            static_cast<std::uint64_t>(config.moeLayerCount()) * config.numExperts * layout.expertBytes;
        if (packedBytes > cpu::availableMemoryBytes() / 10 * 8) {
            info.expertsNotice = "packing the experts would take " + std::to_string(packedBytes >> 30) +
                                 " GiB, more than the free memory; they run on the slower reference path. Convert the "
                                 "model (tandem-cli convert) for the fast kernels.";
            return ExpertPrecision::Reference;
        }
        return int4 ? ExpertPrecision::INT4 : mxfp4 ? ExpertPrecision::MXFP4 : ExpertPrecision::BF16;
    }

    std::unique_ptr<model::RoutedExperts> storeExperts(ExpertPrecision precision) {
        const io::ExpertType type = store->expertType();
        if (precision != ExpertPrecision::Auto && packedType(precision) != type)
            throw Error(store->dir().string() + " holds " + std::string(io::expertTypeName(type)) +
                        " experts; convert the original model again for another type, or load it with the automatic "
                        "expert setting");
        packed = std::make_unique<runtime::PackedExperts>(config, store->layout(),
                                                          [this](int layer) { return store->layerExperts(layer); }, pool);
        packed->setEpilogues(weights);
        info.experts = std::string(io::expertTypeName(type)) + " (packed store)";
        info.weightBytes += static_cast<std::uint64_t>(store->moeLayers().size()) * store->experts() * store->layout().expertBytes;
        return packed->newRunner();
    }

    runtime::ExpertsFactory expertsFactory() {
        if (packed) return [this] { return packed->newRunner(); };
        return [this] { return model::computeOnSubmit(model::makeReferenceExperts(weights, pool)); };
    }

    void chooseDevice(Device device, std::int64_t gpuExpertMemory, int gpuSessions, const std::vector<int>& gpuDevices,
                      KvCacheType kvCacheType) {
        info.device = "CPU";
        info.placement = config.numExperts ? "all routed experts on the CPU" : "";
        info.expertLayers = runtime::cpuExpertLayerMap(config);
        if (device == Device::Cpu) return;
        std::string reason;
        runtime::GpuExpertsRequest gpuExperts;
        if (packed) {
            gpuExperts.layout = &packed->layout();
            gpuExperts.layerBytes = [this](int layer) { return packed->layerBytes(layer); };
        }
        gpuExperts.budgetBytes = gpuExpertMemory;
        gpuExperts.sessions = std::max(1, gpuSessions);
        gpuExperts.devices = gpuDevices;
        gpuExperts.kvCache = kvCacheType;
        // A model whose MLA rows the GPU's 8-bit writes cannot hold: the GPU keeps float32 (checked below).
        const std::string int8Limit = kvCacheType == KvCacheType::Int8 ? runtime::gpuInt8KvCacheLimit(config) : "";
        if (!int8Limit.empty()) gpuExperts.kvCache = KvCacheType::Float32;
        if (usage) {
            gpuExperts.usage = usage->snapshot();
            gpuExperts.counter = &*usage;
        }
        // gpt-oss (sinks, an o_proj bias, a router bias, experts with biases and the clamped SwiGLU) and
        // GLM-4.5 (biases, partial rotary) run on the GPU like the rest: checked on the H200 against the
        // CPU path and the references (2026-12-04). MXFP4 experts go to the GPU too (gpu_backend.cpp).
        const auto create = [&] {
            return gpuBackendForTests()
                       ? gpuBackendForTests()(config, weights, pool, info.contextLength, expertsFactory(), gpuExperts)
                       : runtime::createGpuBackend(config, weights, pool, info.contextLength, expertsFactory(), gpuExperts, reason);
        };
        try {
            try {
                gpu = create();
            } catch (const Error& e) {
                // Sessions asked for beyond the first (a server's) that do not fit beside the model: the GPU
                // keeps the model with one session, and says so, rather than the CPU taking it all.
                if (gpuExperts.sessions <= 1) throw;
                const std::string why = e.what();
                const int asked = gpuExperts.sessions;
                gpuExperts.sessions = 1;
                gpu = create();
                if (gpu)
                    info.gpuSessionsNotice = "the GPU holds one session, not the " + std::to_string(asked) +
                                             " asked for: " + why;
            }
        } catch (const Error& e) {
            if (device == Device::Gpu) throw;
            reason = e.what();
        }
        if (gpu) {
            if (!int8Limit.empty()) {  // every session on either path the same (a GPU failure's CPU runner too)
                kvCache = KvCacheType::Float32;
                info.kvCacheNotice = "the KV cache is float32, not int8: " + int8Limit;
            }
            info.gpuSessions = gpuExperts.sessions;
            info.device = gpu->deviceName();
            info.gpuStages = gpu->stages();
            info.gpuDevice = gpu->deviceNumber();
            if (config.numExperts) {
                info.placement = gpu->placement();
                info.expertLayers = gpu->expertLayerMap(config);
            }
        } else if (device == Device::Gpu) {
            throw Error("cannot run on the GPU: " + reason);
        } else {
            info.deviceNotice = "running on the CPU only: " + reason;
        }
    }

    std::unique_ptr<runtime::ModelRunner> newRunner(bool onGpu) {
        // A GPU failure's CPU runner takes the same cache type.
        return onGpu && gpu ? gpu->newRunner(info.contextLength)
                            : runtime::makeCpuRunner(*transformer, info.contextLength, kvCache);
    }

    model::ModelConfig config;
    std::unique_ptr<io::PackedStore> store;
    std::optional<io::Checkpoint> checkpoint;
    cpu::ThreadPool pool;
    std::unique_ptr<model::SyntheticWeights> synthetic;
    model::ModelWeights weights;
    std::uint64_t syntheticSeed = 0;
    ModelInfo info;
    KvCacheType kvCache = KvCacheType::Float32;  // the sessions' on either path (EngineOptions::kvCache)
    std::unique_ptr<runtime::PackedExperts> packed;
    std::unique_ptr<model::RoutedExperts> experts;  // the engine thread's (CPU path)
    std::optional<runtime::UsageCounter> usage;     // MoE models
    std::unique_ptr<model::RoutedExperts> countingExperts;  // `experts`, counted into `usage`
    std::unique_ptr<model::Transformer> transformer;
    std::unique_ptr<runtime::GpuBackend> gpu;

    ~Impl() {
        // The counts go beside the store, for the next load's placement; a store in a folder that cannot
        // be written keeps its old counts (they are a hint, not data).
        if (!store || !usage || usage->added() == 0) return;
        std::string problem;
        usage->snapshot().save(store->dir(), problem);
    }
};

struct Session::Impl {
    explicit Impl(Engine::Impl& e) : engine(e), runner(e.newRunner(true)), onGpu(e.gpu != nullptr) {}

    // The inputs of every forward pass, checked here once for both paths: each id in the vocabulary, and
    // room for them in the context.
    void checkTokens(std::span<const int> tokens, int start) const {
        if (tokens.empty()) throw Error("nothing to run: no tokens were given");
        const ModelInfo& info = engine.info;
        if (start + static_cast<long>(tokens.size()) > info.contextLength)
            throw Error("the conversation needs " + std::to_string(start + tokens.size()) +
                        " tokens of context, but the context length is " + std::to_string(info.contextLength) +
                        "; start a new conversation or raise the context length");
        for (const int id : tokens)
            if (id < 0 || id >= info.vocabSize)
                throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                            std::to_string(info.vocabSize));
    }

    // Runs tokens after the context. A GPU failure moves the session to the CPU: the context is run
    // again there, so the conversation goes on. A single token is a decode step (Expert Deferral applies)
    // unless it is `promptPiece`, a piece of a prompt prefilled in chunks (Generation::prefill), which runs
    // as the whole prompt would have.
    void forward(std::span<const int> tokens, model::LogitsFor which, bool promptPiece = false) {
        model::ForwardOptions options;
        options.logits = which;
        if ((tokens.size() == 1 && !promptPiece) || deferInPrefill) options.deferral = {deferred.load(), skipDeferred.load()};
        if (routing) options.routing = &routing;
        const int start = static_cast<int>(context.size());
        checkTokens(tokens, start);
        try {
            runner->forward(tokens, start, options, logits);
        } catch (const Error& e) {
            if (!onGpu) throw;
            fallBackToCpu(e);
            runner->forward(tokens, start, options, logits);
        }
        checkFinite();
    }

    // The options of a single-token step: this session's deferral and routing observer.
    model::ForwardOptions stepOptions() const {
        model::ForwardOptions options;
        options.deferral = {deferred.load(), skipDeferred.load()};
        if (routing) options.routing = &routing;
        return options;
    }

    // The GPU failed: the session goes on on the CPU, its context run again there.
    void fallBackToCpu(const Error& e) {
        onGpu = false;
        fellBack = true;
        engine.info.deviceNotice = std::string("the GPU failed (") + e.what() + "); continuing on the CPU";
        runner = engine.newRunner(false);
        if (!context.empty()) {
            std::vector<float> ignored;
            runner->forward(context, 0, {}, ignored);
        }
    }

    static void decodeGroup(std::span<Impl* const> group, std::span<const int> tokens);

    // NaN anywhere in the weights reaches the last row through attention; without this check the
    // argmax of NaNs would quietly print token 0.
    void checkFinite() const {
        const std::size_t vocab = static_cast<std::size_t>(engine.info.vocabSize);
        if (logits.size() >= vocab && !allFinite(std::span<const float>(logits).last(vocab)))
            throw Error("the model computed NaN or infinite logits: one of its weights is damaged (NaN or infinity); "
                        "download or convert the model again");
    }

    Engine::Impl& engine;
    std::unique_ptr<runtime::ModelRunner> runner;
    bool onGpu;
    bool fellBack = false;
    std::atomic<int> deferred{0};
    std::atomic<bool> skipDeferred{false};
    std::atomic<bool> deferInPrefill{false};
    RoutingObserver routing;
    std::vector<int> context;  // the tokens whose keys and values are in the cache
    std::vector<float> logits;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::load(const std::filesystem::path& modelDir, const EngineOptions& options) {
    // A GGUF's tokenizer and configuration become files of a store when it is converted; the engine
    // and the chat read those files.
    if (io::GgufModel::isGgufPath(modelDir))
        throw Error(modelDir.string() + " is a GGUF file; convert it into a Tandem store first: tandem-cli convert --model " +
                    modelDir.string() + " --out STORE --experts int4 (or bf16, int8), then load STORE");
    return std::unique_ptr<Engine>(new Engine(std::make_unique<Impl>(modelDir, options)));
}

std::unique_ptr<Engine> Engine::synthetic(const std::string& shape, const EngineOptions& options, std::uint64_t seed) {
    return std::unique_ptr<Engine>(new Engine(std::make_unique<Impl>(shape, options, seed)));
}

const ModelInfo& Engine::info() const { return impl_->info; }
int Engine::threads() const { return impl_->pool.size(); }
double Engine::measureMemoryBandwidth() { return cpu::measureMemoryBandwidth(impl_->pool.experts()); }

std::unique_ptr<Session> Engine::newSession() {
    return std::unique_ptr<Session>(new Session(std::make_unique<Session::Impl>(*impl_)));
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

int Session::position() const { return static_cast<int>(impl_->context.size()); }
const std::vector<int>& Session::context() const { return impl_->context; }
void Session::reset() { impl_->context.clear(); }

void Session::setDeferral(int deferred, bool skip) {
    impl_->deferred = std::clamp(deferred, 0, std::max(0, impl_->engine.info.expertsPerToken - 1));
    impl_->skipDeferred = skip;
}

int Session::deferral() const { return impl_->deferred; }

void Session::setPrefillDeferral(bool on) { impl_->deferInPrefill = on; }
bool Session::prefillDeferral() const { return impl_->deferInPrefill; }

DecodeProfile Session::takeDecodeProfile() { return impl_->runner->takeProfile(); }

void Session::setRoutingObserver(RoutingObserver observer) { impl_->routing = std::move(observer); }

const std::vector<float>& Session::append(std::span<const int> tokens, Logits which) {
    impl_->forward(tokens, which == Logits::All ? model::LogitsFor::AllTokens : model::LogitsFor::LastToken);
    impl_->context.insert(impl_->context.end(), tokens.begin(), tokens.end());
    return impl_->logits;
}

// One decode step of sessions that run together: one runner kind (GPU, or CPU) and one deferral. The
// routing observers each see their own session's row.
void Session::Impl::decodeGroup(std::span<Impl* const> group, std::span<const int> tokens) {
    if (group.size() == 1) {
        group[0]->forward(tokens, model::LogitsFor::LastToken);
        return;
    }
    model::ForwardOptions options = group[0]->stepOptions();
    RoutingObserver each;
    if (std::any_of(group.begin(), group.end(), [](const Session::Impl* s) { return static_cast<bool>(s->routing); }))
        each = [group](int layer, std::size_t, int experts, const float* scores) {
            for (std::size_t i = 0; i < group.size(); ++i)
                if (group[i]->routing) group[i]->routing(layer, 1, experts, scores + i * static_cast<std::size_t>(experts));
        };
    options.routing = each ? &each : nullptr;
    std::vector<runtime::ModelRunner*> runners;
    std::vector<int> positions;
    std::vector<std::vector<float>*> logits;
    for (Session::Impl* s : group) {
        runners.push_back(s->runner.get());
        positions.push_back(static_cast<int>(s->context.size()));
        logits.push_back(&s->logits);
    }
    try {
        runners[0]->decodeBatch(runners, tokens, positions, options, logits);
    } catch (const Error& e) {
        if (!group[0]->onGpu) throw;
        // As forward() does for one: every session of the batch goes on on the CPU, its token run there.
        for (std::size_t i = 0; i < group.size(); ++i) {
            group[i]->fallBackToCpu(e);
            group[i]->runner->forward(tokens.subspan(i, 1), positions[i], group[i]->stepOptions(), group[i]->logits);
        }
    }
    for (const Session::Impl* s : group) s->checkFinite();
}

std::vector<std::span<const float>> Session::decodeTogether(std::span<Session* const> sessions, std::span<const int> tokens) {
    if (sessions.empty()) throw Error("nothing to decode: no sessions were given");
    if (tokens.size() != sessions.size())
        throw Error("decoding sessions together takes one token for each session (" + std::to_string(sessions.size()) +
                    " sessions, " + std::to_string(tokens.size()) + " tokens)");
    for (std::size_t i = 0; i < sessions.size(); ++i) {
        if (!sessions[i]) throw Error("decoding sessions together was given no session at " + std::to_string(i));
        if (&sessions[i]->impl_->engine != &sessions[0]->impl_->engine)
            throw Error("sessions decoded together must belong to one engine; session " + std::to_string(i) +
                        " is of another");
        if (std::find(sessions.begin(), sessions.begin() + static_cast<std::ptrdiff_t>(i), sessions[i]) !=
            sessions.begin() + static_cast<std::ptrdiff_t>(i))
            throw Error("a session takes one token per decode step, but session " + std::to_string(i) + " was given twice");
        sessions[i]->impl_->checkTokens(tokens.subspan(i, 1), sessions[i]->position());
    }
    // Batches of one runner kind and one deferral, in the order their first session came.
    std::vector<bool> done(sessions.size(), false);
    for (std::size_t first = 0; first < sessions.size(); ++first) {
        if (done[first]) continue;
        const Impl& a = *sessions[first]->impl_;
        std::vector<Impl*> group;
        std::vector<int> groupTokens;
        for (std::size_t i = first; i < sessions.size(); ++i) {
            const Impl& b = *sessions[i]->impl_;
            if (done[i] || b.onGpu != a.onGpu || b.deferred != a.deferred || b.skipDeferred != a.skipDeferred) continue;
            group.push_back(sessions[i]->impl_.get());
            groupTokens.push_back(tokens[i]);
            done[i] = true;
        }
        Impl::decodeGroup(group, groupTokens);
    }
    std::vector<std::span<const float>> logits;
    for (std::size_t i = 0; i < sessions.size(); ++i) {
        sessions[i]->impl_->context.push_back(tokens[i]);
        logits.emplace_back(sessions[i]->impl_->logits);
    }
    return logits;
}

struct Generation::Impl {
    using Clock = std::chrono::steady_clock;
    static double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

    Impl(Session& s, const GenerateOptions& o) : session(s), options(o), sampler(o.sampling) {}

    Session& session;
    GenerateOptions options;
    runtime::Sampler sampler;
    GenerationStats stats;
    Clock::time_point started, prefilled;
    std::vector<int> prompt;  // the prompt after the cached prefix, to prefill
    std::size_t run = 0;      // of `prompt`, the tokens prefilled so far
    int last = -1;       // the token to run next; -1: none (not sampled yet, or the generation ended)
    bool ended = false;
};

Generation::Generation(Session& session, std::span<const int> conversation, const GenerateOptions& options, Prefill when)
    : impl_(std::make_unique<Impl>(session, options)) {
    if (conversation.empty()) throw Error("nothing to generate from: the prompt is empty");
    Impl& g = *impl_;
    Session::Impl& s = *session.impl_;
    g.stats.promptTokens = static_cast<int>(conversation.size());
    s.fellBack = false;  // reported per generation

    // Keep the cached prefix the conversation shares; at least its last token is run again, since its
    // logits are needed to sample. Cache rows past the prefix are simply overwritten.
    const auto shared = std::mismatch(s.context.begin(), s.context.end(), conversation.begin(), conversation.end());
    const std::size_t reuse = std::min<std::size_t>(static_cast<std::size_t>(shared.first - s.context.begin()),
                                                    conversation.size() - 1);
    s.context.resize(reuse);
    g.stats.reusedTokens = static_cast<int>(reuse);
    g.prompt.assign(conversation.begin() + static_cast<std::ptrdiff_t>(reuse), conversation.end());

    g.started = Impl::Clock::now();
    if (when == Prefill::Now) prefill(0);
}

Generation::~Generation() = default;

bool Generation::prefill(int maxTokens) {
    Impl& g = *impl_;
    const std::size_t left = g.prompt.size() - g.run;
    if (left == 0) return true;
    const std::size_t n = maxTokens > 0 ? std::min(left, static_cast<std::size_t>(maxTokens)) : left;
    const std::span<const int> piece = std::span<const int>(g.prompt).subspan(g.run, n);
    Session::Impl& s = *g.session.impl_;
    // The whole prompt at once runs as Session::append would; a piece of it runs as a prompt even when it
    // is one token, so that the cache does not depend on where the chunks were cut.
    s.forward(piece, model::LogitsFor::LastToken, n < g.prompt.size());
    s.context.insert(s.context.end(), piece.begin(), piece.end());
    g.run += n;
    g.stats.prefilledTokens = static_cast<int>(g.run);
    if (g.run < g.prompt.size()) return false;
    g.prefilled = Impl::Clock::now();
    g.stats.prefillSeconds = Impl::seconds(g.started, g.prefilled);
    g.prompt = {};
    g.run = 0;
    g.session.takeDecodeProfile();  // what follows is decode only
    return true;
}

int Generation::prefillLeft() const { return static_cast<int>(impl_->prompt.size() - impl_->run); }

std::optional<int> Generation::next() {
    Impl& g = *impl_;
    if (prefillLeft() > 0)
        throw Error("a generation samples once its prompt is prefilled, but " + std::to_string(prefillLeft()) +
                    " of its tokens have not run yet");
    if (g.ended || full()) {
        g.ended = true;
        return std::nullopt;
    }
    Session::Impl& s = *g.session.impl_;
    std::span<const float> choices(s.logits);
    choices = choices.last(static_cast<std::size_t>(s.engine.info.vocabSize));
    if (g.options.vocabularyLimit > 0 && static_cast<std::size_t>(g.options.vocabularyLimit) < choices.size())
        choices = choices.first(static_cast<std::size_t>(g.options.vocabularyLimit));
    const int token = g.sampler.pick(choices, s.context);
    if (g.stats.generatedTokens == 0) g.stats.timeToFirstTokenSeconds = Impl::seconds(g.started, Impl::Clock::now());
    ++g.stats.generatedTokens;
    const auto& eos = s.engine.info.eosTokenIds;
    const auto& extra = g.options.stopTokenIds;
    if (g.options.stopAtEos && (std::find(eos.begin(), eos.end(), token) != eos.end() ||
                                std::find(extra.begin(), extra.end(), token) != extra.end())) {
        g.stats.stoppedAtEos = true;
        g.ended = true;
        g.last = -1;
        return std::nullopt;
    }
    g.last = token;
    if (full()) g.ended = true;
    return token;
}

bool Generation::full() const { return impl_->stats.generatedTokens >= impl_->options.maxNewTokens; }

void Generation::decodeTogether(std::span<Generation* const> generations) {
    std::vector<Session*> sessions;
    std::vector<int> tokens;
    for (Generation* g : generations) {
        if (!g || g->impl_->ended || g->impl_->last < 0)
            throw Error("a generation in a decode step has no token to run (it has ended, or nothing was sampled)");
        sessions.push_back(&g->impl_->session);
        tokens.push_back(g->impl_->last);
    }
    Session::decodeTogether(sessions, tokens);
    for (Generation* g : generations) g->impl_->last = -1;
}

GenerationStats Generation::finish() {
    Impl& g = *impl_;
    g.ended = true;
    if (prefillLeft() > 0)  // given up while its prompt was being prefilled: no decode time
        g.stats.prefillSeconds = Impl::seconds(g.started, Impl::Clock::now());
    else
        g.stats.decodeSeconds = Impl::seconds(g.prefilled, Impl::Clock::now());
    g.stats.fellBackToCpu = g.session.impl_->fellBack;
    g.stats.decode = g.session.takeDecodeProfile();
    return g.stats;
}

Session& Generation::session() const { return impl_->session; }

GenerationStats Session::generate(std::span<const int> conversation, const GenerateOptions& options,
                                  const std::function<bool(int)>& onToken) {
    Generation g(*this, conversation, options);
    while (const auto token = g.next()) {
        if (!onToken(*token) || g.full()) break;
        Generation* one = &g;
        Generation::decodeTogether({&one, 1});
    }
    return g.finish();
}

}  // namespace tandem
