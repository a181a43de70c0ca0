#pragma once
// The dense layers' BF16 products on AVX-512 (attention, shared experts, dense MLPs and lm_head when
// they run on the CPU): the weights are read once, converted to float32 in registers, and multiplied
// with float32 activations, so the result matches the reference path to float32 rounding. Only call
// when selectedIsa() is Avx512 or Amx (cpu_features.h); matmul.cpp decides.
#include <cstddef>
#include <cstdint>

namespace tandem::cpu {

// y[t * ldy + r] = Σ_c W[r, c] · x[t * ldx + c] for rows r in [r0, r1) and tokens t in [0, tokens).
// W is bf16, row-major with `cols` columns.
void denseBf16Avx512(const std::uint16_t* w, std::size_t cols, std::size_t r0, std::size_t r1, const float* x,
                     std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy);
// The same for int8 weights with one scale per row (rowScales[r] for row r; cpu/dense/quantize_dense.h).
void denseInt8Avx512(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                     const float* x, std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy);

}  // namespace tandem::cpu
