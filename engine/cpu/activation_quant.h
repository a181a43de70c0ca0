#pragma once
// The activation formats the expert kernels read, made on the fly from float32 rows: bfloat16 for BF16
// experts; for INT8/INT4 experts int8 with one scale per row (symmetric, x ~ q * scale) and the sum
// of q over every 32 columns, which the kernels need because they multiply unsigned weights.
// Columns [n, nPad) are written as zeros; nPad is a multiple of 32.
#include <cstdint>

namespace tandem::cpu {

void activationToBf16(const float* x, int n, int nPad, std::uint16_t* out);

// groupSums receives nPad / 32 values.
void activationToInt8(const float* x, int n, int nPad, std::int8_t* q, float* scale, std::int32_t* groupSums);

}  // namespace tandem::cpu
