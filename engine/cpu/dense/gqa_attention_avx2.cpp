// gqa_attention_kernel.h on 8 lanes (compiled with the AVX2 and FMA flags), for CPUs without AVX-512.
#include <immintrin.h>

#include "cpu/dense/gqa_prompt_kernel.h"

namespace tandem::cpu {

namespace {

struct Avx2 {
    using V = __m256;
    static constexpr int N = 8;
    static V load(const float* p) { return _mm256_load_ps(p); }
    static V loadu(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, V v) { _mm256_store_ps(p, v); }
    static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
    static V loadInt8(const std::int8_t* p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))); }
    static V set1(float x) { return _mm256_set1_ps(x); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V max(V a, V b) { return _mm256_max_ps(a, b); }
    static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
    static float sum(V v) {
        __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        x = _mm_add_ps(x, _mm_movehl_ps(x, x));
        return _mm_cvtss_f32(_mm_add_ss(x, _mm_shuffle_ps(x, x, 1)));
    }
    static float largest(V v) {
        __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        x = _mm_max_ps(x, _mm_movehl_ps(x, x));
        return _mm_cvtss_f32(_mm_max_ss(x, _mm_shuffle_ps(x, x, 1)));
    }

    // r[j] = the sum of v[j]'s lanes, j = 0..7: two rounds of horizontal adds leave each 128-bit half with
    // four vectors' partial sums, and the halves are added across.
    static V sumEach(const V (&v)[8]) {
        const V a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
        const V b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
        return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }

    // As gqa_attention_avx512.cpp's, 8 at a time.
    static V expNonPositive(V x) {
        const V underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
        const V kRound = _mm256_set1_ps(12582912.0f);
        const V t = _mm256_mul_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(1.44269504f));
        const V rounded = _mm256_add_ps(t, kRound);
        const V f = _mm256_mul_ps(_mm256_sub_ps(t, _mm256_sub_ps(rounded, kRound)), _mm256_set1_ps(0.693147181f));
        V p = _mm256_set1_ps(1.0f / 5040);
        for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
            p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(c));
        const __m256i exponent = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_castps_si256(rounded), _mm256_castps_si256(kRound)), 23);
        return _mm256_andnot_ps(underflow, _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), exponent)));
    }
};

}  // namespace

void gqaAttentionAvx2(const GqaAttentionArgs& a, ThreadPool& pool) { gqa_detail::attend<Avx2>(gqa_detail::gqaTerms(a), pool); }
void mlaAttentionAvx2(const MlaAttentionArgs& a, ThreadPool& pool) { gqa_detail::attend<Avx2>(gqa_detail::mlaTerms(a), pool); }

}  // namespace tandem::cpu
