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
// Activations quantized for the int8 products: per token, int8 values (symmetric, x ~ q * scale) over
// the columns padded with zeros to a multiple of 64, `ld` bytes apart, and the sum of each token's q.
struct Int8Rows {
    const std::int8_t* q = nullptr;
    std::size_t ld = 0;
    const float* scales = nullptr;
    const std::int32_t* sums = nullptr;
};

// y[t * ldy + r] = rowScales[r] · scales[t] · Σ_c W[r, c] · q[t, c] for int8 weights with one scale per row
// (cpu/dense/quantize_dense.h) and int8 activations, with VNNI's integer products.
void denseInt8Avx512(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                     const Int8Rows& x, std::size_t tokens, float* y, std::size_t ldy);
// The same on AVX2 (dense_int8_avx2.cpp; selectedIsa() at least Avx2), without x.sums: the activations
// must lie in [-127, 127], as activationToInt8 makes them.
void denseInt8Avx2(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                   const Int8Rows& x, std::size_t tokens, float* y, std::size_t ldy);

}  // namespace tandem::cpu
