#pragma once
// Y = X · Wᵀ for T rows of activations against a weight in its checkpoint type, float32 accumulation.
#include <cstddef>

#include "cpu/pool/thread_pool.h"
#include "cpu/weight_matrix.h"

namespace tandem::cpu {

// x: [tokens, w.cols] with row stride ldx; y: [tokens, w.rows] with row stride ldy.
// The weight is read once. BF16 weights on AVX-512 go through dense_avx512.h; every other case
// converts blocks of rows to float32 and applies each token to the block while it is in cache.
void matmul(const WeightMatrix& w, const float* x, std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy,
            ThreadPool& pool);

}  // namespace tandem::cpu
