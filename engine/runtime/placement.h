#pragma once
// Which routed experts live on the GPU: the one place that decides it, once per model load (issue 23).
// The GPU holds attention, the dense layers and the shared experts; what VRAM is left after those, the
// KV cache and the activations is the budget for routed experts. Filled with what saves the CPU most:
//   1. whole MoE layers, from the last one backwards (as llama.cpp's -ncmoe keeps the first N layers'
//      experts on the CPU): a layer wholly on the GPU needs no hand-over to the CPU at all;
//   2. with what is left, single experts of the remaining layers, the most often routed first (counted
//      while the model is used, ExpertUsage, and kept beside the store), or without counts the next
//      layer's experts in order (with no counts every expert is as likely as another).
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"

namespace tandem::runtime {

// How often each routed expert was chosen: counts[layer][expert] (empty rows for dense layers).
struct ExpertUsage {
    std::vector<std::vector<std::uint64_t>> counts;

    static ExpertUsage empty(const model::ModelConfig& config);
    // Adds one forward pass's choices of MoE layer `layer`: ids [tokens, topK]; returns how many it
    // counted (negative ids and ids out of range are not).
    std::size_t add(int layer, const int* ids, std::size_t count);
    std::uint64_t total() const;

    // STORE/tandem-expert-usage.json: read (missing or unreadable: empty counts, nothing thrown; a file of
    // another model's shape is ignored) and written (atomically; false with `problem` set when the folder
    // cannot be written).
    static ExpertUsage load(const std::filesystem::path& storeDir, const model::ModelConfig& config);
    bool save(const std::filesystem::path& storeDir, std::string& problem) const;
};

// ExpertUsage counted while a model runs, from whichever threads route tokens (the CPU path's forward
// pass, the GPU path's expert bridge), and saved beside the store when the model is unloaded.
class UsageCounter {
public:
    explicit UsageCounter(ExpertUsage start) : usage_(std::move(start)) {}
    // Layer `layer`'s routing ids [count] (negative ids and ids out of range are not counted).
    void add(int layer, const int* ids, std::size_t count);
    ExpertUsage snapshot() const;
    // Choices counted since construction.
    std::uint64_t added() const;

private:
    mutable std::mutex mutex_;
    ExpertUsage usage_;
    std::uint64_t added_ = 0;
};

struct PlacementRequest {
    std::uint64_t expertBytes = 0;  // one routed expert as the GPU holds it
    std::uint64_t budgetBytes = 0;  // VRAM for routed experts
    ExpertUsage usage;              // may be empty
    // Only MoE layers in [firstLayer, endLayer) get experts on the GPU (one GPU's stage of a pipeline,
    // issue 29); endLayer -1: to the last layer.
    int firstLayer = 0;
    int endLayer = -1;
};

struct ExpertPlacement {
    // gpu[layer][expert]: that expert lives on the GPU (empty rows for dense layers).
    std::vector<std::vector<bool>> gpu;
    int wholeLayers = 0;     // MoE layers with every expert on the GPU
    int gpuExperts = 0;      // experts on the GPU, whole layers included
    std::uint64_t gpuBytes = 0;

    bool onGpu(int layer, int expert) const { return gpu[static_cast<std::size_t>(layer)][static_cast<std::size_t>(expert)]; }
    // Every expert of the layer on the GPU (false for dense layers).
    bool wholeLayer(int layer) const;
    // Some but not all of the layer's experts on the GPU.
    bool splitLayer(int layer) const;
    // "12 of 48 MoE layers wholly on the GPU, 300 single experts in 2 more layers (1.23 GB)", or "all on
    // the CPU".
    std::string describe(const model::ModelConfig& config) const;
};

ExpertPlacement planPlacement(const model::ModelConfig& config, const PlacementRequest& request);

// Several GPUs (issue 29, runtime/stage_plan.h): the placements of the stages, each planned with its own
// layer range, as one: the union of their experts, wholeLayers, gpuExperts and gpuBytes summed. The
// placements must be of this model and disjoint (std::logic_error otherwise); none: everything on the CPU.
ExpertPlacement mergePlacements(const model::ModelConfig& config, const std::vector<ExpertPlacement>& placements);

// The layer plan a runner follows with this placement: Expert Deferral hands a layer's deferred experts
// to the CPU's next MoE layer, so a layer wholly on the GPU neither defers nor takes a deferred part, and
// a layer whose next MoE layer is wholly on the GPU does not defer (its deferred part would have nowhere
// to join).
// ModelInfo::expertLayers with every routed expert on the CPU ("" for a model without experts): 'C' for
// each MoE layer, '-' for the others.
std::string cpuExpertLayerMap(const model::ModelConfig& config);

// Prefill streaming's cost model, measured at load (runtime/gpu/gpu_experts.h): while a prompt chunk
// copies a streamed layer's experts over the host link, the CPU computes a share of them in place, so the
// copy is shorter. Both zero: not measured (the whole layer is copied).
struct StreamCost {
    double linkBytesPerSecond = 0;  // host-to-device copies from pinned memory
    std::uint64_t expertBytes = 0;  // one routed expert
    // The CPU's routed experts: (tokens, seconds per token and expert) of a whole layer run at a few
    // chunk sizes, smallest first (the kernels do more per second with more tokens per expert).
    std::vector<std::pair<int, double>> cpu;

    // Seconds per token and expert at `tokens`: linear between the measured sizes, the nearest outside.
    double cpuSecondsPerTokenExpert(int tokens) const;
    // "link 52.1 GB/s, CPU 1.9 us per token-expert at 512 tokens"
    std::string describe() const;
};

// How many of a streamed layer's experts (the first ones) the CPU computes for a chunk of `tokens`
// tokens, the rest being copied to the GPU. The copy of a layer starts with the layer before it, the
// CPU's share once the GPU has done the layer's attention (`gpuFirstSeconds`, as measured on the last
// chunk, or 0), and a share costs the hand-over's copies of the chunk's rows there and back
// (`handOverSeconds`, which a layer computed wholly on the GPU does not pay). So the share is the one at
// which gpuFirstSeconds + handOverSeconds + share x tokens x seconds per token-expert equals
// (experts - share) x expertBytes / linkBytesPerSecond, taken down by a tenth; 0 without a measured
// cost, or when the layer would not be at least 5% faster than with the link alone.
int streamCpuExperts(const StreamCost& cost, int experts, int tokens, double gpuFirstSeconds = 0, double handOverSeconds = 0);

// What streamed chunks showed about the CPU's share, kept for the model's life (every session's runner
// reads and adds to it; the engine thread only): the streamed layers of a chunk timed as a whole. A share
// that made them slower than the link alone (as measured for chunks of that size, else predicted) is not
// used again for chunks of that size, since the model leaves out costs that grow with the chunk (the
// CPU's sum read back over the link beside the copy). Sizes are taken by power-of-two bucket. The
// model's first streamed chunk is not judged: it touches the CPU's expert pages and the GPU's kernels for
// the first time (measured on the H200: a 512-token share that gains 39% when warm looked slower than
// the link alone on the first chunk).
class StreamShareVerdicts {
public:
    // A chunk of `tokens` with `share` experts a layer on the CPU took `secondsPerLayer` per streamed layer;
    // `predictedLinkAlone`: a layer's copy at the link's speed, used until the link alone was timed.
    void record(int tokens, int share, double secondsPerLayer, double predictedLinkAlone);
    bool vetoed(int tokens) const;

    static constexpr double kVetoRatio = 0.98;  // slower than this share of the link alone: dropped
    static int bucket(int tokens);  // the power of two at or above

private:
    bool warm_ = false;  // a chunk was recorded (and not judged) before
    std::vector<int> vetoed_;
    std::vector<std::pair<int, double>> linkAlone_;  // (bucket, seconds per streamed layer)
};

// How prefill streaming copies a streamed layer's experts for a chunk of `tokens`: ahead (the whole
// layer, during the layer before it, so the copy overlaps the GPU's work) or routed (only the experts the
// chunk's tokens chose, after the layer's router: fewer bytes, but the link waits for the router and the
// GPU for the copy). Every streamed chunk counts the experts its tokens chose; routed copies are tried for
// a chunk size whose tokens chose fewer than kMaxRouted of the experts, and kept while they are the
// faster, timed as the streamed layers of a chunk. By power-of-two bucket of chunk sizes; the model's
// first chunk (cold) is counted but not timed. The engine thread only.
class StreamCopyChoice {
public:
    bool routed(int tokens) const;
    // The share of the streamed layers' experts the last chunk of this size chose (1 before any).
    double routedShare(int tokens) const;
    // A chunk of `tokens` chose `routedShare` of the streamed layers' experts; its streamed layers took
    // `secondsPerLayer` with routed copies or not. `wholeLayerSeconds`: a whole layer's copy at the
    // link's speed, what routed copies are held against while whole layers were not timed.
    void record(int tokens, bool routedCopies, double routedShare, double secondsPerLayer, double wholeLayerSeconds = 0);

    static constexpr double kMaxRouted = 0.9;

private:
    struct Bucket {
        int size = 0;
        double routedShare = 1;
        double seconds[2] = {0, 0};  // per streamed layer: ahead, routed (0: not timed)
        double predictedWhole = 0;   // whole layers' copy at the link's speed
    };
    const Bucket* find(int tokens) const;
    Bucket& bucketFor(int tokens);  // found or added
    bool warm_ = false;
    std::vector<Bucket> buckets_;
};

std::vector<model::LayerPlan> placedLayers(const std::vector<model::LayerPlan>& layers, const ExpertPlacement& placement);

// The same plan for one stage of a pipeline by layer (issue 29), layers [firstLayer, endLayer): deferral
// does not cross the stage's edges (the layer the deferred experts would join runs on another GPU), so a
// layer whose deferred part would join a layer on the other side of an edge does not defer, and that
// layer takes none. Every layer keeps its entry (indexed by layer).
std::vector<model::LayerPlan> stageLayers(const std::vector<model::LayerPlan>& layers, int firstLayer, int endLayer);

}  // namespace tandem::runtime
