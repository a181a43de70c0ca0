#pragma once
// Causal grouped-query attention over the CPU path's float32 KV cache, on AVX-512 and AVX2 (issue 25: attention
// that stays fast at long contexts). The work is split by query token, key head and chunk of cached
// positions (flash-decoding), so a decode step's few heads still use every thread at 8k positions; each
// chunk reads a key or value row once for all the query heads of its group, takes the scores' softmax in
// its own running maximum (exp by a polynomial, 1e-7 relative), and the chunks are combined per head.
// One kernel (gqa_attention_kernel.h) built for each instruction set. Only call gqaAttentionAvx512 when
// selectedIsa() is Avx512 or Amx, gqaAttentionAvx2 when it is at least Avx2, and only for shapes
// gqaAttentionFits takes (headDim a multiple of 16, at most 256; at most 16 query heads per key head);
// model/attention_gqa.cpp decides.
#include <cstddef>

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
    float* out = nullptr;  // [tokens, heads * headDim]
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

}  // namespace tandem::cpu
