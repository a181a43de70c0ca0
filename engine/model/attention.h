#pragma once
// The attention blocks. Both take normalized hidden states of T consecutive tokens that start at
// `start` in the conversation, append their keys to the cache, attend causally over the whole cached
// context, and write the projected output [T, hidden]. Or, in a decode batch (Transformer::forwardBatch),
// T tokens of T sequences, each the next of its own: the projections run as one T-row product, each
// token's attention against its own cache.
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
    // A decode batch: token t is at position positions[t] of *caches[t] (start and cache unused). Null: the
    // tokens are one sequence's.
    const int* positions = nullptr;
    model::KvCache* const* caches = nullptr;

    int position(std::size_t t) const { return positions ? positions[t] : start + static_cast<int>(t); }
    model::KvCache& cacheOf(std::size_t t) const { return caches ? *caches[t] : cache; }
};

// Cache streams: 0 = keys [kvHeads * headDim], 1 = values [kvHeads * headDim].
void gqaAttention(const AttentionStep& step, const GqaWeights& w, const float* x, float* out);

// Cache streams: 0 = normalized latent [kvLoraRank], 1 = rotated key [qkRopeHeadDim]. Uses the absorbed
// form: queries are mapped into the latent space through kv_b_proj, so keys and values are never expanded.
void mlaAttention(const AttentionStep& step, const MlaWeights& w, const float* x, float* out);

}  // namespace tandem::model
