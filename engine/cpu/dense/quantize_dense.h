#pragma once
// Dense weights quantized for the CPU path (issue 25): int8 with one float32 scale per output row
// (absmax / 127, round to nearest), so a decode step reads a byte per weight instead of bf16's two.
#include <cstdint>
#include <vector>

#include "cpu/pool/thread_pool.h"
#include "cpu/weight_matrix.h"

namespace tandem::cpu {

// One row of float32 weights into int8 (absmax / 127, round to nearest); returns the row's scale, NaN
// for a row holding NaN or infinity (its products then come out NaN, as they would in bf16).
float quantizeRowInt8(const float* row, std::size_t cols, std::int8_t* out);

// The int8 values and row scales of `m` (any type dequantRow reads), and a WeightMatrix of type I8 that
// views them; the vectors must outlive it.
WeightMatrix quantizeRowsInt8(const WeightMatrix& m, std::vector<std::int8_t>& values, std::vector<float>& scales,
                              ThreadPool& pool);

}  // namespace tandem::cpu
