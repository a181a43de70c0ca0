#include "cpu/dense/attention_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tandem::cpu {

namespace {

constexpr int kChunk = 256;  // cached positions a work item takes
constexpr int kMaxGroup = 16;
constexpr int kMaxHeadDim = 256;
constexpr std::size_t kPartialBytes = 32u << 20;  // the chunks' partial results held at once

// exp(x) for x <= 0 (and -inf), 16 at a time: 2^n by the exponent bits and 2^f, |f| <= 1/2, by its Taylor
// series to degree 7, relative error under 1e-7; below e^-87 it gives 0 (as the sampler's expNonPositive).
__m512 expNonPositive(__m512 x) {
    const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
    const __m512 kRound = _mm512_set1_ps(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
    const __m512 t = _mm512_mul_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(1.44269504f));
    const __m512 rounded = _mm512_add_ps(t, kRound);
    const __m512 n = _mm512_sub_ps(rounded, kRound);
    const __m512 f = _mm512_mul_ps(_mm512_sub_ps(t, n), _mm512_set1_ps(0.693147181f));
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(c));
    const __m512i exponent = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_castps_si512(rounded), _mm512_castps_si512(kRound)), 23);
    const __m512 scaled = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), exponent));
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow), scaled);
}

// r[j] = the sum of v[j]'s lanes, j = 0..15: pairs of vectors summed within 128-bit lanes, then quads as
// 64-bit pairs, then the 128-bit lanes across vectors (15 additions instead of 16 reductions).
__m512 sum16(const __m512 (&v)[16]) {
    __m512 x[8], y[4];
    for (int k = 0; k < 8; ++k)
        x[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
    for (int k = 0; k < 4; ++k) {
        const __m512d a = _mm512_castps_pd(x[2 * k]), b = _mm512_castps_pd(x[2 * k + 1]);
        y[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    const __m512 z0 = _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], 0x88), _mm512_shuffle_f32x4(y[0], y[1], 0xDD));
    const __m512 z1 = _mm512_add_ps(_mm512_shuffle_f32x4(y[2], y[3], 0x88), _mm512_shuffle_f32x4(y[2], y[3], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z0, z1, 0x88), _mm512_shuffle_f32x4(z0, z1, 0xDD));
}

int firstPosition(const GqaAttentionArgs& a, int position) { return a.window > 0 ? std::max(0, position - a.window + 1) : 0; }

int chunksOf(const GqaAttentionArgs& a, int t) {
    const int position = a.start + t;
    return (position - firstPosition(a, position) + kChunk) / kChunk;
}

// One chunk of one token's positions for the `group` query heads of key head g: each head's running
// maximum, sum of exponentials and weighted sum of values, written to part[i * (headDim + 2) ...].
void attendChunk(const GqaAttentionArgs& a, int t, int g, int chunk, float* part) {
    const int hd = a.headDim, group = a.heads / a.kvHeads, vectors = hd / 16;
    const std::size_t kvDim = static_cast<std::size_t>(a.kvHeads) * hd, qDim = static_cast<std::size_t>(a.heads) * hd;
    const int position = a.start + t;
    const int p0 = firstPosition(a, position) + chunk * kChunk, p1 = std::min(p0 + kChunk, position + 1);
    const int n = p1 - p0, padded = (n + 15) / 16 * 16;
    alignas(64) float scores[kMaxGroup][kChunk];
    const float* q = a.q + t * qDim + static_cast<std::size_t>(g) * group * hd;

    // Scores: 16 key rows at a time (they stay in L1) for every head of the group, each head's query
    // vector loaded once for the 16; the rest one row at a time.
    int first = 0;
    for (; first + 16 <= n; first += 16) {
        const float* k = a.keys + static_cast<std::size_t>(p0 + first) * kvDim + static_cast<std::size_t>(g) * hd;
        for (int i = 0; i < group; ++i) {
            const float* qi = q + static_cast<std::size_t>(i) * hd;
            __m512 acc[16];
            const __m512 q0 = _mm512_loadu_ps(qi);
            for (int r = 0; r < 16; ++r) acc[r] = _mm512_mul_ps(q0, _mm512_loadu_ps(k + r * kvDim));
            for (int v = 1; v < vectors; ++v) {
                const __m512 qv = _mm512_loadu_ps(qi + 16 * v);
                for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k + r * kvDim + 16 * v), acc[r]);
            }
            _mm512_store_ps(scores[i] + first, _mm512_mul_ps(sum16(acc), _mm512_set1_ps(a.scale)));
        }
    }
    for (int j = first; j < n; ++j) {
        const float* k = a.keys + static_cast<std::size_t>(p0 + j) * kvDim + static_cast<std::size_t>(g) * hd;
        for (int i = 0; i < group; ++i) {
            const float* qi = q + static_cast<std::size_t>(i) * hd;
            __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qi), _mm512_loadu_ps(k));
            for (int v = 1; v < vectors; ++v) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qi + 16 * v), _mm512_loadu_ps(k + 16 * v), acc);
            scores[i][j] = _mm512_reduce_add_ps(acc) * a.scale;
        }
    }
    const std::size_t stride = static_cast<std::size_t>(hd) + 2;
    for (int i = 0; i < group; ++i) {
        float* s = scores[i];
        std::fill(s + n, s + padded, -INFINITY);
        __m512 m16 = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < padded; j += 16) m16 = _mm512_max_ps(m16, _mm512_load_ps(s + j));
        const float m = _mm512_reduce_max_ps(m16);
        __m512 l16 = _mm512_setzero_ps();
        const __m512 mv = _mm512_set1_ps(m);
        for (int j = 0; j < padded; j += 16) {
            const __m512 e = expNonPositive(_mm512_sub_ps(_mm512_load_ps(s + j), mv));
            _mm512_store_ps(s + j, e);
            l16 = _mm512_add_ps(l16, e);
        }
        // The weighted values: the chunk's value rows (in L2) once per head and block of 64 columns, the
        // block's sums in registers (a fixed number of them, so they stay there).
        float* out = part + static_cast<std::size_t>(i) * stride;
        out[0] = m;
        out[1] = _mm512_reduce_add_ps(l16);
        const float* values = a.values + static_cast<std::size_t>(p0) * kvDim + static_cast<std::size_t>(g) * hd;
        const auto weighted = [&]<int kVectors>(int column) {
            __m512 acc[kVectors];
            for (int v = 0; v < kVectors; ++v) acc[v] = _mm512_setzero_ps();
            for (int j = 0; j < n; ++j) {
                const float* vr = values + static_cast<std::size_t>(j) * kvDim + column;
                const __m512 w = _mm512_set1_ps(s[j]);
                for (int v = 0; v < kVectors; ++v) acc[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vr + 16 * v), acc[v]);
            }
            for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(out + 2 + column + 16 * v, acc[v]);
        };
        int column = 0;
        for (; column + 64 <= hd; column += 64) weighted.template operator()<4>(column);
        for (; column < hd; column += 16) weighted.template operator()<1>(column);
    }
}

}  // namespace

bool gqaAttentionFits(int heads, int kvHeads, int headDim) {
    return kvHeads > 0 && heads % kvHeads == 0 && heads / kvHeads <= kMaxGroup && headDim % 16 == 0 && headDim > 0 &&
           headDim <= kMaxHeadDim;
}

void gqaAttentionAvx512(const GqaAttentionArgs& a, ThreadPool& pool) {
    const int group = a.heads / a.kvHeads, hd = a.headDim;
    const std::size_t stride = static_cast<std::size_t>(hd) + 2, qDim = static_cast<std::size_t>(a.heads) * hd;
    const std::size_t partFloats = static_cast<std::size_t>(group) * stride;  // one work item's partials
    const auto itemsOf = [&](int t) { return static_cast<std::size_t>(a.kvHeads) * static_cast<std::size_t>(chunksOf(a, t)); };
    // Tokens in runs whose partials fit kPartialBytes (a long prompt's would take gigabytes at once); work
    // items (token, key head, chunk) token by token, partials in the same order.
    thread_local std::vector<float> partials;
    std::vector<std::size_t> firstItem;
    for (int t0 = 0; t0 < a.tokens;) {
        firstItem.assign(1, 0);
        int t1 = t0;
        while (t1 < a.tokens && (t1 == t0 || (firstItem.back() + itemsOf(t1)) * partFloats * sizeof(float) <= kPartialBytes)) {
            firstItem.push_back(firstItem.back() + itemsOf(t1));
            ++t1;
        }
        const std::size_t items = firstItem.back();
        partials.resize(items * partFloats);
        float* parts = partials.data();
        pool.parallelFor(items, 1, [&](std::size_t begin, std::size_t end) {
            int r = static_cast<int>(std::upper_bound(firstItem.begin(), firstItem.end(), begin) - firstItem.begin()) - 1;
            for (std::size_t item = begin; item < end; ++item) {
                while (item >= firstItem[r + 1]) ++r;
                const std::size_t local = item - firstItem[r];
                const int chunks = chunksOf(a, t0 + r);
                attendChunk(a, t0 + r, static_cast<int>(local / chunks), static_cast<int>(local % chunks), parts + item * partFloats);
            }
        });
        // Each (token, head): its chunks rescaled to their common maximum and summed.
        pool.parallelFor(static_cast<std::size_t>(t1 - t0) * a.heads, 4, [&](std::size_t begin, std::size_t end) {
            for (std::size_t th = begin; th < end; ++th) {
                const int r = static_cast<int>(th / a.heads), h = static_cast<int>(th % a.heads), t = t0 + r;
                const int g = h / group, i = h % group, chunks = chunksOf(a, t);
                const auto partOf = [&](int c) {
                    return parts + (firstItem[r] + static_cast<std::size_t>(g) * chunks + c) * partFloats + i * stride;
                };
                float m = -INFINITY;
                for (int c = 0; c < chunks; ++c) m = std::max(m, partOf(c)[0]);
                float l = 0.0f;
                float* out = a.out + static_cast<std::size_t>(t) * qDim + static_cast<std::size_t>(h) * hd;
                std::fill_n(out, hd, 0.0f);
                for (int c = 0; c < chunks; ++c) {
                    const float* p = partOf(c);
                    const float w = std::exp(p[0] - m);
                    l += p[1] * w;
                    for (int d = 0; d < hd; ++d) out[d] += p[2 + d] * w;
                }
                const float inv = 1.0f / l;
                for (int d = 0; d < hd; ++d) out[d] *= inv;
            }
        });
        t0 = t1;
    }
}

}  // namespace tandem::cpu
