#pragma once
// The dense part of a model on the GPU: embeddings, attention, dense layers, routers, shared experts,
// final norm and lm_head, as bf16 (routers and norms as float32). Routed experts stay on the CPU.
// Projections that read the same input are stacked into one matrix so one GEMM computes them.
#include <cstdint>
#include <optional>
#include <vector>

#include "cpu/thread_pool.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem::cuda {

struct GpuMlp {
    DeviceBuffer<bf16> gateUp;  // [2 * inner, hidden]: gate rows, then up rows
    DeviceBuffer<bf16> down;    // [hidden, inner]
    int inner = 0;
};

struct GpuLayer {
    DeviceBuffer<float> inputNorm, postAttentionNorm;
    // GQA
    DeviceBuffer<bf16> qkv;  // [(heads + 2 kvHeads) * headDim, hidden]
    DeviceBuffer<float> qNorm, kNorm;
    // MLA
    DeviceBuffer<bf16> qaKva;  // with q LoRA: [qLora + kvLora + rope, hidden]
    DeviceBuffer<bf16> q;      // q_b_proj [heads * qHead, qLora], or q_proj [heads * qHead, hidden]
    DeviceBuffer<bf16> kva;    // without q LoRA: [kvLora + rope, hidden]
    DeviceBuffer<float> qaNorm, kvaNorm;
    DeviceBuffer<bf16> kvb;    // [heads * (nope + v), kvLora]
    DeviceBuffer<bf16> o;      // [hidden, heads * v or heads * headDim]
    // Feed-forward
    std::optional<GpuMlp> dense;
    DeviceBuffer<float> router;          // [experts, hidden]
    DeviceBuffer<float> correctionBias;  // [experts]
    std::optional<GpuMlp> shared;
};

struct GpuWeights {
    DeviceBuffer<bf16> embed;   // [vocab, hidden]
    DeviceBuffer<bf16> lmHead;  // empty when tied to embed
    DeviceBuffer<float> finalNorm;
    DeviceBuffer<float> ropeInvFreq;
    std::vector<GpuLayer> layers;

    const bf16* lmHeadData() const { return lmHead ? lmHead.get() : embed.get(); }
};

// Bytes the GPU copy of the dense weights takes.
std::uint64_t gpuWeightBytes(const model::ModelConfig& config);

// Converts (FP8 and F16 through float32, in parallel) and uploads.
GpuWeights uploadWeights(const model::ModelConfig& config, const model::ModelWeights& weights,
                         const std::vector<float>& ropeInvFreq, cpu::ThreadPool& pool);

}  // namespace tandem::cuda
