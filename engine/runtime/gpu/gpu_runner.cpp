#include "runtime/gpu/gpu_runner.h"
#include "runtime/gpu/gpu_runner_stages.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "cuda/device_scope.h"
#include "cuda/gemm.h"
#include "cuda/host_sync.h"
#include "model/rope.h"
#include "runtime/gpu_backend.h"
#include "tandem/tuning.h"

namespace tandem::cuda {

namespace {

constexpr std::size_t kBlasWorkspaceBytes = 32u << 20;
// FP8 prefill (projectFp8): bytes of widened weight rows per chunk, and at most this many rows a chunk.
constexpr std::size_t kFp8RowsBytes = 64u << 20;
constexpr int kFp8MaxChunkRows = 4096;
// Logits rows a chunk computes at most (the vocabulary is wide: 0.6 MB a row for Qwen3): a pass that
// wants every token's logits (eval) runs in chunks of at most this many tokens.
constexpr std::size_t kHeadRows = 512;



// The flash path's buffers (GpuRunner::mlaLatent_, mlaKv_, mlaState_), in bytes.
std::uint64_t mlaFlashBytes(const model::ModelConfig& c, int capacity, int maxChunk, bool split) {
    if (!mlaFlashPrefill(c)) return 0;
    const std::uint64_t rows = static_cast<std::uint64_t>(mlaPassRows(c, capacity));
    const std::uint64_t heads = static_cast<std::uint64_t>(c.numHeads);
    std::uint64_t bytes = rows * heads * (c.qkNopeHeadDim + c.vHeadDim) * 4 + (split ? 2 : 1) * rows * c.kvLoraRank * 2;
    if (rows < static_cast<std::uint64_t>(capacity))
        bytes += static_cast<std::uint64_t>(maxChunk) * heads * (c.vHeadDim + 2) * 4;
    return bytes;
}

}  // namespace

bool GpuRunner::splitPrecision() { return tuning().gpuSplitPrecision; }

namespace {

// Bytes of L2 the decode step fills with the next layer's weights while it waits for the CPU: half
// the cache by default, so the activations and KV rows of the layer in between keep their room;
// Tuning::gpuPrefetchMb overrides (0 turns it off).
std::size_t prefetchBudget(int device) {
    if (tuning().gpuPrefetchMb >= 0) return static_cast<std::size_t>(tuning().gpuPrefetchMb) << 20;
    int l2 = 0;
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    return static_cast<std::size_t>(l2) / 2;
}

// A layer's router and attention weights, the attention's in the order a decode step reads them, up
// to `budget` bytes: the last range may be cut short.
L2Prefetch attentionWeights(const GpuLayer& layer, std::size_t budget) {
    L2Prefetch p;
    const auto addBuffer = [&](const auto& buffer) {
        const std::size_t bytes = std::min(buffer.size() * sizeof(*buffer.get()), budget) / 16 * 16;
        if (bytes == 0 || p.count == L2Prefetch::kMaxRanges) return;
        p.data[p.count] = buffer.get();
        p.bytes[p.count++] = static_cast<unsigned>(bytes);
        budget -= bytes;
    };
    const auto add = [&](const auto& weights) {
        if constexpr (std::is_same_v<std::decay_t<decltype(weights)>, GpuMatrix>) {
            if (weights.isEightBit()) {
                addBuffer(weights.scales);
                addBuffer(weights.eight);
            } else {
                addBuffer(weights.values);
            }
        } else {
            addBuffer(weights);
        }
    };
    add(layer.router);  // small and read last: first, so the budget never cuts it
    add(layer.qkv);
    add(layer.qaKva);
    add(layer.q);
    add(layer.kva);
    add(layer.kvb);
    add(layer.kvbLo);
    add(layer.o);
    return p;
}

// Floats of pairs_, the split GEMMs' products before their pair sums (and MLA's value expansion): 2
// rows a token of the widest projection, or 2 rows a head row of the output head's.
std::size_t pairsFloats(const model::ModelConfig& c, std::size_t tokens) {
    const Widths w = widthsOf(c);
    const long width = std::max({w.qkv, w.q, w.comb, w.gateUp, w.attn, static_cast<long>(c.hiddenSize)});
    return std::max(2 * tokens * static_cast<std::size_t>(width),
                    2 * std::min<std::size_t>(tokens, kHeadRows) * static_cast<std::size_t>(c.vocabSize));
}

}  // namespace

namespace {

// The hand-over's cost in prefill streaming, in exports of the chunk's rows: on the H200 machine the
// layers with a CPU share took ~2.4 us per token beyond the copy, attention included, at 2048 tokens, of
// which the export is ~0.4 and the attention ~1 (docs/BENCHMARKS.md).
constexpr double kHandOverPerExport = 3.0;

// Tuning::gpuExpertSplits: by default plain bf16 activations for int8 and int4 experts (the 0.2% of a
// bf16 rounding is far below their weights' own error, and the CPU's kernels round the same activations
// to 8 bits) and hi + lo for bf16 experts, which keep at least 2 terms.
int prefillExpertSplits(const GpuExpertLayout& l) {
    const int splits = tuning().gpuExpertSplits;
    if (l.type == io::ExpertType::BF16) return std::max(2, splits);
    return splits > 0 ? splits : 1;
}

// The scratch of the routed-expert kernels for `tokens` tokens: the grouped routing and the larger of
// the decode and prefill kernels' own.
std::size_t expertScratchBytes(const model::ModelConfig& c, const GpuExpertLayout& l, int tokens) {
    const int pairs = tokens * c.router.topK;
    return std::max(decodeScratchBytes(l, pairs), prefillScratchBytes(l, tokens, pairs, c.numExperts, prefillExpertSplits(l)));
}

}  // namespace

std::uint64_t GpuRunner::deviceBytes(const model::ModelConfig& c, bool eightBitWeights, int capacity, int maxChunk,
                                     const GpuExpertLayout* experts, KvCacheType kvCache) {
    const Widths w = widthsOf(c);
    const std::uint64_t T = static_cast<std::uint64_t>(maxChunk);
    const std::uint64_t rows = splitPrecision() ? 2 : 1;
    const std::uint64_t positions = static_cast<std::uint64_t>(std::max(0, capacity));
    // Int8: codes and a float scale a group (cacheGroups), every layer, and one layer's float32 rows.
    const std::uint64_t cache = kvCache == KvCacheType::Int8
                                    ? c.numLayers * positions * (w.cacheA + w.cacheB + 4 * (2 * cacheGroups(c))) +
                                          floatRowsBytes(c, capacity, kvCache)
                                    : c.numLayers * positions * (w.cacheA + w.cacheB) * 4;
    const std::uint64_t f32 = T * (2ull * c.hiddenSize + w.qkv + w.q + w.comb + rows * w.qLatent + w.gateUp +
                                   static_cast<std::uint64_t>(c.numExperts) + 2ull * c.router.topK) +
                              std::min<std::uint64_t>(T, kHeadRows) * c.vocabSize + pairsFloats(c, T);
    const std::uint64_t half = rows * T *
                               (static_cast<std::uint64_t>(c.hiddenSize) + c.qLoraRank +
                                static_cast<std::uint64_t>(c.numHeads) * c.qkNopeHeadDim + w.qLatent + w.attn + w.inner);
    const std::uint64_t fp8 = eightBitWeights ? kFp8RowsBytes + rows * T * 2 * kFp8MaxChunkRows * 4 : 0;
    const std::uint64_t routed = experts ? expertScratchBytes(c, *experts, maxChunk) +
                                               (static_cast<std::uint64_t>(c.numExperts) + 1 + 4 * T * c.router.topK) * 4
                                         : 0;
    return cache + f32 * 4 + half * 2 + fp8 + routed + kBlasWorkspaceBytes + mlaFlashBytes(c, capacity, maxChunk, rows == 2);
}

std::uint64_t GpuRunner::floatRowsBytes(const model::ModelConfig& c, int capacity, KvCacheType kvCache) {
    const Widths w = widthsOf(c);
    return kvCache == KvCacheType::Int8 ? static_cast<std::uint64_t>(std::max(0, capacity)) * (w.cacheA + w.cacheB) * 4 : 0;
}

GpuRunner::GpuRunner(const model::ModelConfig& config, std::unique_ptr<model::QueuedRoutedExperts> experts,
                     const GpuWeights& weights, const GpuExperts& gpuExperts, const model::Rope& rope, int capacity,
                     int maxChunk, runtime::UsageCounter* usage, GpuStage stage, KvCacheType kvCache)
    : config_(config), weights_(weights), gpuExperts_(gpuExperts),
      firstLayer_(stage.firstLayer), endLayer_(stage.endLayer < 0 ? config.numLayers : stage.endLayer), device_(stage.device),
      rope_{weights.ropeInvFreq.get(), rope.dim(), config.ropeInterleaved, rope.attentionFactor()},
      split_(splitPrecision()), capacity_(capacity), maxChunk_(maxChunk) {
    const model::ModelConfig& c = config;
    const DeviceScope onDevice(device_);
    if (firstLayer_ < 0 || firstLayer_ >= endLayer_ || endLayer_ > c.numLayers)
        throw GpuError("a GPU stage must run some of the model's " + std::to_string(c.numLayers) + " layers (asked for " +
                       std::to_string(firstLayer_) + " to " + std::to_string(endLayer_) + ")");
    // Deferral stops at the stage's edges: the deferred experts of a layer join the next MoE layer's
    // output, which another stage's runner computes.
    layers_ = runtime::stageLayers(gpuExperts.layers.empty() ? config.layers : gpuExperts.layers, firstLayer_, endLayer_);
    for (const model::LayerPlan& layer : layers_)
        if (inStage(layer.index)) stageLayers_.push_back(layer);
    const Widths w = widthsOf(c);
    const std::size_t T = static_cast<std::size_t>(maxChunk);
    const std::size_t T2 = split_ ? 2 * T : T;  // rows of bf16 GEMM inputs
    const std::size_t H = static_cast<std::size_t>(c.hiddenSize);
    TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TANDEM_CUBLAS_CHECK(cublasCreate(&blas_));
    TANDEM_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    blasWorkspace_ = DeviceBuffer<char>(kBlasWorkspaceBytes);
    TANDEM_CUBLAS_CHECK(cublasSetWorkspace(blas_, blasWorkspace_.get(), kBlasWorkspaceBytes));

    inIds_ = PinnedBuffer<int>(T);
    inStart_ = PinnedBuffer<int>(1);
    outLogits_ = PinnedBuffer<float>(std::min(T, kHeadRows) * static_cast<std::size_t>(c.vocabSize));
    ids_ = DeviceBuffer<int>(T);
    start_ = DeviceBuffer<int>(1);
    int8Cache_ = kvCache == KvCacheType::Int8;
    const std::size_t positions = static_cast<std::size_t>(capacity);
    for (int l = 0; l < c.numLayers; ++l) {  // the stage's layers only
        const std::size_t n = inStage(l) ? positions : 0;
        if (int8Cache_) {
            codesA_.emplace_back(n * static_cast<std::size_t>(w.cacheA));
            codesB_.emplace_back(n * static_cast<std::size_t>(w.cacheB));
            scalesA_.emplace_back(n * static_cast<std::size_t>(cacheGroups(c)));
            scalesB_.emplace_back(n * static_cast<std::size_t>(cacheGroups(c)));
        }
        cacheA_.emplace_back(int8Cache_ ? 0 : n * static_cast<std::size_t>(w.cacheA));
        cacheB_.emplace_back(int8Cache_ ? 0 : n * static_cast<std::size_t>(w.cacheB));
    }
    if (int8Cache_) {
        // Said here, not at the first step (inside a graph's capture); the engine asks for float32 first.
        if (const std::string limit = runtime::gpuInt8KvCacheLimit(c); !limit.empty()) throw GpuError(limit + "; use --kv-cache f32");
        floatRowsA_ = DeviceBuffer<float>(positions * static_cast<std::size_t>(w.cacheA));
        floatRowsB_ = DeviceBuffer<float>(positions * static_cast<std::size_t>(w.cacheB));
    }
    x_ = DeviceBuffer<float>(T * H);
    hF32_ = DeviceBuffer<float>(T * H);
    hBf16_ = DeviceBuffer<bf16>(T2 * H);
    qkv_ = DeviceBuffer<float>(T * static_cast<std::size_t>(w.qkv));
    q_ = DeviceBuffer<float>(T * static_cast<std::size_t>(w.q));
    comb_ = DeviceBuffer<float>(T * static_cast<std::size_t>(w.comb));
    qLatent_ = DeviceBuffer<float>(T2 * static_cast<std::size_t>(w.qLatent));
    qa_ = DeviceBuffer<bf16>(T2 * static_cast<std::size_t>(c.qLoraRank));
    qNope_ = DeviceBuffer<bf16>(T2 * static_cast<std::size_t>(c.numHeads) * static_cast<std::size_t>(c.qkNopeHeadDim));
    ctx_ = DeviceBuffer<bf16>(T2 * static_cast<std::size_t>(w.qLatent));
    attnOut_ = DeviceBuffer<bf16>(T2 * static_cast<std::size_t>(w.attn));
    gateUp_ = DeviceBuffer<float>(T * static_cast<std::size_t>(w.gateUp));
    act_ = DeviceBuffer<bf16>(T2 * static_cast<std::size_t>(w.inner));
    pairs_ = DeviceBuffer<float>(pairsFloats(c, T));
    if (weights.hasEightBit) {
        fp8Rows_ = DeviceBuffer<bf16>(kFp8RowsBytes / sizeof(bf16));
        fp8Products_ = DeviceBuffer<float>(T2 * 2 * kFp8MaxChunkRows);
    }
    // A decode step's attention: one wave of the decode kernel that serves the model's shape (a block per
    // key head and part of the context for GQA, per query head for MLA; attention.cu); short contexts use
    // fewer parts.
    int device = 0, multiprocessors = 0;
    TANDEM_CUDA_CHECK(cudaGetDevice(&device));
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    {
        const bool mla = c.attention == model::AttentionKind::Mla;
        AttentionArgs shape{};
        shape.heads = c.numHeads;
        shape.group = mla ? 1 : c.numHeads / c.numKvHeads;
        shape.dimA = mla ? c.kvLoraRank : c.headDim;
        shape.dimB = mla ? c.qkRopeHeadDim : 0;
        shape.dimV = shape.dimA;
        shape.keyHeadStride = mla ? 0 : c.headDim;
        shape.split = split_;
        shape.perHeadDecode = mla && !tuning().gpuFlashPrefill;  // as enqueueMla sets it
        // The 8-bit cache's decode kernel where one reads its codes (enqueueGqa), else the float32 rows'.
        shape.int8Cache = int8Cache_;
        if (shape.int8Cache && !(mla ? mlaDecodeServes(shape) : keyHeadDecodeServes(shape))) shape.int8Cache = false;
        decodeSplits_ = decodeAttentionSplits(shape, multiprocessors);
    }
    chained_ = tuning().gpuChain && chainedLaunchesSupported();
    enableChainedLaunches(chained_);
    const std::size_t budget = prefetchBudget(device);
    prefetch_.resize(static_cast<std::size_t>(c.numLayers));
    for (int l = firstLayer_; l + 1 < endLayer_; ++l)
        prefetch_[static_cast<std::size_t>(l)] = attentionWeights(weights.layers[static_cast<std::size_t>(l) + 1], budget);
    const std::size_t valueWidth = static_cast<std::size_t>(c.attention == model::AttentionKind::Mla ? c.kvLoraRank : c.headDim);
    attnPartials_ = DeviceBuffer<float>(static_cast<std::size_t>(c.numHeads) * decodeSplits_ * (valueWidth + 2));
    attnPartsDone_ = DeviceBuffer<unsigned>(static_cast<std::size_t>(c.numHeads));
    TANDEM_CUDA_CHECK(cudaMemset(attnPartsDone_.get(), 0, attnPartsDone_.size() * sizeof(unsigned)));
    mlaFlash_ = mlaFlashPrefill(c);
    if (mlaFlash_) {
        mlaPassRows_ = mlaPassRows(c, capacity);
        const std::size_t rows = static_cast<std::size_t>(mlaPassRows_), heads = static_cast<std::size_t>(c.numHeads);
        mlaLatent_ = DeviceBuffer<bf16>((split_ ? 2 : 1) * rows * static_cast<std::size_t>(c.kvLoraRank));
        mlaKv_ = DeviceBuffer<float>(rows * heads * static_cast<std::size_t>(c.qkNopeHeadDim + c.vHeadDim));
        if (mlaPassRows_ < capacity) mlaState_ = DeviceBuffer<float>(T * heads * static_cast<std::size_t>(c.vHeadDim + 2));
    }
    logits_ = DeviceBuffer<float>(std::min(T, kHeadRows) * static_cast<std::size_t>(c.vocabSize));
    if (c.numExperts > 0) {
        const std::size_t k = static_cast<std::size_t>(c.router.topK);
        routerLogits_ = DeviceBuffer<float>(T * static_cast<std::size_t>(c.numExperts));
        routeIds_ = DeviceBuffer<int>(T * k);
        routeWeights_ = DeviceBuffer<float>(T * k);
        routerCounter_ = DeviceBuffer<unsigned>(1);
        TANDEM_CUDA_CHECK(cudaMemset(routerCounter_.get(), 0, sizeof(unsigned)));
        if (gpuExperts.any()) {
            groupStart_ = DeviceBuffer<int>(static_cast<std::size_t>(c.numExperts) + 1);
            pairToken_ = DeviceBuffer<int>(T * k);
            pairGroup_ = DeviceBuffer<int>(T * k);
            slotPair_ = DeviceBuffer<int>(T * k);
            pairWeight_ = DeviceBuffer<float>(T * k);
            slotExperts_ = DeviceBuffer<const std::uint8_t*>(k);
            expertsDone_ = DeviceBuffer<unsigned>(1);
            TANDEM_CUDA_CHECK(cudaMemset(expertsDone_.get(), 0, sizeof(unsigned)));
            expertScratch_ = DeviceBuffer<char>(expertScratchBytes(c, gpuExperts.layout, maxChunk));
        }
        if (gpuExperts.streamLayerBytes > 0) {
            for (const model::LayerPlan& layer : c.layers)
                if (layer.moe && gpuExperts.streams(layer.index) && inStage(layer.index)) streamOrder_.push_back(layer.index);
            TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&copyStream_, cudaStreamNonBlocking));
            streamTables_ = DeviceBuffer<const std::uint8_t*>(streamOrder_.size() * static_cast<std::size_t>(c.numExperts));
            for (int b = 0; b < 2; ++b) {
                stage_[b] = DeviceBuffer<std::uint8_t>(gpuExperts.streamLayerBytes);
                TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&copied_[b], cudaEventDisableTiming));
                TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&used_[b], cudaEventDisableTiming));
                TANDEM_CUDA_CHECK(cudaEventCreate(&attentionTimed_[b]));
                if (b == 0) TANDEM_CUDA_CHECK(cudaEventCreate(&attentionTimed_[2]));
            }
            TANDEM_CUDA_CHECK(cudaEventCreate(&streamEnd_));
            TANDEM_CUDA_CHECK(cudaEventCreateWithFlags(&routed_, cudaEventDisableTiming));
            routedFlags_ = PinnedBuffer<int>(streamOrder_.size() * static_cast<std::size_t>(c.numExperts), true);
        }
    }
    controls_ = PinnedBuffer<SlotControl>(2, true);
    clocks_ = PinnedBuffer<LayerClock>(static_cast<std::size_t>(c.numLayers) + 1, true);
    failed_ = PinnedBuffer<int>(1, true);
    counters_ = DeviceBuffer<std::uint64_t>(2);
    TANDEM_CUDA_CHECK(cudaMemset(counters_.get(), 0, 2 * sizeof(std::uint64_t)));
    for (int i = 0; i < 2 && c.numExperts > 0; ++i) {
        const std::size_t k = static_cast<std::size_t>(c.router.topK);
        ExpertSlot& slot = slots_[i];
        // Mapped, so kernels write the hand-over and read the result straight through PCIe.
        auto& floats = slotFloats_.emplace_back(T * H * 3 + T * k, true);
        auto& ints = slotInts_.emplace_back(T * k, true);
        slot.x = floats.get();
        slot.immediateOut = floats.get() + T * H;
        slot.deferredOut = floats.get() + 2 * T * H;
        slot.weights = floats.get() + 3 * T * H;
        slot.ids = ints.get();
        slot.control = controls_.get() + i;
    }
    if (!streamOrder_.empty()) {
        // The hand-over of a full chunk, which a streamed layer with a CPU share pays and one without
        // does not: the export of its rows to the slot timed (the second run), the whole taken as
        // kHandOverPerExport exports (the CPU's sum back the same way, and the CPU's conversions and
        // zeroing of every row).
        auto device = [](const auto* host, const auto& buffer) { return buffer.devicePointer() + (host - buffer.get()); };
        const int k = c.router.topK;
        for (int run = 0; run < 2; ++run) {
            TANDEM_CUDA_CHECK(cudaEventRecord(attentionTimed_[0], stream_));
            launchExportToHost(hF32_.get(), maxChunk, H, routeIds_.get(), routeWeights_.get(), k,
                               device(slots_[0].x, slotFloats_[0]), device(slots_[0].ids, slotInts_[0]),
                               device(slots_[0].weights, slotFloats_[0]), stream_);
            TANDEM_CUDA_CHECK(cudaEventRecord(attentionTimed_[1], stream_));
        }
        TANDEM_CUDA_CHECK(cudaEventSynchronize(attentionTimed_[1]));
        float ms = 0;
        TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, attentionTimed_[0], attentionTimed_[1]));
        handOverSecondsPerToken_ = kHandOverPerExport * ms * 1e-3 / maxChunk;
    }
    // Which slot each MoE layer uses: consecutive MoE layers alternate, so a layer's deferred part
    // (in its slot) is still there when the layer it joins (in the other) waits for it.
    links_.resize(static_cast<std::size_t>(c.numLayers));
    layerGpuSeconds_.assign(links_.size(), 0.0);
    layerOverlapSeconds_.assign(links_.size(), 0.0);
    layerWaitSeconds_.assign(links_.size(), 0.0);
    // Layers whose experts the GPU holds use no slot.
    int moeIndex = 0;
    for (const model::LayerPlan& layer : stageLayers_) {
        if (!layer.moe || gpuExperts.wholeLayer(layer.index)) continue;
        const int previous = layer.deferredFrom >= 0 ? links_[static_cast<std::size_t>(layer.deferredFrom)].slot : -1;
        links_[static_cast<std::size_t>(layer.index)] = {moeIndex++ % 2, previous};
    }
    bridge_ = std::make_unique<ExpertBridge>(c, layers_, std::move(experts), std::vector<ExpertSlot*>{&slots_[0], &slots_[1]});
    bridge_->computeOnGpu(gpuExperts.placement.gpu);
    bridge_->countUsage(usage);
    prefillSplits_ = prefillExpertSplits(gpuExperts.layout);
    profileStages_ = tuning().gpuProfile;
    if (profileStages_) {
        stageClock_ = PinnedBuffer<std::uint64_t>(static_cast<std::size_t>(c.numLayers) * kStages, true);
        stageSeconds_.assign(kStages, 0.0);
        prefillStageSeconds_.assign(kStages, 0.0);
    }
}

void GpuRunner::stamp(int layer, int stage) {
    if (profileStages_ && (capturingDecode_ || profilingPrefill_))
        launchTimestamp(stageClock_.devicePointer() + static_cast<std::size_t>(layer) * kStages + stage, stream_);
}

void GpuRunner::printStageProfile() const {
    if (!profileStages_) return;
    if (profiledSteps_ > 0) {
        std::fprintf(stderr, "GPU stages of a decode step (ms per step, summed over the MoE layers, %ld steps):\n", profiledSteps_);
        for (int s = 0; s + 1 < kStages; ++s)
            std::fprintf(stderr, "  %-28s %8.3f\n", kStageNames[s], stageSeconds_[static_cast<std::size_t>(s)] * 1e3 / profiledSteps_);
    }
    if (prefillTokens_ > 0) {
        std::fprintf(stderr, "GPU stages of prefill (ms per 1000 prompt tokens, summed over the MoE layers, %ld tokens):\n",
                     prefillTokens_);
        for (int s = 0; s + 1 < kStages; ++s)
            std::fprintf(stderr, "  %-28s %8.3f\n", kStageNames[s],
                         prefillStageSeconds_[static_cast<std::size_t>(s)] * 1e6 / static_cast<double>(prefillTokens_));
    }
    std::fprintf(stderr, "  (a MoE layer the GPU holds: \"copies\" is the routes' grouping, \"shared experts\" the same, "
                         "\"wait + add\" its routed experts)\n");
}

// Adds the time between each stage's stamps of the last pass, over the MoE layers, to `seconds`.
void GpuRunner::addStageTimes(std::vector<double>& seconds) const {
    for (int l = 0; l < config_.numLayers; ++l) {
        if (!config_.isMoeLayer(l)) continue;
        const std::uint64_t* t = stageClock_.get() + static_cast<std::size_t>(l) * kStages;
        for (int s = 0; s + 1 < kStages; ++s) seconds[static_cast<std::size_t>(s)] += static_cast<double>(t[s + 1] - t[s]) * 1e-9;
    }
}

GpuRunner::~GpuRunner() {
    const DeviceScope onDevice(device_);
    if (stream_) {
        try {
            finishStream();  // a forward pass that failed may have left GPU waits the bridge must serve
        } catch (...) {
            cudaStreamSynchronize(stream_);
        }
    }
    printStageProfile();
    if (decodeGraph_) cudaGraphExecDestroy(decodeGraph_);
    if (batchGraph_) cudaGraphExecDestroy(batchGraph_);
    if (copyStream_) {
        cudaStreamSynchronize(copyStream_);
        cudaStreamDestroy(copyStream_);
    }
    for (int b = 0; b < 2; ++b) {
        if (copied_[b]) cudaEventDestroy(copied_[b]);
        if (used_[b]) cudaEventDestroy(used_[b]);
        if (b == 0 && streamEnd_) cudaEventDestroy(streamEnd_);
        if (b == 0 && routed_) cudaEventDestroy(routed_);
        if (attentionTimed_[b]) cudaEventDestroy(attentionTimed_[b]);
        if (b == 0 && attentionTimed_[2]) cudaEventDestroy(attentionTimed_[2]);
    }
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
}

const float* GpuRunner::followingNorm(int layer) const {
    if (layer + 1 == config_.numLayers) return weights_.finalNorm.get();
    if (layer + 1 >= endLayer_) return nullptr;
    return weights_.layers[static_cast<std::size_t>(layer) + 1].inputNorm.get();
}

int GpuRunner::chunkLimit(bool allLogits) const {
    return allLogits ? std::min(maxChunk_, static_cast<int>(kHeadRows)) : maxChunk_;
}

void GpuRunner::forward(std::span<const int> tokens, int start, const model::ForwardOptions& options,
                        std::vector<float>& logits) {
    const DeviceScope onDevice(device_);
    const auto V = static_cast<std::size_t>(config_.vocabSize);
    const bool all = options.logits == model::LogitsFor::AllTokens;
    bridge_->setDeferral(options.deferral.deferred, options.deferral.skip);
    if (heads()) logits.resize((all ? tokens.size() : 1) * V);  // a stage before the last returns none

    for (std::size_t done = 0; done < tokens.size();) {
        const auto chunk = static_cast<std::size_t>(chunkLimit(all));
        const int n = static_cast<int>(std::min(chunk, tokens.size() - done));
        const bool lastChunk = done + static_cast<std::size_t>(n) == tokens.size();
        const int rows = all ? n : (lastChunk ? 1 : 0);
        std::copy_n(tokens.data() + done, n, inIds_.get());
        *inStart_.get() = start + static_cast<int>(done);
        // A prompt chunk reads the previous layer's deferred part only when it defers (decode's graph
        // always adds it).
        const bool decodeStep = n == 1 && rows == 1;
        readDeferred_ = decodeStep || options.deferral.deferred > 0;
        for (auto& slot : slots_) {
            slot.tokens = n;
            slot.deferredRead = readDeferred_;
        }

        if (decodeStep) {
            // A decode step: the whole GPU side is one graph, captured once and replayed.
            prepareStreamShare(n);
            ensureDecodeGraph();
            const auto t0 = std::chrono::steady_clock::now();
            TANDEM_CUDA_CHECK(cudaGraphLaunch(decodeGraph_, stream_));
            ++graphLaunches_;
            finishStream();
            ++steps_;
            stepSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            collectStepClocks();
        } else {
            profilingPrefill_ = profileStages_;
            // A chunk this large computes the CPU's layers on the GPU from copies of their experts (no
            // deferral in such a pass: that is the CPU's; prompts defer only when asked).
            streamingChunk_ = !streamOrder_.empty() && tuning().gpuStreamMinTokens > 0 &&
                              n >= tuning().gpuStreamMinTokens && options.deferral.deferred == 0;
            prepareStreamShare(n);
            const bool streamed = streamingChunk_;
            try {
                ExpertBridge::ServeMeanwhile serving(*bridge_);
                enqueueStep(n, rows);
                profilingPrefill_ = false;
                streamingChunk_ = false;
            } catch (...) {
                profilingPrefill_ = false;
                streamingChunk_ = false;
                // Serve what the GPU already waits for, so the stream drains instead of timing out.
                try {
                    finishStream();
                } catch (...) {
                }
                throw;
            }
            finishStream();
            lastStepEndNs_ = 0;
            if (streamed) {
                // The first streamed layer's attention and, when it handed a share to the CPU, its
                // hand-over: the next chunk's share waits for the one and pays the other twice.
                float ms = 0;
                if (cudaEventElapsedTime(&ms, attentionTimed_[0], attentionTimed_[1]) == cudaSuccess && ms > 0)
                    gpuFirstSecondsPerToken_ = ms * 1e-3 / n;
                if (streamCpuExperts_ > 0 && cudaEventElapsedTime(&ms, attentionTimed_[1], attentionTimed_[2]) == cudaSuccess && ms > 0)
                    handOverSecondsPerToken_ = kHandOverPerExport * ms * 1e-3 / n;
                cudaGetLastError();
                judgeStreamShare(n);
            }
            if (profileStages_) {
                addStageTimes(prefillStageSeconds_);
                prefillTokens_ += n;
            }
        }
        if (*failed_.get()) throw GpuError("the CPU did not deliver the routed experts in time; the GPU gave up waiting");
        bridge_->rethrowFailure();
        if (rows > 0 && heads()) {
            const std::size_t firstRow = all ? done : 0;
            std::copy_n(outLogits_.get(), static_cast<std::size_t>(rows) * V, logits.data() + firstRow * V);
        }
        done += static_cast<std::size_t>(n);
    }
}

void GpuRunner::ensureDecodeGraph() { captureDecodeGraph(decodeGraph_, chained_); }

// A batched step's graph: the same step, its kernels launched unchained. Chained, a member waiting for
// the CPU's rows lets its next kernel's blocks start early, where they sit until the wait ends; several
// members' early blocks can fill every multiprocessor, so another member never reaches the layer the
// batch waits for, and the CPU never computes it (seen on the H200: 4 streams of qwen3-30b-a3b hung).
// Unchained, a waiting member holds only its wait kernel's block.
void GpuRunner::ensureBatchGraph() { captureDecodeGraph(batchGraph_, false); }

void GpuRunner::captureDecodeGraph(cudaGraphExec_t& exec, bool chained) {
    if (exec) return;
    enableChainedLaunches(chained);
    cudaGraph_t graph;
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturingDecode_ = true;
    try {
        enqueueStep(1, 1);
    } catch (...) {
        capturingDecode_ = false;
        cudaStreamEndCapture(stream_, &graph);
        enableChainedLaunches(chained_);
        throw;
    }
    capturingDecode_ = false;
    enableChainedLaunches(chained_);
    TANDEM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TANDEM_CUDA_CHECK(made);
}

void GpuRunner::decodeBatch(std::span<ModelRunner* const> runners, std::span<const int> tokens, std::span<const int> positions,
                            const model::ForwardOptions& options, std::span<std::vector<float>* const> logits) {
    const DeviceScope onDevice(device_);  // the members share this runner's backend, so its GPU
    std::vector<GpuRunner*> members;
    for (ModelRunner* r : runners) {
        auto* g = dynamic_cast<GpuRunner*>(r);
        if (!g || !batcher_ || g->batcher_ != batcher_) return ModelRunner::decodeBatch(runners, tokens, positions, options, logits);
        members.push_back(g);
    }
    if (members.size() < 2) return ModelRunner::decodeBatch(runners, tokens, positions, options, logits);
    const auto V = static_cast<std::size_t>(config_.vocabSize);
    std::vector<ExpertBridge*> bridges;
    for (std::size_t i = 0; i < members.size(); ++i) {
        GpuRunner& m = *members[i];
        m.bridge_->setDeferral(options.deferral.deferred, options.deferral.skip);
        logits[i]->resize(V);
        m.inIds_.get()[0] = tokens[i];
        *m.inStart_.get() = positions[i];
        m.readDeferred_ = true;  // decode's graph always adds the previous layer's deferred part
        for (auto& slot : m.slots_) {
            slot.tokens = 1;
            slot.deferredRead = true;
        }
        m.prepareStreamShare(1);
        m.ensureBatchGraph();
        bridges.push_back(m.bridge_.get());
    }
    const auto t0 = std::chrono::steady_clock::now();
    batcher_->open(static_cast<int>(members.size()));
    try {
        for (GpuRunner* m : members) {
            TANDEM_CUDA_CHECK(cudaGraphLaunch(m->batchGraph_, m->stream_));
            ++m->graphLaunches_;
        }
        ExpertBridge::pumpAllUntil(bridges, [&members] {
            for (GpuRunner* m : members) {
                const cudaError_t e = cudaStreamQuery(m->stream_);
                if (e == cudaErrorNotReady) return false;
                TANDEM_CUDA_CHECK(e);
            }
            return true;
        });
    } catch (...) {
        // Whatever some member's GPU still waits for runs with the members that came, then every
        // stream drains.
        batcher_->close();
        for (GpuRunner* m : members) {
            try {
                m->finishStream();
            } catch (...) {
            }
        }
        throw;
    }
    batcher_->close();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Where a batched step's time goes, from the members' GPU clocks (one timer for the whole GPU): for each
    // layer whose experts the CPU computes, how far apart the members handed it over, how long from the
    // last hand-over until the first member had its rows, and each member's GPU work up to its hand-over.
    double spread = 0, round = 0, gpu = 0;
    std::vector<std::uint64_t> previousEnd(members.size());
    for (std::size_t i = 0; i < members.size(); ++i) previousEnd[i] = members[i]->clocks_.get()[config_.numLayers].signalNs;
    for (std::size_t l = 0; l < links_.size(); ++l) {
        if (links_[l].slot < 0) continue;
        std::uint64_t firstSignal = ~0ull, lastSignal = 0, firstEnd = ~0ull;
        double work = 0;
        for (std::size_t i = 0; i < members.size(); ++i) {
            const LayerClock& c = members[i]->clocks_.get()[l];
            const std::uint64_t signal = c.signalNs, end = c.waitEndNs;
            firstSignal = std::min(firstSignal, signal);
            lastSignal = std::max(lastSignal, signal);
            firstEnd = std::min(firstEnd, end);
            if (signal > previousEnd[i]) work += static_cast<double>(signal - previousEnd[i]) * 1e-9;
            previousEnd[i] = end;
        }
        spread += static_cast<double>(lastSignal - firstSignal) * 1e-9;
        if (firstEnd > lastSignal) round += static_cast<double>(firstEnd - lastSignal) * 1e-9;
        gpu += work / static_cast<double>(members.size());
    }
    for (std::size_t i = 0; i < members.size(); ++i) {
        GpuRunner& m = *members[i];
        ++m.steps_;
        m.stepSeconds_ += seconds;
        ++m.batchedSteps_;
        m.batchSpreadSeconds_ += spread;
        m.batchRoundSeconds_ += round;
        m.batchGpuSeconds_ += gpu;
        m.collectStepClocks();
        if (*m.failed_.get()) throw GpuError("the CPU did not deliver the routed experts in time; the GPU gave up waiting");
        m.bridge_->rethrowFailure();
        std::copy_n(m.outLogits_.get(), V, logits[i]->data());
    }
}

// The engine thread serves the expert bridge until the stream's work is done (expert_bridge.h).
void GpuRunner::finishStream() {
    bridge_->pumpUntil([this] {
        const cudaError_t e = cudaStreamQuery(stream_);
        if (e == cudaErrorNotReady) return false;
        TANDEM_CUDA_CHECK(e);
        return true;
    });
}

DecodeProfile GpuRunner::takeProfile() {
    DecodeProfile p;
    p.steps = steps_;
    p.graphLaunches = graphLaunches_;
    double wait = 0, experts = 0;
    const auto cpu = bridge_->takeCpuSeconds();
    for (std::size_t l = 0; l < cpu.size(); ++l) {
        if (!config_.isMoeLayer(static_cast<int>(l)) || gpuExperts_.wholeLayer(static_cast<int>(l)) ||
            !inStage(static_cast<int>(l)))
            continue;
        p.layers.push_back({static_cast<int>(l), layerGpuSeconds_[l], layerOverlapSeconds_[l], layerWaitSeconds_[l], cpu[l]});
        wait += layerWaitSeconds_[l];
        experts += cpu[l];
    }
    runtime::finishProfile(p, stepSeconds_, wait, experts);
    if (p.steps > 0) p.betweenStepsMs = betweenStepsSeconds_ * 1e3 / static_cast<double>(p.steps);
    p.batchedSteps = batchedSteps_;
    if (batchedSteps_ > 0) {
        const double perStep = 1e3 / static_cast<double>(batchedSteps_);
        p.batchSpreadMs = batchSpreadSeconds_ * perStep;
        p.batchRoundMs = batchRoundSeconds_ * perStep;
        p.batchGpuMs = batchGpuSeconds_ * perStep;
    }
    batchedSteps_ = 0;
    batchSpreadSeconds_ = batchRoundSeconds_ = batchGpuSeconds_ = 0;
    steps_ = 0;
    graphLaunches_ = 0;
    stepSeconds_ = 0;
    betweenStepsSeconds_ = 0;
    lastStepEndNs_ = 0;
    layerGpuSeconds_.assign(layerGpuSeconds_.size(), 0.0);
    layerOverlapSeconds_.assign(layerOverlapSeconds_.size(), 0.0);
    layerWaitSeconds_.assign(layerWaitSeconds_.size(), 0.0);
    return p;
}

void GpuRunner::collectStepClocks() {
    if (profileStages_) {
        ++profiledSteps_;
        addStageTimes(stageSeconds_);
    }
    const LayerClock* clock = clocks_.get();
    std::uint64_t mark = clock[config_.numLayers].signalNs;  // the step's start
    if (lastStepEndNs_ && mark > lastStepEndNs_) betweenStepsSeconds_ += static_cast<double>(mark - lastStepEndNs_) * 1e-9;
    lastStepEndNs_ = clock[config_.numLayers].waitEndNs;  // the step's end
    for (std::size_t l = 0; l < links_.size(); ++l) {
        if (links_[l].slot < 0) continue;
        layerGpuSeconds_[l] += static_cast<double>(clock[l].signalNs - mark) * 1e-9;
        layerOverlapSeconds_[l] += static_cast<double>(clock[l].waitBeginNs - clock[l].signalNs) * 1e-9;
        layerWaitSeconds_[l] += static_cast<double>(clock[l].waitEndNs - clock[l].waitBeginNs) * 1e-9;
        mark = clock[l].waitEndNs;
    }
}

void GpuRunner::enqueueStep(int tokens, int rows) {
    stepTokens_ = tokens;
    stepRows_ = rows;
    model::runForward(stageLayers_, *this);
}

void GpuRunner::embed() {
    const model::ModelConfig& c = config_;
    const int tokens = stepTokens_;
    launchStamp(clocks_.devicePointer(), c.numLayers, stream_);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(ids_.get(), inIds_.get(), sizeof(int) * tokens, cudaMemcpyHostToDevice, stream_));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(start_.get(), inStart_.get(), sizeof(int), cudaMemcpyHostToDevice, stream_));
    if (embeds()) {
        launchEmbed(ids_.get(), tokens, weights_.embed.get(), c.hiddenSize, x_.get(), stream_);
    } else {
        // A later stage: the residual rows the stage before it left (it ran these tokens first).
        if (!handIn_) throw GpuError("a GPU stage after the first was given no stage to take its rows from");
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(x_.get(), handIn_, sizeof(float) * static_cast<std::size_t>(tokens) * c.hiddenSize,
                                          cudaMemcpyDefault, stream_));
    }
    normalizedAhead_ = false;
    if (streamingChunk_) {
        streamCount_ = 0;
        streamCopiedBytes_ = 0;
        if (!routedCopies_) issueStreamCopy(0);
    }
}

void GpuRunner::head() {
    const model::ModelConfig& c = config_;
    const int H = c.hiddenSize, tokens = stepTokens_, rows = stepRows_;
    if (!heads()) {  // a stage before the last: its rows go on to the next stage (receiveFrom)
        if (capturingDecode_)
            launchTimestamp(const_cast<std::uint64_t*>(&clocks_.devicePointer()[c.numLayers].waitEndNs), stream_);
        return;
    }
    if (rows == 0) return;
    const float* lastRows = x_.get() + static_cast<long>(tokens - rows) * H;
    if (!normalizedAhead_)
        launchRmsNorm(lastRows, H, weights_.finalNorm.get(), c.rmsNormEps, rows, H, nullptr, 0, hBf16_.get(), H, split_,
                      stream_);
    project(weights_.lmHeadRef(), c.vocabSize, H, hBf16_.get(), H, rows, logits_.get(), c.vocabSize, false);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(outLogits_.get(), logits_.get(), sizeof(float) * rows * c.vocabSize,
                                      cudaMemcpyDeviceToHost, stream_));
    if (capturingDecode_)
        launchTimestamp(const_cast<std::uint64_t*>(&clocks_.devicePointer()[c.numLayers].waitEndNs), stream_);
}

void GpuRunner::project(const MatrixRef& m, int n, int k, const bf16* x, int ldx, int tokens, float* y, int ldy,
                        bool accumulate, const float* bias) {
    if (tokens == 1) {  // the GEMV adds the bias itself
        if (m.eight)
            launchGemv8(m.format, m.eight, m.scales, m.scaleCols, m.blockCols, n, k, x, ldx, split_, y, accumulate, stream_, bias);
        else
            launchGemv(m.values, n, k, x, ldx, split_, y, accumulate, stream_, bias);
        return;
    }
    projectRows(m, n, k, x, ldx, tokens, y, ldy, accumulate);
    if (bias) launchAddBias(y, ldy, tokens, n, bias, stream_);
}

void GpuRunner::projectRows(const MatrixRef& m, int n, int k, const bf16* x, int ldx, int tokens, float* y, int ldy,
                            bool accumulate) {
    if (m.eight) {
        gemm8(blas_, stream_, m.format, m.eight, m.scales, m.scaleCols, m.blockCols, n, k, x, ldx, tokens, split_, y, ldy,
              accumulate, {fp8Rows_.get(), fp8Rows_.size() * sizeof(bf16), fp8Products_.get(), kFp8MaxChunkRows});
        return;
    }
    const bf16* w = m.values;
    if (!split_) {
        gemmBf16(blas_, w, n, k, x, ldx, tokens, y, ldy, accumulate ? 1.0f : 0.0f);
        return;
    }
    gemmBf16(blas_, w, n, k, x, ldx, 2 * tokens, pairs_.get(), n);
    launchPairSum(pairs_.get(), n, tokens, n, y, ldy, accumulate, stream_);
}

void GpuRunner::enqueueMlp(const GpuMlp& mlp, int tokens) {
    const int H = config_.hiddenSize;
    project(mlp.gateUp.ref(), 2 * mlp.inner, H, hBf16_.get(), H, tokens, gateUp_.get(), 2 * mlp.inner, false);
    launchSiluMul(gateUp_.get(), tokens, mlp.inner, act_.get(), split_, stream_);
    project(mlp.down.ref(), H, mlp.inner, act_.get(), mlp.inner, tokens, x_.get(), H, true);
}

}  // namespace tandem::cuda
