#pragma once
// The routed experts the placement plan (runtime/placement.h) puts on the GPU, copied from the packed
// layout as they are (the store's bytes or the CPU's packed experts) and computed there by
// cuda/expert_kernels.h; shared by the sessions' runners like GpuWeights. Whole MoE layers for now: a
// layer is wholly on the GPU (router, routed and shared experts there, no hand-over to the CPU) or
// wholly on the CPU.
#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/expert_kernels.h"
#include "io/expert_layout.h"
#include "model/config.h"
#include "runtime/placement.h"

namespace tandem::cuda {

struct GpuExperts {
    GpuExpertLayout layout;
    runtime::ExpertPlacement placement;
    // The layer plan with this placement (runtime::placedLayers): what the runner and its bridge follow.
    std::vector<model::LayerPlan> layers;
    std::vector<DeviceBuffer<std::uint8_t>> memory;        // per layer: its experts back to back, or empty
    std::vector<DeviceBuffer<const std::uint8_t*>> table;  // per layer: each expert's device address, or empty

    bool onGpu(int layer) const {
        return static_cast<std::size_t>(layer) < table.size() && static_cast<bool>(table[static_cast<std::size_t>(layer)]);
    }
    bool any() const { return placement.gpuExperts > 0; }
};

// One routed expert as the GPU holds it (the packed layout's stride).
std::uint64_t gpuExpertBytes(const io::ExpertLayout& layout);

// Copies the layers the placement puts wholly on the GPU; layerBytes(l) gives layer l's packed experts
// back to back (runtime::PackedExperts::layerBytes). Throws tandem::Error if the GPU runs out of memory.
GpuExperts uploadExperts(const model::ModelConfig& config, const io::ExpertLayout& layout,
                         const std::function<const std::byte*(int layer)>& layerBytes, runtime::ExpertPlacement placement);

// No experts on the GPU: the model's own layer plan.
GpuExperts noGpuExperts(const model::ModelConfig& config);

}  // namespace tandem::cuda
