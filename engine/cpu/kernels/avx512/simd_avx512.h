#pragma once
// AVX-512 helpers shared by the AVX-512 and AMX kernel files. Include only from files compiled with
// AVX-512 flags; everything here has internal linkage so no other file can end up calling it.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "cpu/kernels/expert_kernels.h"

namespace tandem::cpu {
namespace {

typedef std::int32_t UnalignedInt32 __attribute__((may_alias, aligned(1)));
inline std::int32_t load32(const std::byte* p) { return *reinterpret_cast<const UnalignedInt32*>(p); }

// e^x to about 2 ulp: x = n ln2 + r with |r| <= ln2/2, a degree-7 Taylor polynomial for e^r, then
// scaling by 2^n. Inputs are clamped to where float32 has a finite, normal result.
inline __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

// SiLU(g) * u = g / (1 + e^-g) * u
inline __m512 siluMul512(__m512 g, __m512 u) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

// The epilogue's activation (expert_kernels.h) for outputs [col, col + 16): biases, then SiLU(g) * u
// or the clamped SwiGLU. Null: SiLU(g) * u as ever.
inline __m512 gatedAct512(__m512 g, __m512 u, const GateUpEpilogue* e, int col) {
    if (!e) return siluMul512(g, u);
    if (e->gateBias) g = _mm512_add_ps(g, _mm512_loadu_ps(e->gateBias + col));
    if (e->upBias) u = _mm512_add_ps(u, _mm512_loadu_ps(e->upBias + col));
    if (e->activation == GatedActivation::SiluMul) return siluMul512(g, u);
    const __m512 limit = _mm512_set1_ps(e->limit);
    g = _mm512_min_ps(g, limit);
    u = _mm512_max_ps(_mm512_min_ps(u, limit), _mm512_sub_ps(_mm512_setzero_ps(), limit));
    const __m512 ex = exp512(_mm512_mul_ps(g, _mm512_set1_ps(-e->alpha)));
    return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), ex)), _mm512_add_ps(u, _mm512_set1_ps(1.0f)));
}

// MXFP4's 16 bf16 group scales (2^(e - 128), io/expert_layout.h) widened to float32: exact.
inline __m512 mxfp4Scales512(const std::byte* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

// The e2m1 nibble -> 2v + 12 table (cpu/packed_format.h) in every 128-bit lane, for vpshufb.
inline __m512i mxfp4Table512() {
    return _mm512_broadcast_i32x4(_mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
}

// dest[0, valid) += w * y, valid <= 16. Whole rows take plain loads and stores: the experts of a down
// piece add into the same 16 floats one after another, and a plain load takes its data from the plain
// store before it, where a masked load may wait for a masked store to reach the cache.
inline void accumulateRow512(float* dest, __m512 y, float w, int valid) {
    if (valid >= 16) {
        _mm512_storeu_ps(dest, _mm512_fmadd_ps(y, _mm512_set1_ps(w), _mm512_loadu_ps(dest)));
        return;
    }
    const auto m = static_cast<__mmask16>((1u << valid) - 1);
    const __m512 d = _mm512_maskz_loadu_ps(m, dest);
    _mm512_mask_storeu_ps(dest, m, _mm512_fmadd_ps(y, _mm512_set1_ps(w), d));
}

}  // namespace
}  // namespace tandem::cpu
