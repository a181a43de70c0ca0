#pragma once
// The attention blocks. Both take normalized hidden states of T consecutive tokens that start at
// `start` in the conversation, append their keys to the cache, attend causally over the whole cached
// context, and write the projected output [T, hidden].
#include <cstddef>

#include "cpu/pool/thread_pool.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/weights.h"
#include "model/kv_cache.h"

namespace tandem::model {

struct AttentionStep {
    const ModelConfig& config;
    const LayerPlan& layer;
    const Rope& rope;
    const float* cos;  // [tokens, rope.dim() / 2] for positions start .. start + tokens - 1
    const float* sin;
    std::size_t tokens;
    int start;
    model::KvCache& cache;
    cpu::ThreadPool& pool;
};

// Cache streams: 0 = keys [kvHeads * headDim], 1 = values [kvHeads * headDim].
void gqaAttention(const AttentionStep& step, const GqaWeights& w, const float* x, float* out);

// Cache streams: 0 = normalized latent [kvLoraRank], 1 = rotated key [qkRopeHeadDim]. Uses the absorbed
// form: queries are mapped into the latent space through kv_b_proj, so keys and values are never expanded.
void mlaAttention(const AttentionStep& step, const MlaWeights& w, const float* x, float* out);

}  // namespace tandem::model
