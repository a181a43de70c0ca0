#pragma once
// The GQA attention kernel of gqa_attention.h, written once over a vector type S (S::V of S::N floats and
// its operations: gqa_attention_avx512.cpp's 16 lanes, gqa_attention_avx2.cpp's 8). Included only by
// those two files, each compiled for its instruction set.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/dense/gqa_attention.h"

namespace tandem::cpu::gqa_detail {

constexpr int kChunk = 256;  // cached positions a work item takes
constexpr std::size_t kPartialBytes = 32u << 20;  // the chunks' partial results held at once

inline int firstPosition(const GqaAttentionArgs& a, int position) { return a.window > 0 ? std::max(0, position - a.window + 1) : 0; }

inline int chunksOf(const GqaAttentionArgs& a, int t) {
    const int position = a.start + t;
    return (position - firstPosition(a, position) + kChunk) / kChunk;
}

// One chunk of one token's positions for the `group` query heads of key head g: each head's running
// maximum, sum of exponentials and weighted sum of values, written to part[i * (headDim + 2) ...].
template <class S>
void attendChunk(const GqaAttentionArgs& a, int t, int g, int chunk, float* part) {
    using V = typename S::V;
    constexpr int N = S::N;
    const int hd = a.headDim, group = a.heads / a.kvHeads, vectors = hd / N;
    const std::size_t kvDim = static_cast<std::size_t>(a.kvHeads) * hd, qDim = static_cast<std::size_t>(a.heads) * hd;
    const int position = a.start + t;
    const int p0 = firstPosition(a, position) + chunk * kChunk, p1 = std::min(p0 + kChunk, position + 1);
    const int n = p1 - p0, padded = (n + N - 1) / N * N;
    alignas(64) float scores[kGqaMaxGroup][kChunk];
    const float* q = a.q + t * qDim + static_cast<std::size_t>(g) * group * hd;
    const V scale = S::set1(a.scale);

    // Scores: N key rows at a time (they stay in L1) for every head of the group, each head's query vector
    // loaded once for the N; the rest one row at a time.
    int first = 0;
    for (; first + N <= n; first += N) {
        const float* k = a.keys + static_cast<std::size_t>(p0 + first) * kvDim + static_cast<std::size_t>(g) * hd;
        for (int i = 0; i < group; ++i) {
            const float* qi = q + static_cast<std::size_t>(i) * hd;
            V acc[N];
            const V q0 = S::loadu(qi);
            for (int r = 0; r < N; ++r) acc[r] = S::mul(q0, S::loadu(k + r * kvDim));
            for (int v = 1; v < vectors; ++v) {
                const V qv = S::loadu(qi + N * v);
                for (int r = 0; r < N; ++r) acc[r] = S::fmadd(qv, S::loadu(k + r * kvDim + N * v), acc[r]);
            }
            S::store(scores[i] + first, S::mul(S::sumEach(acc), scale));
        }
    }
    for (int j = first; j < n; ++j) {
        const float* k = a.keys + static_cast<std::size_t>(p0 + j) * kvDim + static_cast<std::size_t>(g) * hd;
        for (int i = 0; i < group; ++i) {
            const float* qi = q + static_cast<std::size_t>(i) * hd;
            V acc = S::mul(S::loadu(qi), S::loadu(k));
            for (int v = 1; v < vectors; ++v) acc = S::fmadd(S::loadu(qi + N * v), S::loadu(k + N * v), acc);
            scores[i][j] = S::sum(acc) * a.scale;
        }
    }
    const std::size_t stride = static_cast<std::size_t>(hd) + 2;
    for (int i = 0; i < group; ++i) {
        float* s = scores[i];
        std::fill(s + n, s + padded, -INFINITY);
        V mN = S::set1(-INFINITY);
        for (int j = 0; j < padded; j += N) mN = S::max(mN, S::load(s + j));
        const float m = S::largest(mN);
        V lN = S::set1(0.0f);
        const V mv = S::set1(m);
        for (int j = 0; j < padded; j += N) {
            const V e = S::expNonPositive(S::sub(S::load(s + j), mv));
            S::store(s + j, e);
            lN = S::add(lN, e);
        }
        // The weighted values: the chunk's value rows (in L2) once per head and block of 4 vectors of
        // columns, the block's sums in registers (a fixed number of them, so they stay there).
        float* out = part + static_cast<std::size_t>(i) * stride;
        out[0] = m;
        out[1] = S::sum(lN);
        const float* values = a.values + static_cast<std::size_t>(p0) * kvDim + static_cast<std::size_t>(g) * hd;
        const auto weighted = [&]<int kVectors>(int column) {
            V acc[kVectors];
            for (int v = 0; v < kVectors; ++v) acc[v] = S::set1(0.0f);
            for (int j = 0; j < n; ++j) {
                const float* vr = values + static_cast<std::size_t>(j) * kvDim + column;
                const V w = S::set1(s[j]);
                for (int v = 0; v < kVectors; ++v) acc[v] = S::fmadd(w, S::loadu(vr + N * v), acc[v]);
            }
            for (int v = 0; v < kVectors; ++v) S::storeu(out + 2 + column + N * v, acc[v]);
        };
        int column = 0;
        for (; column + 4 * N <= hd; column += 4 * N) weighted.template operator()<4>(column);
        for (; column < hd; column += N) weighted.template operator()<1>(column);
    }
}

template <class S>
void attention(const GqaAttentionArgs& a, ThreadPool& pool) {
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
                attendChunk<S>(a, t0 + r, static_cast<int>(local / chunks), static_cast<int>(local % chunks),
                               parts + item * partFloats);
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

}  // namespace tandem::cpu::gqa_detail
