#pragma once
// How much GPU memory the routed experts get and whether long prompts stream the rest through the GPU:
// the GPU backend's rule at load (runtime/gpu/gpu_backend.cpp) and the model wizard's estimate before a
// download (tandem/convert.h, estimateExpertFit). Plain arithmetic, below every folder that needs it.
#include <algorithm>
#include <cstdint>

namespace tandem {

inline constexpr std::uint64_t kGpuHeadroomBytes = 512ull << 20;  // the CUDA context, cuBLAS, fragmentation
inline constexpr std::uint64_t kExpertMarginBytes = 2ull << 30;   // the automatic budget's margin, at most

// The automatic budget: what is free beside `usedBytes` (the dense weights, a session's KV cache and
// activations, the headroom) less a margin of a tenth of the free memory, at most kExpertMarginBytes.
constexpr std::uint64_t automaticExpertBudget(std::uint64_t freeBytes, std::uint64_t usedBytes) {
    if (usedBytes >= freeBytes) return 0;
    const std::uint64_t margin = std::min<std::uint64_t>(freeBytes / 10, kExpertMarginBytes);
    return freeBytes - usedBytes > margin ? freeBytes - usedBytes - margin : 0;
}

struct ExpertBudget {
    std::uint64_t layersBytes = 0;   // for MoE layers held wholly on the GPU
    std::uint64_t stagingBytes = 0;  // prefill streaming's two staging layers; 0: prompts do not stream
};

// Prefill streaming needs two staging buffers of one layer each, taken from the budget; worth it when not
// every layer fits and allowed (Tuning::gpuStreamMinTokens > 0).
constexpr ExpertBudget splitExpertBudget(std::uint64_t budget, std::uint64_t layerBytes, int moeLayers, bool streaming) {
    if (streaming && budget < layerBytes * static_cast<std::uint64_t>(moeLayers) && budget >= 2 * layerBytes)
        return {budget - 2 * layerBytes, 2 * layerBytes};
    return {budget, 0};
}

}  // namespace tandem
