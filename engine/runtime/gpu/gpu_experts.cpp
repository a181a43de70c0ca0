#include "runtime/gpu/gpu_experts.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <random>
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
                     const std::function<const std::byte*(int layer)>& layerBytes, int firstLayer, int endLayer) {
    const std::size_t layerSize = static_cast<std::size_t>(config.numExperts) * layout.expertBytes;
    const int end = endLayer < 0 ? config.numLayers : endLayer;
    const auto streamed = [&](const model::LayerPlan& layer) {
        return layer.moe && !g.wholeLayer(layer.index) && layer.index >= firstLayer && layer.index < end;
    };
    // Pinned pages cannot be swapped or dropped from the page cache: pin at most 3/4 of the machine's RAM.
    std::uint64_t cpuBytes = 0;
    for (const model::LayerPlan& layer : config.layers)
        if (streamed(layer)) cpuBytes += layerSize;
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
        if (!streamed(layer)) continue;
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

void measureStreamCost(GpuExperts& g, const model::ModelConfig& config, model::RoutedExperts& cpu,
                       const std::vector<int>& tokens) {
    runtime::StreamCost& cost = g.streamCost;
    cost = {};
    int layer = -1;
    for (std::size_t l = 0; l < g.hostLayers.size() && layer < 0; ++l)
        if (g.hostLayers[l]) layer = static_cast<int>(l);
    if (layer < 0 || g.streamLayerBytes == 0) return;
    const auto E = static_cast<std::size_t>(config.numExperts);
    cost.expertBytes = g.streamLayerBytes / E;

    // The link: the layer's first 256 MB (or all of it), copied twice; the second copy is timed.
    const std::size_t bytes = std::min<std::size_t>(g.streamLayerBytes, std::size_t{256} << 20);
    try {
        DeviceBuffer<std::uint8_t> target(bytes);
        cudaEvent_t begin = nullptr, end = nullptr;
        TANDEM_CUDA_CHECK(cudaEventCreate(&begin));
        TANDEM_CUDA_CHECK(cudaEventCreate(&end));
        const void* from = g.hostLayers[static_cast<std::size_t>(layer)];
        TANDEM_CUDA_CHECK(cudaMemcpy(target.get(), from, bytes, cudaMemcpyHostToDevice));
        TANDEM_CUDA_CHECK(cudaEventRecord(begin));
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(target.get(), from, bytes, cudaMemcpyHostToDevice));
        TANDEM_CUDA_CHECK(cudaEventRecord(end));
        TANDEM_CUDA_CHECK(cudaEventSynchronize(end));
        float ms = 0;
        TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
        cudaEventDestroy(begin);
        cudaEventDestroy(end);
        if (ms > 0) cost.linkBytesPerSecond = static_cast<double>(bytes) / (ms * 1e-3);
    } catch (const Error&) {
        cudaGetLastError();
        return;  // no room for the measurement: no CPU share
    }

    // The CPU: a whole layer with random routing (each token's experts distinct).
    const auto H = static_cast<std::size_t>(config.hiddenSize);
    const int k = config.router.topK;
    std::mt19937 random(7);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (const int t : tokens) {
        if (t <= 0) continue;
        const auto T = static_cast<std::size_t>(t);
        std::vector<float> x(T * H), out(T * H), weights(T * static_cast<std::size_t>(k), 1.0f / static_cast<float>(k));
        for (float& v : x) v = value(random);
        std::vector<int> ids(T * static_cast<std::size_t>(k));
        for (std::size_t i = 0; i < T; ++i) {
            const auto first = static_cast<int>(random() % E);
            for (int j = 0; j < k; ++j) ids[i * static_cast<std::size_t>(k) + static_cast<std::size_t>(j)] = (first + j) % static_cast<int>(E);
        }
        cpu.run(layer, x.data(), T, ids.data(), weights.data(), k, 0, k, out.data());
        const auto start = std::chrono::steady_clock::now();
        cpu.run(layer, x.data(), T, ids.data(), weights.data(), k, 0, k, out.data());
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        cost.cpu.emplace_back(t, seconds / (static_cast<double>(T) * static_cast<double>(E)));
    }
    std::sort(cost.cpu.begin(), cost.cpu.end());
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
    g.hostTable.resize(static_cast<std::size_t>(config.numLayers));
    const auto E = static_cast<std::size_t>(config.numExperts);
    for (const model::LayerPlan& layer : config.layers) {
        if (!layer.moe) continue;
        const auto l = static_cast<std::size_t>(layer.index);
        const std::vector<bool>& held = placement.gpu[l];
        const auto count = static_cast<std::size_t>(std::count(held.begin(), held.end(), true));
        if (count == 0) continue;
        const std::byte* host = layerBytes(layer.index);
        if (!host) throw Error("layer " + std::to_string(layer.index) + " has no packed experts to put on the GPU");
        const std::size_t bytes = count * layout.expertBytes;
        try {
            g.memory[l] = DeviceBuffer<std::uint8_t>(bytes);
        } catch (const Error&) {
            cudaGetLastError();
            throw Error("the GPU ran out of memory putting the routed experts of layer " + std::to_string(layer.index) +
                        " there (" + formatBytes(bytes) + "); give them less GPU memory (--gpu-memory)");
        }
        // A layer of a mapped store is read from disk here the first time: ~0.1-1 GB, one copy each (whole
        // layers in one piece; a split layer's experts one by one, packed together on the GPU).
        std::vector<const std::uint8_t*> addresses(E, nullptr);
        if (count == E) {
            TANDEM_CUDA_CHECK(cudaMemcpy(g.memory[l].get(), host, bytes, cudaMemcpyHostToDevice));
            for (std::size_t e = 0; e < E; ++e) addresses[e] = g.memory[l].get() + e * layout.expertBytes;
        } else {
            std::size_t at = 0;
            for (std::size_t e = 0; e < E; ++e) {
                if (!held[e]) continue;
                addresses[e] = g.memory[l].get() + at * layout.expertBytes;
                TANDEM_CUDA_CHECK(cudaMemcpy(const_cast<std::uint8_t*>(addresses[e]), host + e * layout.expertBytes,
                                             layout.expertBytes, cudaMemcpyHostToDevice));
                ++at;
            }
        }
        g.table[l] = DeviceBuffer<const std::uint8_t*>(E);
        TANDEM_CUDA_CHECK(cudaMemcpy(g.table[l].get(), addresses.data(), E * sizeof(addresses[0]), cudaMemcpyHostToDevice));
        g.hostTable[l] = std::move(addresses);
    }
    g.placement = std::move(placement);
    return g;
}

}  // namespace tandem::cuda
