#include "runtime/gpu/gpu_experts.h"

#include <cuda_runtime.h>

#include <string>

#include <unistd.h>

#include "tandem/byte_size.h"
#include "tandem/error.h"

namespace tandem::cuda {

std::uint64_t gpuExpertBytes(const io::ExpertLayout& layout) { return layout.expertBytes; }

HostRegistration::~HostRegistration() {
    if (p_) cudaHostUnregister(p_);
}

void enableStreaming(GpuExperts& g, const model::ModelConfig& config, const io::ExpertLayout& layout,
                     const std::function<const std::byte*(int layer)>& layerBytes) {
    const std::size_t layerSize = static_cast<std::size_t>(config.numExperts) * layout.expertBytes;
    // Pinned pages cannot be swapped or dropped from the page cache: pin at most 3/4 of the machine's RAM.
    std::uint64_t cpuBytes = 0;
    for (const model::LayerPlan& layer : config.layers)
        if (layer.moe && !g.onGpu(layer.index)) cpuBytes += layerSize;
    const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    const std::uint64_t ram = pages > 0 && pageSize > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(pageSize) : 0;
    if (ram == 0 || cpuBytes > ram / 4 * 3) {
        g.streamNote = "prefill computes the CPU's experts there: pinning their " + formatBytes(cpuBytes) +
                       " for copies to the GPU would lock more than 3/4 of the " + formatBytes(ram) + " of RAM";
        return;
    }
    std::vector<const std::uint8_t*> host(static_cast<std::size_t>(config.numLayers), nullptr);
    std::vector<HostRegistration> pinned;
    for (const model::LayerPlan& layer : config.layers) {
        if (!layer.moe || g.onGpu(layer.index)) continue;
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(layerBytes(layer.index));
        // The layer's experts are their own allocation or mapping (a store's experts-LLL.bin, or memory
        // packed at load), so registering whole pages touches no other layer's.
        void* first = const_cast<std::uint8_t*>(bytes);
        const cudaError_t e = cudaHostRegister(first, layerSize, cudaHostRegisterPortable | cudaHostRegisterReadOnly);
        if (e != cudaSuccess && e != cudaErrorHostMemoryAlreadyRegistered) {
            cudaGetLastError();
            g.streamNote = std::string("prefill computes the CPU's experts there: their memory could not be pinned for "
                                       "copies to the GPU (") + cudaGetErrorString(e) + ")";
            return;  // `pinned` unregisters what was registered
        }
        if (e == cudaSuccess) pinned.emplace_back(first);
        host[static_cast<std::size_t>(layer.index)] = bytes;
    }
    g.hostLayers = std::move(host);
    g.pinned = std::move(pinned);
    g.streamLayerBytes = layerSize;
}

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
