#pragma once
// What GpuRunner's files share (gpu_runner.cpp: buffers and the pass; gpu_runner_attention.cpp: its
// attention block; gpu_runner_moe.cpp: the feed-forward block of MoE layers, the hand-over to the CPU,
// experts on the GPU and prefill streaming).
#include <algorithm>
#include <cstddef>

#include "cuda/kernels.h"
#include "model/config.h"
#include "tandem/tuning.h"

namespace tandem::cuda {

// The widths of a layer's activations and cache rows.
struct Widths {
    long qkv = 0, q = 0, comb = 0, qLatent = 0, gateUp = 0, inner = 0, attn = 0, cacheA = 0, cacheB = 0;
};

inline Widths widthsOf(const model::ModelConfig& c) {
    Widths w;
    if (c.attention == model::AttentionKind::Mla) {
        const long qHead = c.qkNopeHeadDim + c.qkRopeHeadDim;
        w.q = c.numHeads * qHead;
        w.comb = c.qLoraRank + c.kvLoraRank + c.qkRopeHeadDim;
        w.qLatent = static_cast<long>(c.numHeads) * c.kvLoraRank;
        w.attn = static_cast<long>(c.numHeads) * c.vHeadDim;
        w.cacheA = c.kvLoraRank;
        w.cacheB = c.qkRopeHeadDim;
    } else {
        w.qkv = static_cast<long>(c.numHeads + 2 * c.numKvHeads) * c.headDim;
        w.attn = static_cast<long>(c.numHeads) * c.headDim;
        w.cacheA = w.cacheB = static_cast<long>(c.numKvHeads) * c.headDim;
    }
    w.inner = std::max(c.intermediateSize, c.moeIntermediateSize * std::max(1, c.numSharedExperts));
    w.gateUp = 2 * w.inner;
    return w;
}

// Scales a position's row of either KV cache stream takes in the 8-bit cache (kernels.h, Int8Rows): a key
// head each for GQA's keys and values (groups of headDim, as on the CPU), one for MLA's latent row and one
// for its rope row.
inline long cacheGroups(const model::ModelConfig& c) {
    return c.attention == model::AttentionKind::Mla ? 1 : c.numKvHeads;
}

// MLA prompts on the flash kernel in the non-absorbed form (mla_prefill.cu), unless TANDEM_GPU_FLASH=0
// or the head widths are beyond it: the absorbed form on the scalar kernel then (attention.cu).
inline bool mlaFlashPrefill(const model::ModelConfig& c) {
    return c.attention == model::AttentionKind::Mla && tuning().gpuFlashPrefill &&
           mlaFlashPrefillServes(c.qkNopeHeadDim, c.qkRopeHeadDim, c.vHeadDim);
}

// Bytes of decompressed keys and values a pass may take: V2-Lite's 16 KB a position holds 16K positions,
// V3's 128 KB 2K.
inline constexpr std::size_t kMlaPassBytes = 256u << 20;

// Positions a pass decompresses: the whole capacity when it fits in kMlaPassBytes, else as many
// multiples of 64 as do.
inline int mlaPassRows(const model::ModelConfig& c, int capacity) {
    const std::size_t perPosition = static_cast<std::size_t>(c.numHeads) * (c.qkNopeHeadDim + c.vHeadDim) * sizeof(float);
    const std::size_t fit = std::max<std::size_t>(64, kMlaPassBytes / perPosition / 64 * 64);
    return static_cast<int>(std::min(static_cast<std::size_t>(std::max(capacity, 0)), fit));
}

inline constexpr double kCpuTimeoutSeconds = 120.0;  // a GPU wait kernel gives up after this
// Routed experts on the GPU (expert_kernels.h): the decode kernels up to this many tokens, the tensor-core
// prefill kernels above, with activations split into Tuning::gpuExpertSplits bf16 terms (2: ~6.8e-6 per
// expert output, docs/GPU_EXPERTS.md; the rest of the GPU path measures ~5e-6).
inline constexpr int kDecodeExpertTokens = 4;

// Stages of a layer for TANDEM_GPU_PROFILE: a timestamp is taken at the start of each.
enum Stage { kAttnBegin, kAttnProjected, kAttnPrepared, kAttnScored, kAttnDone, kRouted, kCopiedOut, kSharedDone,
             kResultAdded, kStages };
// In decode the input norm runs in the previous layer's wait, and the hand-over in the router's kernel.
inline constexpr const char* kStageNames[kStages] = {"(norm +) q/kv projections", "rope, cache writes", "absorb (MLA) + attention",
                                              "values + o_proj", "norm + router (+ hand-over)", "copies to the CPU + signal",
                                              "(signal +) shared experts", "wait + add (+ next norm)", "(end)"};

}  // namespace tandem::cuda
