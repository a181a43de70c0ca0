// AVX-512 forms of the activation conversions in activation_quant.cpp, bit for bit the same results
// (round to nearest even as the scalar code's nearbyint and bf16 rounding; NaN, infinities and
// subnormals handled alike). Prefill converts every (token, expert) row and every intermediate row:
// the scalar loops, with a libm call per element, took a sixth of an INT4 layer's time at 4096 tokens.
// Compiled with AVX-512 flags; reached only when the CPU runs them (activation_quant.cpp).
#include <immintrin.h>

#include "cpu/kernels/activation_quant.h"
#include "cpu/packed_format.h"

namespace tandem::cpu::detail {

namespace {

// x[i, i + 16) with zeros past n.
inline __m512 loadPart(const float* x, int i, int n) {
    const int left = n - i;
    if (left >= 16) return _mm512_loadu_ps(x + i);
    if (left <= 0) return _mm512_setzero_ps();
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << left) - 1u), x + i);
}

// io::floatToBf16 on 16 lanes: round to nearest even; NaN stays NaN (quiet bit set).
inline __m512i toBf16Bits(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i top = _mm512_srli_epi32(u, 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(top, _mm512_set1_epi32(1)))), 16);
    return _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(top, _mm512_set1_epi32(0x40)));
}

}  // namespace

void activationToInt8Avx512(const float* x, int n, int nPad, std::int8_t* q, float* scale, std::int32_t* groupSums) {
    // max_ps returns its second operand when either is NaN, as std::max(absMax, NaN) keeps absMax.
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) m = _mm512_max_ps(_mm512_abs_ps(loadPart(x, i, n)), m);
    const float absMax = _mm512_reduce_max_ps(m);
    const float inv = absMax > 0.0f ? 127.0f / absMax : 0.0f;
    *scale = absMax / 127.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i hi = _mm512_set1_epi32(127), lo = _mm512_set1_epi32(-127);
    for (int g = 0; g < nPad / kActGroup; ++g) {
        const int i = g * kActGroup;
        // cvtps_epi32 rounds to nearest even (MXCSR default), as nearbyint does.
        __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(loadPart(x, i, n), vinv));
        __m512i b = _mm512_cvtps_epi32(_mm512_mul_ps(loadPart(x, i + 16, n), vinv));
        a = _mm512_max_epi32(_mm512_min_epi32(a, hi), lo);
        b = _mm512_max_epi32(_mm512_min_epi32(b, hi), lo);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(a));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i + 16), _mm512_cvtepi32_epi8(b));
        groupSums[g] = _mm512_reduce_add_epi32(_mm512_add_epi32(a, b));
    }
}

void activationToBf16SplitAvx512(const float* x, int n, int nPad, std::byte* row) {
    auto* hi = reinterpret_cast<std::uint16_t*>(row);
    auto* lo = reinterpret_cast<std::uint16_t*>(row + bf16LoOffset(nPad));
    const __m512i exponent = _mm512_set1_epi32(0x7f800000);
    for (int i = 0; i < nPad; i += 16) {
        const __m512 v = loadPart(x, i, n);
        const __m512i h = toBf16Bits(v);
        const __m512 hv = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
        // x - h is exact; where h is infinite or NaN, lo is 0.
        const __mmask16 finite = _mm512_cmpneq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(hv), exponent), exponent);
        const __m512i l = _mm512_maskz_mov_epi32(finite, toBf16Bits(_mm512_sub_ps(v, hv)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + i), _mm512_cvtepi32_epi16(h));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + i), _mm512_cvtepi32_epi16(l));
    }
}

}  // namespace tandem::cpu::detail
