#pragma once
// The dense part of a model on the GPU: embeddings, attention, dense layers, routers, shared experts,
// final norm and lm_head (routers and norms as float32). Routed experts stay on the CPU.
// Projections that read the same input are stacked into one matrix so one GEMM computes them.
//
// BF16 weights are uploaded as they are. FP8 weights (DeepSeek-V3's e4m3 with 128x128 block scales) stay
// FP8 with their scales (Tuning::gpuFp8, on by default), which the kernels multiply in float32 -- the
// same products the CPU path computes, at half the bytes of bf16 (rounding FP8 x scale to bf16, which
// TANDEM_GPU_FP8=0 still does, cost 1.6e-3 of the logits at real widths against 5e-6 kept: FIDELITY.md)
// -- and MLA's kv_b_proj, read by kernels of its own, becomes bf16 hi + lo pairs. Dense weights quantized
// to int8 at load (--dense int8: a scale per row) stay int8, read by the same 8-bit kernels.
#include <cstdint>
#include <optional>
#include <vector>

#include "cpu/pool/thread_pool.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem::cuda {

// A weight matrix [rows, cols] as kernels see it: bf16, or 8 bits a weight (FP8 e4m3 or int8) with one
// float32 scale per row and block of blockCols columns (FP8: the checkpoint's block scales repeated for
// each row of a block, so stacked and sliced matrices need no alignment to the 128-row blocks; int8: one
// block of all columns).
struct MatrixRef {
    const bf16* values = nullptr;  // bf16 [rows, cols], or null for 8-bit weights
    const std::uint8_t* eight = nullptr;
    const float* scales = nullptr;  // [rows, scaleCols]
    int scaleCols = 0;
    int blockCols = 0;
    Weight8 format = Weight8::E4M3;
};

struct GpuMatrix {
    DeviceBuffer<bf16> values;  // bf16 [rows, cols], or empty for 8-bit weights
    DeviceBuffer<std::uint8_t> eight;
    DeviceBuffer<float> scales;
    int rows = 0, cols = 0, scaleCols = 0, blockCols = 0;
    Weight8 format = Weight8::E4M3;

    MatrixRef ref() const { return {values.get(), eight.get(), scales.get(), scaleCols, blockCols, format}; }
    bool isEightBit() const { return static_cast<bool>(eight); }
    explicit operator bool() const { return rows > 0; }
    std::size_t bytes() const { return values.size() * 2 + eight.size() + scales.size() * 4; }
};

struct GpuMlp {
    GpuMatrix gateUp;  // [2 * inner, hidden]: gate rows, then up rows
    GpuMatrix down;    // [hidden, inner]
    int inner = 0;
};

struct GpuLayer {
    DeviceBuffer<float> inputNorm, postAttentionNorm;
    // GQA
    GpuMatrix qkv;  // [(heads + 2 kvHeads) * headDim, hidden]
    DeviceBuffer<float> qNorm, kNorm;
    DeviceBuffer<float> qkvBias;  // GLM-4.5, gpt-oss: the q, k and v biases back to back, as qkv's rows
    DeviceBuffer<float> oBias;    // gpt-oss: o_proj's bias [hidden]
    DeviceBuffer<float> sinks;    // gpt-oss: one attention sink logit per query head
    // MLA
    GpuMatrix qaKva;  // with q LoRA: [qLora + kvLora + rope, hidden], or q_a alone [qLora, hidden] when kva is
                      // set (only one of the two FP8: they are kept apart so that one stays FP8)
    GpuMatrix q;      // q_b_proj [heads * qHead, qLora], or q_proj [heads * qHead, hidden]
    GpuMatrix kva;    // [kvLora + rope, hidden]: without q LoRA, or beside a q_a of another kind
    DeviceBuffer<float> qaNorm, kvaNorm;
    DeviceBuffer<bf16> kvb;    // [heads * (nope + v), kvLora]
    DeviceBuffer<bf16> kvbLo;  // FP8 checkpoints: what bf16 rounding lost of kvb (kvb + kvbLo is exact to 2^-16)
    GpuMatrix o;      // [hidden, heads * v or heads * headDim]
    // Feed-forward
    std::optional<GpuMlp> dense;
    DeviceBuffer<float> router;          // [experts, hidden]
    DeviceBuffer<float> correctionBias;  // [experts]
    DeviceBuffer<float> routerBias;      // gpt-oss: [experts], added to the router's logits
    // gpt-oss: the routed experts' biases for the GPU's expert kernels (ExpertEpilogue): gate and up
    // [experts][inter], down [experts][hidden]
    DeviceBuffer<float> expertGateBias, expertUpBias, expertDownBias;
    std::optional<GpuMlp> shared;
};

struct GpuWeights {
    DeviceBuffer<bf16> embed;   // [vocab, hidden]
    GpuMatrix lmHead;           // empty when tied to embed
    DeviceBuffer<float> finalNorm;
    DeviceBuffer<float> ropeInvFreq;
    std::vector<GpuLayer> layers;
    bool hasEightBit = false;   // some projection is 8-bit (the runner then keeps a dequantization buffer)
    int largestEightBitCols = 0;

    MatrixRef lmHeadRef() const { return lmHead ? lmHead.ref() : MatrixRef{embed.get()}; }
};

// Bytes the GPU copy of the dense weights takes.
std::uint64_t gpuWeightBytes(const model::ModelConfig& config, const model::ModelWeights& weights);
// Whether some projection stays 8-bit on the GPU (FP8 or int8): GpuWeights::hasEightBit before the upload.
bool hasEightBitWeights(const model::ModelConfig& config, const model::ModelWeights& weights);

// The part of the dense weights one stage of a pipeline by layer holds (issue 29; GpuStage): its layers,
// the embedding when it embeds (or applies a head tied to it), the final norm and output head when it
// applies the head. The default: everything.
struct WeightRange {
    int firstLayer = 0;
    int endLayer = -1;  // -1: to the last layer
};

// Uploads, converting F16 and F32 to bf16 on the CPU in parallel; FP8 stays FP8, int8 stays int8. Layers
// outside `range` are left empty (GpuWeights::layers keeps one entry per layer).
GpuWeights uploadWeights(const model::ModelConfig& config, const model::ModelWeights& weights,
                         const std::vector<float>& ropeInvFreq, cpu::ThreadPool& pool, WeightRange range = {});

}  // namespace tandem::cuda
