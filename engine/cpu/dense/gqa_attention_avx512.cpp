// gqa_attention_kernel.h on 16 lanes (compiled with the AVX-512 flags).
#include <immintrin.h>

#include "cpu/dense/gqa_prompt_kernel.h"

namespace tandem::cpu {

namespace {

struct Avx512 {
    using V = __m512;
    static constexpr int N = 16;
    static V load(const float* p) { return _mm512_load_ps(p); }
    static V loadu(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, V v) { _mm512_store_ps(p, v); }
    static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
    static V loadInt8(const std::int8_t* p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))); }
    static V set1(float x) { return _mm512_set1_ps(x); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V max(V a, V b) { return _mm512_max_ps(a, b); }
    static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
    static float sum(V v) { return _mm512_reduce_add_ps(v); }
    static float largest(V v) { return _mm512_reduce_max_ps(v); }

    // r[j] = the sum of v[j]'s lanes, j = 0..15: pairs of vectors summed within 128-bit lanes, then quads
    // as 64-bit pairs, then the 128-bit lanes across vectors (15 additions instead of 16 reductions).
    static V sumEach(const V (&v)[16]) {
        V x[8], y[4];
        for (int k = 0; k < 8; ++k)
            x[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
        for (int k = 0; k < 4; ++k) {
            const __m512d a = _mm512_castps_pd(x[2 * k]), b = _mm512_castps_pd(x[2 * k + 1]);
            y[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
        }
        const V z0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xDD));
        const V z1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], 0x88), _mm512_shuffle_f32x4(y[2], y[3], 0xDD));
        return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, 0x88), _mm512_shuffle_f32x4(z0, z1, 0xDD));
    }

    // exp(x) for x <= 0 (and -inf): 2^n by the exponent bits and 2^f, |f| <= 1/2, by its Taylor series to
    // degree 7, relative error under 1e-7; below e^-87 it gives 0 (as the sampler's expNonPositive).
    static V expNonPositive(V x) {
        const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
        const V kRound = _mm512_set1_ps(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
        const V t = _mm512_mul_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(1.44269504f));
        const V rounded = _mm512_add_ps(t, kRound);
        const V f = _mm512_mul_ps(_mm512_sub_ps(t, _mm512_sub_ps(rounded, kRound)), _mm512_set1_ps(0.693147181f));
        V p = _mm512_set1_ps(1.0f / 5040);
        for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
            p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
        const __m512i exponent = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_castps_si512(rounded), _mm512_castps_si512(kRound)), 23);
        return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow),
                                   _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), exponent)));
    }
};

}  // namespace

void gqaAttentionAvx512(const GqaAttentionArgs& a, ThreadPool& pool) { gqa_detail::attend<Avx512>(gqa_detail::gqaTerms(a), pool); }
void mlaAttentionAvx512(const MlaAttentionArgs& a, ThreadPool& pool) { gqa_detail::attend<Avx512>(gqa_detail::mlaTerms(a), pool); }

}  // namespace tandem::cpu
