#pragma once
// The prompt's attention (many query tokens in one call) of gqa_attention_kernel.h's Terms, tiled as flash
// attention is: a work item takes a tile of query rows (tokens x heads of one key head, at most kTileRows)
// and walks the key positions they see in blocks of kKeys, keeping each row's running maximum, sum of
// exponentials and weighted values (online softmax), so each key and value row is read once per tile
// instead of once per token. A block's keys are packed transposed ([dimension][key], from float32 rows or
// int8 codes times their scales), so its scores are a small matrix product held in registers: kScoreRows
// rows by 2 vectors of keys, one key load for kScoreRows multiply-adds; the weighted values the same, rows
// by 4 vectors of value columns. Causal and window masks apply only where a block crosses them.
//
// Roofline (2-core Zen 4, 512-bit FMA at one a cycle a core): ~230 GFLOP/s in float32. The per-token kernel
// (attendFloat) reaches 65-86 GFLOP/s on prompts of 512-8192 tokens (scripts/bench_kv_attention.cpp
// gqa-prompt), bound by loading a key vector for each multiply-add and a horizontal sum per score.
// Included only by gqa_attention_avx512.cpp and gqa_attention_avx2.cpp, each compiled for its instruction
// set; attend() chooses between this and the per-token kernel.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cpu/dense/gqa_attention_kernel.h"

namespace tandem::cpu::gqa_detail {

constexpr int kTileRows = 64;  // query rows (token, head) a work item takes
constexpr int kKeys = 64;      // key positions a block takes: a multiple of 2 vectors of either width
constexpr int kPromptMinTokens = 16;  // fewer: the per-token kernel

template <class S>
struct PromptRows {
    static constexpr int kScore = S::N == 16 ? 8 : 4;   // rows a score tile takes (x 2 vectors of keys)
    static constexpr int kWeighted = S::N == 16 ? 4 : 2;  // rows a weighted-values tile takes (x 4 vectors)
};

// A float buffer whose data is 64-byte aligned (the vector loads of the packed keys, scores and sums).
class AlignedFloats {
public:
    float* take(std::size_t n) {
        storage_.resize(n + 16);
        const auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
        return storage_.data() + ((64 - address % 64) % 64) / sizeof(float);
    }

private:
    std::vector<float> storage_;
};

// One work item's buffers, reused across items on a thread.
struct PromptScratch {
    AlignedFloats keys;    // each segment's block transposed: [dim][kKeys], one after another
    AlignedFloats values;  // an int8 cache's value rows widened: [kKeys][vDim]
    AlignedFloats scores;  // [kTileRows][kKeys]: scores, then their exponentials
    AlignedFloats out;     // [rows][vDim]: the weighted values so far
    float m[kTileRows], l[kTileRows], alpha[kTileRows];
};

// Scores of rows [r, r + M) against keys [k0, k0 + 2N) of the packed block: sums over each segment's
// dimensions of query times key, times the scale, into scores. Each sum is taken in runs of kScoreRun
// dimensions, the runs added in `scores`: one multiply-add chain over all of an MLA score's 576 dimensions
// was 4-8x the per-token kernel's rounding error (which sums 16 lanes apart).
constexpr int kScoreRun = 32;
template <class S, int M>
void scoreTile(const Terms& a, const float* const* q, const float* packed, int k0, float* scores) {
    using V = typename S::V;
    constexpr int N = S::N;
    const auto out = [&](int m, int half) { return scores + static_cast<std::size_t>(m) * kKeys + k0 + half * N; };
    bool first = true;
    const float* kt = packed;
    for (int s = 0; s < a.segments; ++s) {
        const int dim = a.seg[s].dim;
        const float* const* qs = q + s * kTileRows;
        for (int d0 = 0; d0 < dim; d0 += kScoreRun) {
            V acc[M][2];
            for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = S::set1(0.0f);
            for (int d = d0; d < std::min(dim, d0 + kScoreRun); ++d) {
                const V k0v = S::load(kt + static_cast<std::size_t>(d) * kKeys + k0);
                const V k1v = S::load(kt + static_cast<std::size_t>(d) * kKeys + k0 + N);
                for (int m = 0; m < M; ++m) {
                    const V x = S::set1(qs[m][d]);
                    acc[m][0] = S::fmadd(x, k0v, acc[m][0]);
                    acc[m][1] = S::fmadd(x, k1v, acc[m][1]);
                }
            }
            for (int m = 0; m < M; ++m)
                for (int half = 0; half < 2; ++half) S::store(out(m, half), first ? acc[m][half] : S::add(S::load(out(m, half)), acc[m][half]));
            first = false;
        }
        kt += static_cast<std::size_t>(dim) * kKeys;
    }
    const V scale = S::set1(a.scale);
    for (int m = 0; m < M; ++m)
        for (int half = 0; half < 2; ++half) S::store(out(m, half), S::mul(S::load(out(m, half)), scale));
}

// out rows [r, r + M), columns [c, c + NV vectors): times their rows' alpha, plus the weights of the block's
// n keys times their value rows.
template <class S, int M, int NV>
void weightedTile(const float* weights, const float* values, std::size_t valueRow, int n, const float* alpha, float* out,
                  std::size_t outRow, int c) {
    using V = typename S::V;
    constexpr int N = S::N;
    V acc[M][NV];
    for (int m = 0; m < M; ++m) {
        const V am = S::set1(alpha[m]);
        for (int v = 0; v < NV; ++v) acc[m][v] = S::mul(S::load(out + m * outRow + c + v * N), am);
    }
    for (int j = 0; j < n; ++j) {
        const float* row = values + static_cast<std::size_t>(j) * valueRow + c;
        V x[NV];
        for (int v = 0; v < NV; ++v) x[v] = S::loadu(row + v * N);
        for (int m = 0; m < M; ++m) {
            const V w = S::set1(weights[static_cast<std::size_t>(m) * kKeys + j]);
            for (int v = 0; v < NV; ++v) acc[m][v] = S::fmadd(w, x[v], acc[m][v]);
        }
    }
    for (int m = 0; m < M; ++m)
        for (int v = 0; v < NV; ++v) S::store(out + m * outRow + c + v * N, acc[m][v]);
}

// Rows [0, rows) in tiles of M (f.template operator()<M>(first row)), then of 4, then one at a time.
template <int M, class F>
void inTiles(int rows, const F& f) {
    int r = 0;
    for (; r + M <= rows; r += M) f.template operator()<M>(r);
    if constexpr (M > 4)
        for (; r + 4 <= rows; r += 4) f.template operator()<4>(r);
    for (; r < rows; ++r) f.template operator()<1>(r);
}

// Tokens [t0, t1) with heads [firstHead, firstHead + headCount) of key head g: rows token-major.
template <class S>
void promptTile(const Terms& a, int g, int firstHead, int headCount, int t0, int t1, PromptScratch& w) {
    using V = typename S::V;
    constexpr int N = S::N;
    const int rows = (t1 - t0) * headCount, vd = a.vDim;
    const std::size_t vdz = static_cast<std::size_t>(vd);
    const float* q[2 * kTileRows];  // each segment's query of each row
    for (int r = 0; r < rows; ++r) {
        const int t = t0 + r / headCount, h = firstHead + r % headCount;
        for (int s = 0; s < a.segments; ++s)
            q[s * kTileRows + r] = a.seg[s].q + static_cast<std::size_t>(t) * a.seg[s].qToken + static_cast<std::size_t>(h) * a.seg[s].qHead;
    }
    int dims = 0;
    for (int s = 0; s < a.segments; ++s) dims += a.seg[s].dim;
    float* const keys = w.keys.take(static_cast<std::size_t>(dims) * kKeys);
    float* const scores = w.scores.take(static_cast<std::size_t>(kTileRows) * kKeys);
    float* const out = w.out.take(static_cast<std::size_t>(rows) * vdz);
    std::fill_n(out, static_cast<std::size_t>(rows) * vdz, 0.0f);
    float* const widened = a.quantized() ? w.values.take(static_cast<std::size_t>(kKeys) * vdz) : nullptr;
    std::fill_n(w.m, rows, -INFINITY);
    std::fill_n(w.l, rows, 0.0f);

    const int lastPosition = a.start + t1 - 1;
    const int begin = firstPosition(a, a.start + t0);
    const auto gs = static_cast<std::size_t>(g);
    for (int p0 = begin; p0 <= lastPosition; p0 += kKeys) {
        const int n = std::min(kKeys, lastPosition + 1 - p0);
        // The block's keys, transposed (zeros past n: their scores are masked).
        float* packed = keys;
        for (int s = 0; s < a.segments; ++s) {
            const Segment& seg = a.seg[s];
            const int dim = seg.dim;
            if (dim == 0) continue;  // MLA without a rope part: nothing to pack (nor scales to read)
            for (int j = 0; j < kKeys; ++j) {
                const auto p = static_cast<std::size_t>(p0 + j);
                if (j >= n) {
                    for (int d = 0; d < dim; ++d) packed[static_cast<std::size_t>(d) * kKeys + j] = 0.0f;
                } else if (seg.kCodes) {
                    const std::int8_t* c = seg.kCodes + p * seg.kRow + gs * seg.kHead;
                    const float scale = seg.kScales[p * seg.sRow + gs * seg.sHead];
                    for (int d = 0; d < dim; ++d) packed[static_cast<std::size_t>(d) * kKeys + j] = static_cast<float>(c[d]) * scale;
                } else {
                    const float* k = seg.k + (p - static_cast<std::size_t>(a.rowBase)) * seg.kRow + gs * seg.kHead;
                    for (int d = 0; d < dim; ++d) packed[static_cast<std::size_t>(d) * kKeys + j] = k[d];
                }
            }
            packed += static_cast<std::size_t>(dim) * kKeys;
        }
        // The block's value rows: the cache's own, or an int8 cache's widened.
        const float* values;
        std::size_t valueRow;
        const auto ps = static_cast<std::size_t>(p0);
        if (a.quantized()) {
            widen<S>(a.vCodes + ps * a.vRow + gs * a.vHead, a.vRow, a.vScales + ps * a.vsRow + gs * a.vsHead, a.vsRow, n, vd,
                     widened);
            values = widened;
            valueRow = vdz;
        } else {
            values = a.v + (ps - static_cast<std::size_t>(a.rowBase)) * a.vRow + gs * a.vHead;
            valueRow = a.vRow;
        }

        // Scores, then the masks where the block crosses them: a row sees [first, its own position].
        constexpr int MS = PromptRows<S>::kScore;
        for (int k0 = 0; k0 < kKeys; k0 += 2 * N) {
            if (p0 + k0 > lastPosition) {  // no row sees these keys
                for (int r = 0; r < rows; ++r) std::fill_n(scores + static_cast<std::size_t>(r) * kKeys + k0, 2 * N, -INFINITY);
                continue;
            }
            inTiles<MS>(rows, [&]<int M>(int r) { scoreTile<S, M>(a, q + r, keys, k0, scores + static_cast<std::size_t>(r) * kKeys); });
        }
        const bool crossesWindow = a.window > 0 && p0 < firstPosition(a, lastPosition);
        if (p0 + kKeys - 1 > a.start + t0 || crossesWindow) {
            for (int r = 0; r < rows; ++r) {
                const int position = a.start + t0 + r / headCount;
                const int lo = std::clamp(firstPosition(a, position) - p0, 0, kKeys);
                const int hi = std::clamp(position + 1 - p0, 0, kKeys);
                float* row = scores + static_cast<std::size_t>(r) * kKeys;
                std::fill(row, row + lo, -INFINITY);
                std::fill(row + hi, row + kKeys, -INFINITY);
            }
        }
        // Online softmax: each row's new maximum, its old sums' rescaling, the block's exponentials.
        for (int r = 0; r < rows; ++r) {
            float* row = scores + static_cast<std::size_t>(r) * kKeys;
            V mv = S::set1(-INFINITY);
            for (int j = 0; j < kKeys; j += N) mv = S::max(mv, S::load(row + j));
            const float blockMax = S::largest(mv);
            if (blockMax == -INFINITY) {  // a row that sees none of the block's keys (a window's start)
                std::fill(row, row + kKeys, 0.0f);
                w.alpha[r] = 1.0f;
                continue;
            }
            const float m = std::max(w.m[r], blockMax);
            w.alpha[r] = std::exp(w.m[r] - m);
            w.m[r] = m;
            const V mb = S::set1(m);
            V sum = S::set1(0.0f);
            for (int j = 0; j < kKeys; j += N) {
                const V e = S::expNonPositive(S::sub(S::load(row + j), mb));
                S::store(row + j, e);
                sum = S::add(sum, e);
            }
            w.l[r] = w.l[r] * w.alpha[r] + S::sum(sum);
        }
        // The weighted values.
        constexpr int MW = PromptRows<S>::kWeighted;
        const auto weighted = [&]<int M>(int r) {
            const float* weights = scores + static_cast<std::size_t>(r) * kKeys;
            float* o = out + static_cast<std::size_t>(r) * vdz;
            int c = 0;
            for (; c + 4 * N <= vd; c += 4 * N) weightedTile<S, M, 4>(weights, values, valueRow, n, w.alpha + r, o, vdz, c);
            for (; c < vd; c += N) weightedTile<S, M, 1>(weights, values, valueRow, n, w.alpha + r, o, vdz, c);
        };
        inTiles<MW>(rows, weighted);
    }
    // Each row's weighted values over its sum (a sink joins the sum with no value).
    for (int r = 0; r < rows; ++r) {
        const int t = t0 + r / headCount, h = firstHead + r % headCount;
        float l = w.l[r];
        if (a.sinks) l += std::exp(a.sinks[h] - w.m[r]);
        const float inv = 1.0f / l;
        const float* o = out + static_cast<std::size_t>(r) * vdz;
        float* dst = a.out + static_cast<std::size_t>(t) * a.oToken + static_cast<std::size_t>(h) * a.oHead;
        for (int d = 0; d < vd; ++d) dst[d] = o[d] * inv;
    }
}

// How a call's rows split into work items: (key head, block of heads, tile of tokens).
struct PromptPlan {
    int headBlock, headBlocks, tileTokens, tiles;
    std::size_t perTile;  // items of one tile of tokens
    std::size_t items() const { return perTile * static_cast<std::size_t>(tiles); }
};

inline PromptPlan planPrompt(const Terms& a) {
    PromptPlan p;
    p.headBlock = std::min(a.group(), kTileRows);
    p.headBlocks = (a.group() + p.headBlock - 1) / p.headBlock;
    p.tileTokens = std::max(1, kTileRows / p.headBlock);
    p.tiles = (a.tokens + p.tileTokens - 1) / p.tileTokens;
    p.perTile = static_cast<std::size_t>(a.kvHeads) * static_cast<std::size_t>(p.headBlocks);
    return p;
}

// Every token of the call: the items of one key head and block of heads together (the threads then share
// its keys and values in the CPU's caches: at 8K positions a key head's float32 rows are 8 MB), within them
// the tiles of the last tokens (the most keys) first so the threads' shares even out.
template <class S>
void promptAttention(const Terms& a, const PromptPlan& plan, ThreadPool& pool) {
    pool.parallelFor(plan.items(), 1, [&](std::size_t begin, std::size_t end) {
        thread_local PromptScratch scratch;
        for (std::size_t item = begin; item < end; ++item) {
            const int tile = plan.tiles - 1 - static_cast<int>(item % static_cast<std::size_t>(plan.tiles));
            const int within = static_cast<int>(item / static_cast<std::size_t>(plan.tiles));
            const int g = within / plan.headBlocks, b = within % plan.headBlocks;
            const int firstHead = g * a.group() + b * plan.headBlock, headCount = std::min(plan.headBlock, a.group() - b * plan.headBlock);
            const int t0 = tile * plan.tileTokens, t1 = std::min(a.tokens, t0 + plan.tileTokens);
            promptTile<S>(a, g, firstHead, headCount, t0, t1, scratch);
        }
    });
}

// The prompt kernel from kPromptMinTokens tokens (a decode step, a decode batch's sequence and a few tokens
// split by cached positions instead). By tokens only, not by the threads there are, so a prompt's results do
// not depend on the number of threads.
template <class S>
void attend(const Terms& a, ThreadPool& pool) {
    if (a.tokens >= kPromptMinTokens) return promptAttention<S>(a, planPrompt(a), pool);
    attention<S>(a, pool);
}

}  // namespace tandem::cpu::gqa_detail
