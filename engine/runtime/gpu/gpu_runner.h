#pragma once
// One conversation on the hybrid GPU path: the GPU KV cache, activation buffers, the CUDA stream and
// cuBLAS handle, the pinned slots the routed experts travel through, and the decode-step CUDA graph.
#include <cublas_v2.h>

#include <memory>
#include <vector>

#include "cuda/device_buffer.h"
#include "runtime/gpu/expert_bridge.h"
#include "runtime/gpu/gpu_experts.h"
#include "runtime/gpu/gpu_weights.h"
#include "cuda/host_sync.h"
#include "model/forward.h"
#include "runtime/expert_batcher.h"
#include "runtime/model_runner.h"

namespace tandem::cuda {

// One stage of a pipeline by layer (issue 29): the runner runs layers [firstLayer, endLayer) of the model.
// The first stage embeds the tokens; a later one starts from the residual rows of the stage before it
// (GpuRunner::receiveFrom); only the last applies the final norm and the head. Deferral does not cross a
// stage's edge (a layer whose deferred experts would join a layer of another stage does not defer).
struct GpuStage {
    int firstLayer = 0;
    int endLayer = -1;  // -1: to the model's last layer
    int device = -1;    // the CUDA device it runs on (cuda/device_scope.h); -1: the current one
};

// The GPU's side of the forward pass (model/forward.h): each block enqueues its kernels on the stream, so
// a whole pass (and, captured once, a decode step's graph) is runForward over the layer plan.
class GpuRunner : public runtime::ModelRunner, private model::ForwardPass {
public:
    // Prompts longer than `maxChunk` tokens are prefilled in chunks of that size.
    // `gpuExperts`: the MoE layers whose routed experts the GPU holds (computed here, no hand-over to the
    // CPU); `experts` computes the others on the CPU.
    // `usage`, when not null, counts the routing of the layers handed to the CPU.
    GpuRunner(const model::ModelConfig& config, std::unique_ptr<model::QueuedRoutedExperts> experts, const GpuWeights& weights,
              const GpuExperts& gpuExperts, const model::Rope& rope, int capacity, int maxChunk,
              runtime::UsageCounter* usage = nullptr, GpuStage stage = {}, KvCacheType kvCache = KvCacheType::Float32);
    ~GpuRunner() override;

    // A stage after the first: its passes start from `previous`'s residual rows, which the caller has
    // run for the same tokens first (same device, or one the previous can reach).
    void receiveFrom(const GpuRunner& previous) { handIn_ = previous.x_.get(); }
    bool embeds() const { return firstLayer_ == 0; }
    bool heads() const { return endLayer_ == config_.numLayers; }
    // The most tokens forward() runs in one pass (more are run in chunks of this size).
    int chunkLimit(bool allLogits) const;

    void forward(std::span<const int> tokens, int start, const model::ForwardOptions& options,
                 std::vector<float>& logits) override;
    // Several sequences' decode steps at once (issue 27): each member's graph on its own stream, the
    // routed experts of every CPU layer as one computation of all members' tokens (runtime::ExpertBatcher),
    // this thread serving every member's bridge. Members are GpuRunners of this backend (the same
    // batcher); anything else runs one after another.
    void decodeBatch(std::span<ModelRunner* const> runners, std::span<const int> tokens, std::span<const int> positions,
                     const model::ForwardOptions& options, std::span<std::vector<float>* const> logits) override;
    // The backend's batcher, whose view this runner's experts are (null: no batched decode).
    void setBatcher(runtime::ExpertBatcher* batcher) { batcher_ = batcher; }

    DecodeProfile takeProfile() override;

    // Device bytes a runner allocates for this capacity and chunk size (eightBitWeights: some projection is
    // FP8 or int8, GpuWeights::hasEightBit, whose prefill needs a widening buffer; `experts`: the layout of
    // routed experts on the GPU, whose kernels need scratch, or null; kvCache: the KV cache's type, Int8 with
    // one layer's float32 rows beside it for the kernels that read float32).
    static std::uint64_t deviceBytes(const model::ModelConfig& config, bool eightBitWeights, int capacity, int maxChunk,
                                     const GpuExpertLayout* experts = nullptr, KvCacheType kvCache = KvCacheType::Float32);
    // Of them, what the 8-bit cache's one layer of float32 rows takes (0 for a float32 cache): a pipeline's
    // stages count it with each runner's activations, not with the layers' caches.
    static std::uint64_t floatRowsBytes(const model::ModelConfig& config, int capacity, KvCacheType kvCache);
    static bool splitPrecision();

private:
    struct MoeLayerLink {
        int slot = -1;      // which of the two slots this MoE layer uses
        int previous = -1;  // the slot of the layer whose deferred part joins here (LayerPlan::deferredFrom)
    };

    void enqueueSignal(int layer);
    void enqueueWait(int layer);
    // After a decode step: adds the step's per-layer GPU and wait times from the clocks.
    void collectStepClocks();
    void finishStream();
    // TANDEM_GPU_PROFILE=1: GPU timestamps between the stages of each MoE layer of a decode step and of a
    // prefill chunk, summed per stage and printed when the runner goes away (a diagnostic for tuning the
    // GPU side).
    void stamp(int layer, int stage);
    void printStageProfile() const;
    void addStageTimes(std::vector<double>& seconds) const;

    // Enqueues the whole model for `tokens` tokens whose ids and start are in the pinned inputs;
    // `rows` logits rows (the last ones) end up in the pinned logits.
    void enqueueStep(int tokens, int rows);
    // model::ForwardPass, for the step enqueueStep set up (stepTokens_, stepRows_).
    void embed() override;
    void attentionBlock(const model::LayerPlan& layer) override;
    void feedForwardBlock(const model::LayerPlan& layer) override;
    void head() override;
    void enqueueGqa(const model::LayerPlan& layer, int tokens);
    void enqueueMla(const model::LayerPlan& layer, int tokens);
    // An MLA prompt chunk's attention in the non-absorbed form (mla_prefill.cu): the context's latent
    // decompressed by kv_b_proj, mlaPassRows_ positions a pass, each pass then attended by the flash kernel.
    void enqueueMlaFlash(const GpuLayer& w, int layer, int tokens);
    void enqueueMlp(const GpuMlp& mlp, int tokens);  // from hBf16, accumulated into x
    // A MoE layer computed on the GPU: norm, router, routed experts (expert_kernels.h; `table`: each
    // expert's device address) and shared experts; the routed experts after `copied` when not null (a
    // streamed layer).
    void enqueueGpuMoe(const model::LayerPlan& layer, const std::uint8_t* const* table, cudaEvent_t copied = nullptr);
    // Decode's norm + router + routing kernel (launchRouterDecode) fits this model.
    bool routesInOneKernel() const;
    // Its arguments for MoE layer l, routing into routeIds_ / routeWeights_ with no hand-over; the
    // normalized row also to hF32 when not null, and to hBf16 for the shared experts.
    RouteDecodeArgs routeDecodeArgs(int l, float* hF32);
    // gpt-oss: layer l's expert biases and activation for the GPU's expert kernels (none otherwise).
    ExpertEpilogue expertEpilogue(int l) const;
    // A MoE layer handed over to the CPU: norm and router, the slot and its signal, the shared experts,
    // the GPU's own share of the routed experts when `gpuTable` is not null (a split layer's held experts,
    // or a streamed layer's copied ones, computed after `copied` when not null), then the wait for the
    // CPU's sum and the add.
    void handOverMoe(const model::LayerPlan& layer, const std::uint8_t* const* gpuTable, cudaEvent_t copied);
    // Prefill streaming: copies the i-th layer of streamOrder_ into staging buffer i % 2 on copyStream_
    // (all but the CPU's share).
    void issueStreamCopy(int i);
    // Routed copies (routedCopies_), streamed layer streamCount_: after its router, which experts the
    // chunk chose (from the routing `ids`, into routedFlags_; counted whichever way the chunk copies) ...
    void markRouted(const int* ids);
    // ... and, once the router is done (the engine thread waits for it), the copy of those the GPU
    // computes into the staging buffer, consecutive experts in one copy, then copied_.
    void issueRoutedCopy();
    // Before a pass of `tokens` tokens (streamingChunk_ set): the CPU's share of each streamed layer
    // (runtime::streamCpuExperts, or Tuning::gpuStreamCpuPercent), told to the bridge, and the streamed
    // layers' expert tables for it.
    void prepareStreamShare(int tokens);
    // Captures the decode step's graph the first time.
    void ensureDecodeGraph();
    void ensureBatchGraph();  // decodeBatch's: unchained (gpu_runner.cpp says why)
    void captureDecodeGraph(cudaGraphExec_t& exec, bool chained);
    // y (=, or += with accumulate) W x (+ bias, n floats, when not null) for `tokens` rows of a bf16 GEMM
    // input (and its lo rows when split). A decode step's GEMV adds the bias in its own epilogue.
    void project(const MatrixRef& w, int n, int k, const bf16* x, int ldx, int tokens, float* y, int ldy, bool accumulate,
                 const float* bias = nullptr);
    // project's products of several rows (GEMM), without the bias.
    void projectRows(const MatrixRef& w, int n, int k, const bf16* x, int ldx, int tokens, float* y, int ldy, bool accumulate);

    const model::ModelConfig& config_;
    const GpuWeights& weights_;
    const GpuExperts& gpuExperts_;
    // gpuExperts_.layers: who defers with this placement (and the stage's edges), indexed by layer.
    std::vector<model::LayerPlan> layers_;
    int firstLayer_ = 0, endLayer_ = 0;           // the stage (GpuStage)
    int device_ = -1;                             // GpuStage::device: every CUDA call runs there
    std::vector<model::LayerPlan> stageLayers_;  // layers_ [firstLayer_, endLayer_): what a pass runs
    const float* handIn_ = nullptr;              // a later stage: the previous stage's residual rows
    bool inStage(int layer) const { return layer >= firstLayer_ && layer < endLayer_; }
    // The norm a decode step's last kernel of layer l applies ahead: the next layer's input norm, the
    // final norm after the last layer, none at the end of a stage before the last (the next stage
    // normalizes its own rows).
    const float* followingNorm(int layer) const;
    RopeParams rope_;
    bool split_;  // split-precision GEMM inputs (kernels.h); Tuning::gpuSplitPrecision
    int stepTokens_ = 0, stepRows_ = 0;  // the step being enqueued
    // Kernels of a step launched chained (chained_launch.cuh) on GPUs that support it;
    // Tuning::gpuChain false turns it off, for A/B runs.
    bool chained_ = false;
    // Per MoE layer, the next layer's weights its wait asks L2 for (host_sync.h).
    std::vector<L2Prefetch> prefetch_;
    int capacity_;
    int maxChunk_;

    cudaStream_t stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    DeviceBuffer<char> blasWorkspace_;
    cudaGraphExec_t decodeGraph_ = nullptr;
    cudaGraphExec_t batchGraph_ = nullptr;
    // decodeBatch's clocks across its members (DecodeProfile::batch*), summed over steps, in seconds.
    long batchedSteps_ = 0;
    double batchSpreadSeconds_ = 0, batchRoundSeconds_ = 0, batchGpuSeconds_ = 0;
    long graphLaunches_ = 0;
    long steps_ = 0;
    double stepSeconds_ = 0;
    // GPU idle between consecutive decode steps (the host reading logits, sampling, launching), from
    // the GPU clock stamps at each step's start and end (spin mode only).
    double betweenStepsSeconds_ = 0;
    std::uint64_t lastStepEndNs_ = 0;  // 0: the next step follows something else (prefill, a new call)

    // Inputs and outputs through pinned memory, so graph nodes can copy them.
    PinnedBuffer<int> inIds_;
    PinnedBuffer<int> inStart_;
    PinnedBuffer<float> outLogits_;
    DeviceBuffer<int> ids_;
    DeviceBuffer<int> start_;

    // KV cache per layer.
    std::vector<DeviceBuffer<float>> cacheA_, cacheB_;  // GQA: keys, values; MLA: latent, rotary key
    // The 8-bit KV cache (EngineOptions::kvCache = Int8) instead: each layer's codes and scales
    // (kernels.h, Int8Rows), and one layer's rows as float32 for the kernels that read float32 (prompt
    // chunks; decode where no kernel reads the codes), dequantized before them.
    bool int8Cache_ = false;
    std::vector<DeviceBuffer<std::int8_t>> codesA_, codesB_;
    std::vector<DeviceBuffer<float>> scalesA_, scalesB_;
    DeviceBuffer<float> floatRowsA_, floatRowsB_;
    Int8Rows int8Rows(int layer, bool b);
    // The layer's 8-bit rows [0, position + tokens) (from the window's first with window > 0) as float32 into
    // rowsA / rowsB (either may be null: that stream is left).
    void dequantizeLayer(int layer, int tokens, int window, float* rowsA, float* rowsB);

    // Activations for up to maxChunk tokens.
    DeviceBuffer<float> x_, hF32_, qkv_, q_, comb_, qLatent_, gateUp_, routerLogits_, logits_, pairs_;
    DeviceBuffer<bf16> hBf16_, qa_, qNope_, ctx_, attnOut_, act_;
    DeviceBuffer<int> routeIds_;
    // FP8 weights in prefill: a chunk of rows widened to bf16 hi and lo rows, and its GEMM's products.
    DeviceBuffer<bf16> fp8Rows_;
    DeviceBuffer<float> fp8Products_;
    int decodeSplits_ = 1;            // parts of a decode step's context (decodeAttentionSplits), <= 64 (MLA: 256)
    DeviceBuffer<float> attnPartials_;
    DeviceBuffer<unsigned> attnPartsDone_;  // decode's attention: parts finished per head (kernels.h)
    // MLA prompts on the flash kernel (Tuning::gpuFlashPrefill, where it serves the widths): a pass's
    // latent rows as a bf16 GEMM input, their keys and values [position][heads][nope + v], and the
    // running softmax between passes (when a pass cannot hold the whole capacity).
    bool mlaFlash_ = false;
    int mlaPassRows_ = 0;
    DeviceBuffer<bf16> mlaLatent_;
    DeviceBuffer<float> mlaKv_, mlaState_;
    DeviceBuffer<float> routeWeights_;
    // Routed experts on the GPU: the grouped routing (launchGroupRoutes) and the kernels' scratch.
    DeviceBuffer<int> groupStart_, pairToken_, pairGroup_, slotPair_;
    DeviceBuffer<float> pairWeight_;
    DeviceBuffer<const std::uint8_t*> slotExperts_;  // decode of a GPU-held layer: each slot's expert
    DeviceBuffer<unsigned> expertsDone_;             // ... and its down kernel's blocks done (DecodeNorm)
    int prefillSplits_ = 2;  // bf16 terms of the prefill expert kernels' activations (Tuning::gpuExpertSplits)
    DeviceBuffer<char> expertScratch_;
    // Prefill streaming (gpu_experts.h): the CPU's layers in order, two staging buffers with their
    // expert tables, the copy stream and its events.
    std::vector<int> streamOrder_;
    DeviceBuffer<std::uint8_t> stage_[2];
    // [streamOrder_.size()][numExperts]: each streamed layer's expert addresses for the current share
    // (prepareStreamShare), built for streamTablesShare_.
    DeviceBuffer<const std::uint8_t*> streamTables_;
    int streamTablesShare_ = -1;
    int streamCpuExperts_ = 0;  // the CPU's share of each streamed layer in this chunk: its first experts
    int bridgeGpuFrom_ = -1;    // what the bridge was last told (ExpertBridge::setGpuFrom)
    bool readDeferred_ = true;  // the pass being enqueued adds each layer's deferred part (ExpertSlot)
    // Events on the first streamed layer of a streamed chunk: its attention's start, the MoE block's start
    // and (with a CPU share) the signal. Per token: the time the CPU's share waits for, and the
    // hand-over's copies there and back, which a share pays (runtime::streamCpuExperts; the latter
    // first measured in the constructor).
    cudaEvent_t attentionTimed_[3] = {};
    double gpuFirstSecondsPerToken_ = 0;
    double handOverSecondsPerToken_ = 0;
    // The streamed layers of a chunk timed as a whole (attentionTimed_[0] to streamEnd_), for
    // GpuExperts::shareVerdicts (runtime::StreamShareVerdicts).
    cudaEvent_t streamEnd_ = nullptr;
    void judgeStreamShare(int tokens);
    cudaStream_t copyStream_ = nullptr;
    cudaEvent_t copied_[2] = {}, used_[2] = {};
    bool streamingChunk_ = false;  // the prefill chunk being enqueued streams
    bool routedCopies_ = false;    // ... copying only the routed experts (runtime::StreamCopyChoice)
    PinnedBuffer<int> routedFlags_;  // mapped, [streamOrder_.size()][numExperts]: chosen by the chunk
    cudaEvent_t routed_ = nullptr;   // the streamed layer's routing done (routed copies)
    std::uint64_t streamCopiedBytes_ = 0;  // by routed copies in this chunk
    // The streamed layers of a chunk: the share of their experts the chunk chose, for copyChoice.
    double chunkRoutedShare() const;
    int streamCount_ = 0;          // layers of streamOrder_ enqueued in this chunk

    // Routed experts: two pinned slots, used by alternate MoE layers, and their signals.
    std::vector<PinnedBuffer<float>> slotFloats_;
    std::vector<PinnedBuffer<int>> slotInts_;
    ExpertSlot slots_[2];
    PinnedBuffer<SlotControl> controls_;  // mapped
    PinnedBuffer<LayerClock> clocks_;     // mapped, numLayers + 1
    PinnedBuffer<int> failed_;            // mapped: a wait kernel gave up
    DeviceBuffer<unsigned> routerCounter_;   // decode's router kernel: blocks done (kernels.h)
    DeviceBuffer<std::uint64_t> counters_;  // submissions per slot, counted by the GPU
    std::vector<MoeLayerLink> links_;     // per layer, at stable addresses for the graph's host nodes
    std::vector<double> layerGpuSeconds_, layerOverlapSeconds_, layerWaitSeconds_;
    std::unique_ptr<ExpertBridge> bridge_;
    runtime::ExpertBatcher* batcher_ = nullptr;
    bool profileStages_ = false;
    bool capturingDecode_ = false;
    // The last wait kernel enqueued already wrote the norm that comes next into hBf16 (decode).
    bool normalizedAhead_ = false;
    PinnedBuffer<std::uint64_t> stageClock_;  // mapped: [numLayers][kStages]
    std::vector<double> stageSeconds_;
    long profiledSteps_ = 0;
    bool profilingPrefill_ = false;            // stamps in the prefill chunk being enqueued
    std::vector<double> prefillStageSeconds_;  // the same for prefill chunks
    long prefillTokens_ = 0;
};

}  // namespace tandem::cuda
