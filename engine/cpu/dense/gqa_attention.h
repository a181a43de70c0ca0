#pragma once
// Causal grouped-query attention over the CPU path's KV cache, on AVX-512 and AVX2 (issue 25: attention
// that stays fast at long contexts). The work is split by query token, key head and chunk of cached
// positions (flash-decoding), so a decode step's few heads still use every thread at 8k positions; each
// chunk reads a key or value row once for all the query heads of its group, takes the scores' softmax in
// its own running maximum (exp by a polynomial, 1e-7 relative), and the chunks are combined per head.
// One kernel (gqa_attention_kernel.h) built for each instruction set. Only call gqaAttentionAvx512 when
// selectedIsa() is Avx512 or Amx, gqaAttentionAvx2 when it is at least Avx2, and only for shapes
// gqaAttentionFits takes (headDim a multiple of 16, at most 256; at most 16 query heads per key head);
// model/attention_gqa.cpp decides. MLA below the same way.
//
// The cache is float32 rows, or int8 codes with a float scale per (position, key head) (model::KvCache's
// Int8 type, issue 28): a work item then widens its chunk's codes times their scales to float32 (in L2),
// once for all the query heads of its block, and attends over those.
#include <cstddef>
#include <cstdint>

#include "cpu/pool/thread_pool.h"

namespace tandem::cpu {

struct GqaAttentionArgs {
    const float* q = nullptr;       // [tokens, heads * headDim]
    const float* keys = nullptr;    // position p's keys at keys + p * kvHeads * headDim
    const float* values = nullptr;  // the same for values
    int tokens = 0;
    int start = 0;    // query t is at position start + t and attends to [first, start + t]
    int window = 0;   // 0: every earlier position; else the last `window` positions (first = pos - window + 1)
    int heads = 0, kvHeads = 0, headDim = 0;
    float scale = 1.0f;
    const float* sinks = nullptr;  // optional: one logit per head that joins each softmax, with no value (gpt-oss)
    float* out = nullptr;  // [tokens, heads * headDim]
    // An int8 cache instead of keys and values (model::KvCache's, key head by key head): key head g's codes
    // of position p at keyCodes + g * codesHead + p * headDim, its scale at keyScales[g * scalesHead + p]; the
    // same for values.
    const std::int8_t* keyCodes = nullptr;
    const std::int8_t* valueCodes = nullptr;
    const float* keyScales = nullptr;
    const float* valueScales = nullptr;
    std::size_t codesHead = 0, scalesHead = 0;
};

// The shapes the kernels take. Inline, so it runs in the caller's instruction set, before one is chosen.
inline constexpr int kGqaMaxGroup = 16;     // query heads per key head
inline constexpr int kGqaMaxHeadDim = 256;
inline bool gqaAttentionFits(int heads, int kvHeads, int headDim) {
    return kvHeads > 0 && heads % kvHeads == 0 && heads / kvHeads <= kGqaMaxGroup && headDim % 16 == 0 && headDim > 0 &&
           headDim <= kGqaMaxHeadDim;
}
void gqaAttentionAvx512(const GqaAttentionArgs& a, ThreadPool& pool);
void gqaAttentionAvx2(const GqaAttentionArgs& a, ThreadPool& pool);

// MLA in the absorbed form (model/attention_mla.cpp): every head attends to the same cached rows, a
// score being its latent query against the latent row plus its rope query against the rope row, and its
// output the weighted latent rows (expanded to values by the caller). The same kernel, one key head of
// `heads` query heads taken 16 at a time.
struct MlaAttentionArgs {
    const float* qLatent = nullptr;     // [tokens, heads, latent]
    const float* qRope = nullptr;       // query (t, h)'s rope part at qRope + (t * heads + h) * qRopeHead
    std::size_t qRopeHead = 0;
    const float* latentRows = nullptr;  // position p's latent row at latentRows + p * latent
    const float* ropeRows = nullptr;    // position p's rope keys at ropeRows + p * ropeDim
    int tokens = 0, start = 0, heads = 0, latent = 0, ropeDim = 0;
    float scale = 1.0f;
    float* out = nullptr;  // [tokens, heads, latent]
    // An int8 cache instead of latentRows and ropeRows: position p's codes at latentCodes + p * latent and
    // ropeCodes + p * ropeDim, one scale each at latentScales[p] and ropeScales[p].
    const std::int8_t* latentCodes = nullptr;
    const std::int8_t* ropeCodes = nullptr;
    const float* latentScales = nullptr;
    const float* ropeScales = nullptr;
};
inline bool mlaAttentionFits(int latent, int ropeDim) {
    return latent > 0 && latent % 16 == 0 && ropeDim >= 0 && ropeDim % 16 == 0;
}
void mlaAttentionAvx512(const MlaAttentionArgs& a, ThreadPool& pool);
void mlaAttentionAvx2(const MlaAttentionArgs& a, ThreadPool& pool);

}  // namespace tandem::cpu
