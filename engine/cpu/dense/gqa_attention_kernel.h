#pragma once
// The attention kernels of gqa_attention.h, written once over a vector type S (S::V of S::N floats and its
// operations: gqa_attention_avx512.cpp's 16 lanes, gqa_attention_avx2.cpp's 8). Included only by those two
// files, each compiled for its instruction set.
//
// Both forms are mapped onto Terms: a score is the sum of one or two query-key dot products (GQA: the
// head's query and its key head's keys; MLA in the absorbed form: the latent query against the cached
// latent rows, plus the rope part against the rope keys), and the values are rows of their own (MLA:
// the latent rows again), each with its strides.
//
// An int8 cache (model::KvCache's Int8 type) gives codes and a scale per (position, key head) instead of
// float rows: attendChunk widens its chunk's rows of its key head (codes times scale, S::loadInt8) into a
// per-thread buffer once, and the float32 code runs over that buffer (rows rebased to the chunk's first
// position, Terms::rowBase) for all the query heads of its block; MLA's values, being its latent keys, are
// widened once for both.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/dense/gqa_attention.h"

namespace tandem::cpu::gqa_detail {

constexpr int kChunk = 256;  // cached positions a work item takes
constexpr int kBlock = kGqaMaxGroup;  // query heads a work item takes (a group's heads in blocks of this)
constexpr std::size_t kPartialBytes = 32u << 20;  // the chunks' partial results held at once

struct Segment {
    const float* q = nullptr;
    std::size_t qToken = 0, qHead = 0;  // query (t, h) at q + t * qToken + h * qHead
    const float* k = nullptr;
    std::size_t kRow = 0, kHead = 0;    // key head g of position p at k + (p - rowBase) * kRow + g * kHead
    int dim = 0;                        // a multiple of S::N
    // Int8 instead of k: the codes at kCodes + p * kRow + g * kHead (these strides then the codes'), their
    // scale kScales[p * sRow + g * sHead].
    const std::int8_t* kCodes = nullptr;
    const float* kScales = nullptr;
    std::size_t sRow = 0, sHead = 0;
};

struct Terms {
    Segment seg[2];
    int segments = 1;
    const float* v = nullptr;
    std::size_t vRow = 0, vHead = 0;
    int vDim = 0;                         // a multiple of S::N
    float* out = nullptr;
    std::size_t oToken = 0, oHead = 0;    // [vDim] per (token, head)
    int tokens = 0, start = 0, window = 0, heads = 0, kvHeads = 0;
    float scale = 1.0f;
    const float* sinks = nullptr;         // per head, or none
    int rowBase = 0;                      // the position of k's and v's first row
    // Int8 instead of v, as Segment's (vRow and vHead then the codes' strides).
    const std::int8_t* vCodes = nullptr;
    const float* vScales = nullptr;
    std::size_t vsRow = 0, vsHead = 0;
    bool quantized() const { return seg[0].kCodes != nullptr; }
    int group() const { return heads / kvHeads; }
    int blocks() const { return (group() + kBlock - 1) / kBlock; }
};

inline int firstPosition(const Terms& a, int position) { return a.window > 0 ? std::max(0, position - a.window + 1) : 0; }

inline int chunksOf(const Terms& a, int t) {
    const int position = a.start + t;
    return (position - firstPosition(a, position) + kChunk) / kChunk;
}

// One chunk of one token's positions for block b of the query heads of key head g: each head's running
// maximum, sum of exponentials and weighted sum of values, written to part[i * (vDim + 2) ...].
template <class S>
void attendFloat(const Terms& a, int t, int g, int b, int chunk, float* part) {
    using V = typename S::V;
    constexpr int N = S::N;
    const int groupFirst = g * a.group() + b * kBlock;
    const int heads = std::min(kBlock, a.group() - b * kBlock);
    const int position = a.start + t;
    const int p0 = firstPosition(a, position) + chunk * kChunk, p1 = std::min(p0 + kChunk, position + 1);
    const int n = p1 - p0, padded = (n + N - 1) / N * N;
    alignas(64) float scores[kBlock][kChunk];
    const V scale = S::set1(a.scale);
    const auto query = [&](int s, int i) { return a.seg[s].q + t * a.seg[s].qToken + static_cast<std::size_t>(groupFirst + i) * a.seg[s].qHead; };
    const auto key = [&](int s, int p) {
        return a.seg[s].k + static_cast<std::size_t>(p - a.rowBase) * a.seg[s].kRow + static_cast<std::size_t>(g) * a.seg[s].kHead;
    };

    // Scores: N key rows at a time (they stay in L1) for every head of the block, each head's query vector
    // loaded once for the N; the rest one row at a time.
    int first = 0;
    for (; first + N <= n; first += N) {
        for (int i = 0; i < heads; ++i) {
            V acc[N];
            for (int r = 0; r < N; ++r) acc[r] = S::set1(0.0f);
            for (int s = 0; s < a.segments; ++s) {
                const float* qi = query(s, i);
                const float* k = key(s, p0 + first);
                const std::size_t row = a.seg[s].kRow;
                for (int v = 0; v < a.seg[s].dim / N; ++v) {
                    const V qv = S::loadu(qi + N * v);
                    for (int r = 0; r < N; ++r) acc[r] = S::fmadd(qv, S::loadu(k + r * row + N * v), acc[r]);
                }
            }
            S::store(scores[i] + first, S::mul(S::sumEach(acc), scale));
        }
    }
    for (int j = first; j < n; ++j) {
        for (int i = 0; i < heads; ++i) {
            V acc = S::set1(0.0f);
            for (int s = 0; s < a.segments; ++s) {
                const float* qi = query(s, i);
                const float* k = key(s, p0 + j);
                for (int v = 0; v < a.seg[s].dim / N; ++v) acc = S::fmadd(S::loadu(qi + N * v), S::loadu(k + N * v), acc);
            }
            scores[i][j] = S::sum(acc) * a.scale;
        }
    }
    const int vd = a.vDim;
    const std::size_t stride = static_cast<std::size_t>(vd) + 2;
    for (int i = 0; i < heads; ++i) {
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
        float* out = part + static_cast<std::size_t>(i) * stride;
        out[0] = m;
        out[1] = S::sum(lN);
    }
    // The weighted values: the chunk's value rows (in L2) once per pair of heads and block of 4 vectors of
    // columns, each row's vectors loaded once for both heads, the sums in registers (a fixed number of them,
    // so they stay there). Each head's sums are added in the same order as one head at a time would.
    const float* values = a.v + static_cast<std::size_t>(p0 - a.rowBase) * a.vRow + static_cast<std::size_t>(g) * a.vHead;
    const auto weighted = [&]<int kHeads, int kVectors>(int i, int column) {
        V acc[kHeads][kVectors];
        for (int h = 0; h < kHeads; ++h)
            for (int v = 0; v < kVectors; ++v) acc[h][v] = S::set1(0.0f);
        for (int j = 0; j < n; ++j) {
            const float* vr = values + static_cast<std::size_t>(j) * a.vRow + column;
            V x[kVectors];
            for (int v = 0; v < kVectors; ++v) x[v] = S::loadu(vr + N * v);
            for (int h = 0; h < kHeads; ++h) {
                const V w = S::set1(scores[i + h][j]);
                for (int v = 0; v < kVectors; ++v) acc[h][v] = S::fmadd(w, x[v], acc[h][v]);
            }
        }
        for (int h = 0; h < kHeads; ++h)
            for (int v = 0; v < kVectors; ++v) S::storeu(part + static_cast<std::size_t>(i + h) * stride + 2 + column + N * v, acc[h][v]);
    };
    // Value rows that lie back to back (MLA's latent rows, an int8 cache's widened chunk), on AVX-512: eight
    // heads at a time, two vectors of columns, so the chunk is read half as often (after 4096 positions on two
    // Zen 4 cores: MLA 1.93 -> 1.51 ms a layer, GQA on int8 codes 0.95 -> 0.79). GQA's float32 rows, 2 KB
    // apart, took 15% longer so and keep the pairs; so does AVX2, whose 16 registers cannot hold the 16 sums.
    int i = 0;
    if constexpr (N == 16) {
        if (a.vRow == static_cast<std::size_t>(vd))
            for (; i + 8 <= heads; i += 8) {
                int column = 0;
                for (; column + 2 * N <= vd; column += 2 * N) weighted.template operator()<8, 2>(i, column);
                for (; column < vd; column += N) weighted.template operator()<8, 1>(i, column);
            }
    }
    for (; i + 2 <= heads; i += 2) {
        int column = 0;
        for (; column + 4 * N <= vd; column += 4 * N) weighted.template operator()<2, 4>(i, column);
        for (; column < vd; column += N) weighted.template operator()<2, 1>(i, column);
    }
    for (; i < heads; ++i) {
        int column = 0;
        for (; column + 4 * N <= vd; column += 4 * N) weighted.template operator()<1, 4>(i, column);
        for (; column < vd; column += N) weighted.template operator()<1, 1>(i, column);
    }
}

// rows x dim codes (row r at codes + r * row) times their scales (row r's at scales[r * scaleRow]) as float32
// rows of dim.
template <class S>
void widen(const std::int8_t* codes, std::size_t row, const float* scales, std::size_t scaleRow, int rows, int dim, float* out) {
    for (int r = 0; r < rows; ++r) {
        const std::int8_t* c = codes + static_cast<std::size_t>(r) * row;
        const typename S::V scale = S::set1(scales[static_cast<std::size_t>(r) * scaleRow]);
        float* o = out + static_cast<std::size_t>(r) * dim;
        for (int i = 0; i < dim; i += S::N) S::storeu(o + i, S::mul(S::loadInt8(c + i), scale));
    }
}

// One chunk (attendFloat's): over the float32 rows, or an int8 cache's rows of key head g widened first.
template <class S>
void attendChunk(const Terms& a, int t, int g, int b, int chunk, float* part) {
    if (!a.quantized()) return attendFloat<S>(a, t, g, b, chunk, part);
    const int position = a.start + t;
    const int p0 = firstPosition(a, position) + chunk * kChunk, n = std::min(p0 + kChunk, position + 1) - p0;
    const bool valuesAreKeys = a.vCodes == a.seg[0].kCodes && a.vRow == a.seg[0].kRow && a.vHead == a.seg[0].kHead;
    std::size_t floats = valuesAreKeys ? 0 : static_cast<std::size_t>(a.vDim);
    for (int s = 0; s < a.segments; ++s) floats += static_cast<std::size_t>(a.seg[s].dim);
    thread_local std::vector<float> rows;  // the buffer only; its rows are this chunk's
    rows.resize(floats * static_cast<std::size_t>(kChunk));
    Terms f = a;
    f.rowBase = p0;
    float* next = rows.data();
    const auto gs = static_cast<std::size_t>(g), ps = static_cast<std::size_t>(p0);
    for (int s = 0; s < a.segments; ++s) {
        const Segment& q = a.seg[s];
        if (q.dim > 0)
            widen<S>(q.kCodes + ps * q.kRow + gs * q.kHead, q.kRow, q.kScales + ps * q.sRow + gs * q.sHead, q.sRow, n, q.dim, next);
        f.seg[s].k = next;
        f.seg[s].kRow = static_cast<std::size_t>(q.dim);
        f.seg[s].kHead = 0;
        next += static_cast<std::size_t>(q.dim) * kChunk;
    }
    if (valuesAreKeys) {
        f.v = f.seg[0].k;
    } else {
        widen<S>(a.vCodes + ps * a.vRow + gs * a.vHead, a.vRow, a.vScales + ps * a.vsRow + gs * a.vsHead, a.vsRow, n, a.vDim, next);
        f.v = next;
    }
    f.vRow = static_cast<std::size_t>(a.vDim);
    f.vHead = 0;
    attendFloat<S>(f, t, g, b, chunk, part);
}

template <class S>
void attention(const Terms& a, ThreadPool& pool) {
    const int group = a.group(), blocks = a.blocks(), vd = a.vDim;
    const std::size_t stride = static_cast<std::size_t>(vd) + 2;
    // One work item's partials: a block of heads (a whole group when it is no larger).
    const std::size_t partFloats = static_cast<std::size_t>(std::min(kBlock, group)) * stride;
    const std::size_t perChunk = static_cast<std::size_t>(a.kvHeads) * static_cast<std::size_t>(blocks);
    const auto itemsOf = [&](int t) { return perChunk * static_cast<std::size_t>(chunksOf(a, t)); };
    // Tokens in runs whose partials fit kPartialBytes (a long prompt's would take gigabytes at once); work
    // items (token, key head, block of heads, chunk) token by token, partials in the same order.
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
                const auto chunks = static_cast<std::size_t>(chunksOf(a, t0 + r));
                const std::size_t gb = local / chunks;
                attendChunk<S>(a, t0 + r, static_cast<int>(gb / blocks), static_cast<int>(gb % blocks),
                               static_cast<int>(local % chunks), parts + item * partFloats);
            }
        });
        // Each (token, head): its chunks rescaled to their common maximum and summed.
        pool.parallelFor(static_cast<std::size_t>(t1 - t0) * a.heads, 4, [&](std::size_t begin, std::size_t end) {
            for (std::size_t th = begin; th < end; ++th) {
                const int r = static_cast<int>(th / a.heads), h = static_cast<int>(th % a.heads), t = t0 + r;
                const int g = h / group, b = (h % group) / kBlock, i = (h % group) % kBlock, chunks = chunksOf(a, t);
                const auto partOf = [&](int c) {
                    return parts + (firstItem[r] + (static_cast<std::size_t>(g) * blocks + b) * chunks + c) * partFloats + i * stride;
                };
                float m = a.sinks ? a.sinks[h] : -INFINITY;
                for (int c = 0; c < chunks; ++c) m = std::max(m, partOf(c)[0]);
                float l = a.sinks ? std::exp(a.sinks[h] - m) : 0.0f;
                float* out = a.out + static_cast<std::size_t>(t) * a.oToken + static_cast<std::size_t>(h) * a.oHead;
                std::fill_n(out, vd, 0.0f);
                for (int c = 0; c < chunks; ++c) {
                    const float* p = partOf(c);
                    const float w = std::exp(p[0] - m);
                    l += p[1] * w;
                    for (int d = 0; d < vd; ++d) out[d] += p[2 + d] * w;
                }
                const float inv = 1.0f / l;
                for (int d = 0; d < vd; ++d) out[d] *= inv;
            }
        });
        t0 = t1;
    }
}

inline Terms gqaTerms(const GqaAttentionArgs& a) {
    Terms x;
    const auto hd = static_cast<std::size_t>(a.headDim);
    const std::size_t kvDim = static_cast<std::size_t>(a.kvHeads) * hd, qDim = static_cast<std::size_t>(a.heads) * hd;
    x.seg[0] = Segment{a.q, qDim, hd, a.keys, kvDim, hd, a.headDim};
    x.v = a.values;
    x.vRow = kvDim;
    x.vHead = hd;
    x.vDim = a.headDim;
    x.out = a.out;
    x.oToken = qDim;
    x.oHead = hd;
    x.tokens = a.tokens;
    x.start = a.start;
    x.window = a.window;
    x.heads = a.heads;
    x.kvHeads = a.kvHeads;
    x.scale = a.scale;
    x.sinks = a.sinks;
    if (a.keyCodes) {  // key head by key head: a head's rows one after another
        x.seg[0].kCodes = a.keyCodes;
        x.seg[0].kRow = hd;
        x.seg[0].kHead = a.codesHead;
        x.seg[0].kScales = a.keyScales;
        x.seg[0].sRow = 1;
        x.seg[0].sHead = a.scalesHead;
        x.vCodes = a.valueCodes;
        x.vRow = hd;
        x.vHead = a.codesHead;
        x.vScales = a.valueScales;
        x.vsRow = 1;
        x.vsHead = a.scalesHead;
    }
    return x;
}

inline Terms mlaTerms(const MlaAttentionArgs& a) {
    Terms x;
    const auto latent = static_cast<std::size_t>(a.latent), rope = static_cast<std::size_t>(a.ropeDim);
    const auto heads = static_cast<std::size_t>(a.heads);
    x.seg[0] = Segment{a.qLatent, heads * latent, latent, a.latentRows, latent, 0, a.latent};
    x.seg[1] = Segment{a.qRope, heads * a.qRopeHead, a.qRopeHead, a.ropeRows, rope, 0, a.ropeDim};
    x.segments = 2;
    x.v = a.latentRows;
    x.vRow = latent;
    x.vDim = a.latent;
    x.out = a.out;
    x.oToken = heads * latent;
    x.oHead = latent;
    x.tokens = a.tokens;
    x.start = a.start;
    x.heads = a.heads;
    x.kvHeads = 1;
    x.scale = a.scale;
    if (a.latentCodes) {
        x.seg[0].kCodes = a.latentCodes;
        x.seg[0].kScales = a.latentScales;
        x.seg[0].sRow = 1;
        x.seg[1].kCodes = a.ropeCodes;
        x.seg[1].kScales = a.ropeScales;
        x.seg[1].sRow = 1;
        x.vCodes = a.latentCodes;
        x.vScales = a.latentScales;
        x.vsRow = 1;
    }
    return x;
}

}  // namespace tandem::cpu::gqa_detail
