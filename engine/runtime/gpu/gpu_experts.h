#pragma once
// The routed experts the placement plan (runtime/placement.h) puts on the GPU, copied from the packed
// layout as they are (the store's bytes or the CPU's packed experts) and computed there by
// cuda/expert_kernels.h; shared by the sessions' runners like GpuWeights. A MoE layer is wholly on the
// GPU (router, routed and shared experts there, no hand-over to the CPU), split (the GPU computes the
// tokens routed to its experts while the CPU computes the others, and the two sums are added), or wholly
// on the CPU.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/expert_kernels.h"
#include "io/expert_layout.h"
#include "model/config.h"
#include "model/routed_experts.h"
#include "runtime/placement.h"

namespace tandem::cuda {

// Host memory registered with CUDA (pinned) for as long as this lives.
class HostRegistration {
public:
    HostRegistration() = default;
    explicit HostRegistration(void* p) : p_(p) {}
    ~HostRegistration();
    HostRegistration(HostRegistration&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    HostRegistration& operator=(HostRegistration&& o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }

private:
    void* p_ = nullptr;
};

struct GpuExperts {
    GpuExpertLayout layout;
    runtime::ExpertPlacement placement;
    // The layer plan with this placement (runtime::placedLayers): what the runner and its bridge follow.
    std::vector<model::LayerPlan> layers;
    std::vector<DeviceBuffer<std::uint8_t>> memory;        // per layer: its GPU experts back to back, or empty
    // Per layer with GPU experts: each expert's device address (null for the CPU's experts), or empty;
    // hostTable the same addresses in host memory.
    std::vector<DeviceBuffer<const std::uint8_t*>> table;
    std::vector<std::vector<const std::uint8_t*>> hostTable;

    // Prefill streaming: the layers the CPU holds, pinned, so that a large prefill chunk copies each one
    // to the GPU (two staging buffers of streamLayerBytes per runner, the next layer's copy overlapping
    // this one's computation) instead of computing it on the CPU. streamLayerBytes 0: no streaming.
    std::uint64_t streamLayerBytes = 0;
    std::vector<const std::uint8_t*> hostLayers;  // per layer: its pinned experts, or null
    std::vector<HostRegistration> pinned;
    std::string streamNote;  // why prefill does not stream, when it was asked to
    // What a streamed layer costs over the link and on the CPU (measured at load, measureStreamCost): a
    // chunk's CPU computes the first runtime::streamCpuExperts of each streamed layer's experts while the
    // rest are copied.
    runtime::StreamCost streamCost;
    // What streamed chunks showed of the CPU's share, with the whole layers copied ahead [0] and with
    // routed copies [1], and of the two ways to copy (every runner of the model adds to them).
    mutable runtime::StreamShareVerdicts shareVerdicts[2];
    mutable runtime::StreamCopyChoice copyChoice;

    // Every routed expert of the layer on the GPU: no hand-over to the CPU.
    bool wholeLayer(int layer) const {
        return static_cast<std::size_t>(layer) < placement.gpu.size() && placement.wholeLayer(layer);
    }
    // Some of the layer's experts on the GPU (all of them, or a split layer's share).
    bool holdsSome(int layer) const {
        return static_cast<std::size_t>(layer) < table.size() && static_cast<bool>(table[static_cast<std::size_t>(layer)]);
    }
    bool streams(int layer) const {
        return streamLayerBytes > 0 && static_cast<std::size_t>(layer) < hostLayers.size() &&
               hostLayers[static_cast<std::size_t>(layer)] != nullptr;
    }
    bool any() const { return placement.gpuExperts > 0 || streamLayerBytes > 0; }
};

// One routed expert as the GPU holds it (the packed layout's stride).
std::uint64_t gpuExpertBytes(const io::ExpertLayout& layout);

// Copies the experts the placement puts on the GPU; layerBytes(l) gives layer l's packed experts
// back to back (runtime::PackedExperts::layerBytes). Throws tandem::Error if the GPU runs out of memory.
GpuExperts uploadExperts(const model::ModelConfig& config, const io::ExpertLayout& layout,
                         const std::function<const std::byte*(int layer)>& layerBytes, runtime::ExpertPlacement placement);

// Pins the layers the placement leaves on the CPU for prefill streaming (cudaHostRegister, read-only,
// portable: every GPU may copy from them); only layers in [firstLayer, endLayer) (endLayer -1: to the
// last), a pipeline stage's own. If the memory cannot be pinned, leaves streaming off and says why in
// streamNote.
void enableStreaming(GpuExperts& g, const model::ModelConfig& config, const io::ExpertLayout& layout,
                     const std::function<const std::byte*(int layer)>& layerBytes, int firstLayer = 0, int endLayer = -1);

// Measures g.streamCost (streaming enabled): the link copying a streamed layer from pinned memory to
// the GPU, and `cpu` computing a whole streamed layer at each of `tokens` (random routing, after one
// untimed run). Leaves the link at 0 (no CPU share) if the GPU has no room for the copy's target.
void measureStreamCost(GpuExperts& g, const model::ModelConfig& config, model::RoutedExperts& cpu,
                       const std::vector<int>& tokens);

// No experts on the GPU: the model's own layer plan.
GpuExperts noGpuExperts(const model::ModelConfig& config);

}  // namespace tandem::cuda
