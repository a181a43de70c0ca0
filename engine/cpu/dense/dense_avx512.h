#pragma once
// The dense layers' BF16 products on AVX-512 (attention, shared experts, dense MLPs and lm_head when
// they run on the CPU): the weights are read once, converted to float32 in registers, and multiplied
// with float32 activations, so the result matches the reference path to float32 rounding. Only call
// when selectedIsa() is Avx512 or Amx (cpu_features.h); matmul.cpp decides.
#include <algorithm>
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
// Both int8 kernels' order of work: rows in slices whose weights stay in L2 (256 KB) while every block
// of tokens (4 at a time, then the rest) passes over them; rows.template operator()<NT>(s0, s1, t0) does
// one slice for tokens [t0, t0 + NT). A template in each kernel's file, over its own lambda.
template <class Rows>
void int8SlicesAndTokenBlocks(std::size_t cols, std::size_t r0, std::size_t r1, std::size_t tokens, const Rows& rows) {
    const std::size_t slice = std::max<std::size_t>(4, (256 * 1024 / std::max<std::size_t>(cols, 1)) / 4 * 4);
    for (std::size_t s0 = r0; s0 < r1; s0 += slice) {
        const std::size_t s1 = std::min(r1, s0 + slice);
        std::size_t t = 0;
        for (; t + 4 <= tokens; t += 4) rows.template operator()<4>(s0, s1, t);
        switch (tokens - t) {
        case 3: rows.template operator()<3>(s0, s1, t); break;
        case 2: rows.template operator()<2>(s0, s1, t); break;
        case 1: rows.template operator()<1>(s0, s1, t); break;
        default: break;
        }
    }
}
// The same on AVX2 (dense_int8_avx2.cpp; selectedIsa() at least Avx2), without x.sums: the activations
// must lie in [-127, 127], as activationToInt8 makes them.
void denseInt8Avx2(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                   const Int8Rows& x, std::size_t tokens, float* y, std::size_t ldy);

}  // namespace tandem::cpu
