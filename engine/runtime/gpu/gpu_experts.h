#pragma once
// The routed experts the placement plan (runtime/placement.h) puts on the GPU, copied from the packed
// layout as they are (the store's bytes or the CPU's packed experts) and computed there by
// cuda/expert_kernels.h; shared by the sessions' runners like GpuWeights. Whole MoE layers for now: a
// layer is wholly on the GPU (router, routed and shared experts there, no hand-over to the CPU) or
// wholly on the CPU.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/expert_kernels.h"
#include "io/expert_layout.h"
#include "model/config.h"
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
    std::vector<DeviceBuffer<std::uint8_t>> memory;        // per layer: its experts back to back, or empty
    std::vector<DeviceBuffer<const std::uint8_t*>> table;  // per layer: each expert's device address, or empty

    // Prefill streaming: the layers the CPU holds, pinned, so that a large prefill chunk copies each one
    // to the GPU (two staging buffers of streamLayerBytes per runner, the next layer's copy overlapping
    // this one's computation) instead of computing it on the CPU. streamLayerBytes 0: no streaming.
    std::uint64_t streamLayerBytes = 0;
    std::vector<const std::uint8_t*> hostLayers;  // per layer: its pinned experts, or null
    std::vector<HostRegistration> pinned;
    std::string streamNote;  // why prefill does not stream, when it was asked to

    bool onGpu(int layer) const {
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

// Copies the layers the placement puts wholly on the GPU; layerBytes(l) gives layer l's packed experts
// back to back (runtime::PackedExperts::layerBytes). Throws tandem::Error if the GPU runs out of memory.
GpuExperts uploadExperts(const model::ModelConfig& config, const io::ExpertLayout& layout,
                         const std::function<const std::byte*(int layer)>& layerBytes, runtime::ExpertPlacement placement);

// Pins the layers the placement leaves on the CPU for prefill streaming (cudaHostRegister, read-only);
// if the memory cannot be pinned, leaves streaming off and says why in streamNote.
void enableStreaming(GpuExperts& g, const model::ModelConfig& config, const io::ExpertLayout& layout,
                     const std::function<const std::byte*(int layer)>& layerBytes);

// No experts on the GPU: the model's own layer plan.
GpuExperts noGpuExperts(const model::ModelConfig& config);

}  // namespace tandem::cuda
