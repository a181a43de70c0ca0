#include "runtime/gpu/gpu_experts.h"

#include <cuda_runtime.h>

#include <string>

#include "tandem/byte_size.h"
#include "tandem/error.h"

namespace tandem::cuda {

std::uint64_t gpuExpertBytes(const io::ExpertLayout& layout) { return layout.expertBytes; }

GpuExperts noGpuExperts(const model::ModelConfig& config) {
    GpuExperts g;
    g.placement = runtime::planPlacement(config, {});
    g.layers = config.layers;
    return g;
}

GpuExperts uploadExperts(const model::ModelConfig& config, const io::ExpertLayout& layout,
                         const std::function<const std::byte*(int layer)>& layerBytes, runtime::ExpertPlacement placement) {
    GpuExperts g;
    g.layout = gpuExpertLayout(layout);
    g.layers = runtime::placedLayers(config.layers, placement);
    g.memory.resize(static_cast<std::size_t>(config.numLayers));
    g.table.resize(static_cast<std::size_t>(config.numLayers));
    const auto E = static_cast<std::size_t>(config.numExperts);
    const std::size_t layerSize = E * layout.expertBytes;
    for (const model::LayerPlan& layer : config.layers) {
        if (!layer.moe || !placement.wholeLayer(layer.index)) continue;
        const auto l = static_cast<std::size_t>(layer.index);
        const std::byte* host = layerBytes(layer.index);
        if (!host) throw Error("layer " + std::to_string(layer.index) + " has no packed experts to put on the GPU");
        try {
            g.memory[l] = DeviceBuffer<std::uint8_t>(layerSize);
        } catch (const Error&) {
            cudaGetLastError();
            throw Error("the GPU ran out of memory putting the routed experts of layer " + std::to_string(layer.index) +
                        " there (" + formatBytes(layerSize) + "); give them less GPU memory (--gpu-memory)");
        }
        // A layer of a mapped store is read from disk here the first time: ~0.1-1 GB, one copy each.
        TANDEM_CUDA_CHECK(cudaMemcpy(g.memory[l].get(), host, layerSize, cudaMemcpyHostToDevice));
        std::vector<const std::uint8_t*> addresses(E);
        for (std::size_t e = 0; e < E; ++e) addresses[e] = g.memory[l].get() + e * layout.expertBytes;
        g.table[l] = DeviceBuffer<const std::uint8_t*>(E);
        TANDEM_CUDA_CHECK(cudaMemcpy(g.table[l].get(), addresses.data(), E * sizeof(addresses[0]), cudaMemcpyHostToDevice));
    }
    g.placement = std::move(placement);
    return g;
}

}  // namespace tandem::cuda
