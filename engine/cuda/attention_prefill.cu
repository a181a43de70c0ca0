// Prefill attention on tensor cores, flash-attention style, for GQA heads of 32, 64 or 128 dimensions
// (attention.cu's kernels serve decode, MLA and other widths). One block of four warps takes 64 query
// rows that share a key head, each row one (token, query head) pair, so a tile of keys and values read
// once serves every query head of the group. Per tile of 64 keys: S = Q Kᵀ with mma.sync (16 rows a
// warp), the causal (and sliding-window) mask, the online softmax in registers, then O += P V with P
// taken straight from S's accumulators. Tiles past the block's last query position are never read.
//
// Precision: the KV cache is float32. With split precision (kernels.h) every operand is carried as a
// bf16 pair hi + lo and each product takes the three terms hi·hi + hi·lo + lo·hi, which leaves ~2^-16
// of relative error (as the split GEMMs); without it, one bf16 product. With oneTermValues (a long
// context's chunk) the scores Q·K stay split, where the rounding of a large score would move its weight,
// and P·V takes one fp16 term (weights in [0, 1], whose rounding averages out over the keys; fp16 since
// one bf16 term moved tiny-gpt-oss past tolerance at 8192 tokens).
#include <cfloat>
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/mma.cuh"

namespace tandem::cuda {

namespace {

constexpr int kFlashRows = 64;  // query rows per block, 16 per warp
constexpr int kFlashKeys = 64;  // keys per tile
constexpr int kFlashWarps = 4;
constexpr int kFlashThreads = 32 * kFlashWarps;

// Shared memory, in bf16 elements: Q [64 rows][D], K [64 keys][D] and V [64 keys][D], all row-major,
// each row padded by 8 so that ldmatrix's eight 16-byte rows (and the staging's 8-byte stores) fall in
// distinct banks; the three hi planes, then with split the three lo planes. Q is read into registers
// once; K's fragments load with ldmatrix, V's with ldmatrix.trans (no transposed stores).
template <int D>
struct Layout {
    static constexpr int kRowStride = D + 8;
    static constexpr int kQ = kFlashRows * kRowStride;
    static constexpr int kK = kFlashKeys * kRowStride;
    static constexpr int kV = kFlashKeys * kRowStride;
    static constexpr int kPlane = kQ + kK + kV;
    static constexpr std::size_t bytes(bool split) { return (split ? 2 : 1) * kPlane * sizeof(bf16); }
};

// Float4 loads a thread has in flight while filling a tile (of K and of V each).
constexpr int kFlashUnroll = 4;

// SplitValues: P·V split too (Split without it: the long-context form, Q·K split, P·V one fp16 term).
// Scores are kept in log2 units (scaled by log2 e) so that the softmax's exponentials are exp2.
template <int D, bool Split, bool SplitValues>
__global__ void __launch_bounds__(kFlashThreads) flashPrefillKernel(AttentionArgs a) {
    waitForPrevious();
    startNext();
    using L = Layout<D>;
    constexpr ValueForm VF = kValueForm<Split, SplitValues>;
    constexpr float kLog2e = 1.4426950408889634f;
    extern __shared__ __align__(16) unsigned char flashShared[];
    bf16* const qHi = reinterpret_cast<bf16*>(flashShared);
    bf16* const kHi = qHi + L::kQ;
    bf16* const vHi = kHi + L::kK;
    bf16* const qLo = qHi + L::kPlane;  // the lo planes: only with Split
    bf16* const kLo = kHi + L::kPlane;
    bf16* const vLo = vHi + L::kPlane;

    const int keyHead = blockIdx.y, firstRow = blockIdx.x * kFlashRows, rowCount = a.tokens * a.group;
    const int start = *a.start;
    const long headOffset = static_cast<long>(keyHead) * a.keyHeadStride;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const float scale = a.scale * kLog2e;

    for (int i = tid; i < kFlashRows * D / 4; i += kFlashThreads) {
        const int r = i / (D / 4), d = i % (D / 4) * 4, row = firstRow + r;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (row < rowCount) {
            const int t = row / a.group, h = keyHead * a.group + row % a.group;
            v = *reinterpret_cast<const float4*>(a.qA + static_cast<long>(t) * a.ldqA + static_cast<long>(h) * a.qAHeadStride + d);
        }
        put4<Split>(v, qHi + r * L::kRowStride + d, qLo + r * L::kRowStride + d);
    }
    __syncthreads();
    // The warp's 16 rows of Q as A fragments, for every tile.
    std::uint32_t qa[D / 16][4], qaLo[Split ? D / 16 : 1][4];
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
        ldmatrixA<L::kRowStride>(qHi, warp * 16, ks * 16, lane, qa[ks]);
        if constexpr (Split) ldmatrixA<L::kRowStride>(qLo, warp * 16, ks * 16, lane, qaLo[ks]);
    }

    // This thread's two rows (g and g + 8 of its warp's 16): their query positions (-1: no row) and the
    // first positions they attend to.
    const int rowA = firstRow + warp * 16 + g, rowB = rowA + 8;
    const int posA = rowA < rowCount ? start + rowA / a.group : -1;
    const int posB = rowB < rowCount ? start + rowB / a.group : -1;
    const int fromA = a.window > 0 ? posA - a.window + 1 : 0;
    const int fromB = a.window > 0 ? posB - a.window + 1 : 0;
    const int lastKey = start + min(a.tokens - 1, (firstRow + kFlashRows - 1) / a.group);
    const int firstKey = a.window > 0 ? max(0, start + firstRow / a.group - a.window + 1) : 0;

    float o[D / 8][4] = {};
    // A sink (gpt-oss) starts a row's softmax: m = the sink; its exp(sink - m) joins the sum at the end,
    // after the quad's lanes are summed (each lane's l holds only its columns). Log2 units, as the scores.
    const float sinkA = a.sinks && rowA < rowCount ? a.sinks[keyHead * a.group + rowA % a.group] * kLog2e : -INFINITY;
    const float sinkB = a.sinks && rowB < rowCount ? a.sinks[keyHead * a.group + rowB % a.group] * kLog2e : -INFINITY;
    float mA = sinkA, mB = sinkB, lA = 0.0f, lB = 0.0f;
    for (int j0 = firstKey; j0 <= lastKey; j0 += kFlashKeys) {
        const int n = min(kFlashKeys, lastKey - j0 + 1);
        __syncthreads();  // the previous tile is read
        // K and V row-major, kFlashUnroll rows' float4 of each in flight a thread; zeros past the tile's
        // end (P is 0 there, and 0 x NaN would not be).
        for (int i0 = tid; i0 < kFlashKeys * D / 4; i0 += kFlashThreads * kFlashUnroll) {
            float4 k[kFlashUnroll], v[kFlashUnroll];
#pragma unroll
            for (int u = 0; u < kFlashUnroll; ++u) {
                const int i = i0 + u * kFlashThreads, key = i / (D / 4), d = i % (D / 4) * 4;
                k[u] = v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (i < kFlashKeys * D / 4 && key < n) {
                    k[u] = *reinterpret_cast<const float4*>(a.keyA + static_cast<long>(j0 + key) * a.ldKeyA + headOffset + d);
                    v[u] = *reinterpret_cast<const float4*>(a.value + static_cast<long>(j0 + key) * a.ldValue + headOffset + d);
                }
            }
#pragma unroll
            for (int u = 0; u < kFlashUnroll; ++u) {
                const int i = i0 + u * kFlashThreads, key = i / (D / 4), d = i % (D / 4) * 4;
                if (i >= kFlashKeys * D / 4) continue;
                const int at = key * L::kRowStride + d;
                put4<Split>(k[u], kHi + at, kLo + at);
                putValues4<VF>(v[u], vHi + at, vLo + at);
            }
        }
        __syncthreads();

        // S = Q Kᵀ for the warp's 16 rows and the tile's 64 keys (8 blocks of 8 keys, two a load).
        float s[kFlashKeys / 8][4] = {};
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
            for (int nt = 0; nt < kFlashKeys / 8; nt += 2) {
                std::uint32_t b[4], bLo[4];
                ldmatrixB<L::kRowStride>(kHi, nt * 8, ks * 16, lane, b);
                mma(s[nt], qa[ks], b[0], b[1]);
                mma(s[nt + 1], qa[ks], b[2], b[3]);
                if constexpr (Split) {
                    ldmatrixB<L::kRowStride>(kLo, nt * 8, ks * 16, lane, bLo);
                    mma(s[nt], qa[ks], bLo[0], bLo[1]);
                    mma(s[nt + 1], qa[ks], bLo[2], bLo[3]);
                    mma(s[nt], qaLo[ks], b[0], b[1]);
                    mma(s[nt + 1], qaLo[ks], b[2], b[3]);
                }
            }

        // Mask, then the online softmax; the four lanes of a quad share their rows.
        float maxA = -INFINITY, maxB = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kFlashKeys / 8; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int key = j0 + nt * 8 + 2 * q + c;
                s[nt][c] = key <= posA && key >= fromA ? s[nt][c] * scale : -INFINITY;
                s[nt][2 + c] = key <= posB && key >= fromB ? s[nt][2 + c] * scale : -INFINITY;
                maxA = fmaxf(maxA, s[nt][c]);
                maxB = fmaxf(maxB, s[nt][2 + c]);
            }
#pragma unroll
        for (int o2 = 1; o2 <= 2; o2 <<= 1) {
            maxA = fmaxf(maxA, __shfl_xor_sync(0xffffffffu, maxA, o2));
            maxB = fmaxf(maxB, __shfl_xor_sync(0xffffffffu, maxB, o2));
        }
        const float newA = fmaxf(mA, maxA), newB = fmaxf(mB, maxB);
        // A row with nothing attended yet keeps m = -inf: its p are 0 and nothing is rescaled.
        const float baseA = newA == -INFINITY ? 0.0f : newA, baseB = newB == -INFINITY ? 0.0f : newB;
        const float alphaA = exp2f(mA - baseA), alphaB = exp2f(mB - baseB);
        mA = newA;
        mB = newB;
        float sumA = 0.0f, sumB = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kFlashKeys / 8; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                s[nt][c] = exp2f(s[nt][c] - baseA);
                s[nt][2 + c] = exp2f(s[nt][2 + c] - baseB);
                sumA += s[nt][c];
                sumB += s[nt][2 + c];
            }
        lA = lA * alphaA + sumA;  // this lane's columns; the quad's are summed at the end
        lB = lB * alphaB + sumB;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
            o[dt][0] *= alphaA;
            o[dt][1] *= alphaA;
            o[dt][2] *= alphaB;
            o[dt][3] *= alphaB;
        }

        // O += P V: P's A fragments are S's accumulators of two blocks of 8 keys; V's B fragments for two
        // blocks of 8 columns a load.
#pragma unroll
        for (int kt = 0; kt < kFlashKeys / 16; ++kt) {
            std::uint32_t pHi[4], pLo[4];
            weightPair<VF>(s[2 * kt][0], s[2 * kt][1], pHi[0], pLo[0]);
            weightPair<VF>(s[2 * kt][2], s[2 * kt][3], pHi[1], pLo[1]);
            weightPair<VF>(s[2 * kt + 1][0], s[2 * kt + 1][1], pHi[2], pLo[2]);
            weightPair<VF>(s[2 * kt + 1][2], s[2 * kt + 1][3], pHi[3], pLo[3]);
#pragma unroll
            for (int dt = 0; dt < D / 8; dt += 2) {
                std::uint32_t b[4], bLo[4];
                ldmatrixBTrans<L::kRowStride>(vHi, kt * 16, dt * 8, lane, b);
                mmaValues<VF>(o[dt], pHi, b[0], b[1]);
                mmaValues<VF>(o[dt + 1], pHi, b[2], b[3]);
                if constexpr (SplitValues) {
                    ldmatrixBTrans<L::kRowStride>(vLo, kt * 16, dt * 8, lane, bLo);
                    mma(o[dt], pHi, bLo[0], bLo[1]);
                    mma(o[dt + 1], pHi, bLo[2], bLo[3]);
                    mma(o[dt], pLo, b[0], b[1]);
                    mma(o[dt + 1], pLo, b[2], b[3]);
                }
            }
        }
    }

#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
        lA += __shfl_xor_sync(0xffffffffu, lA, o2);
        lB += __shfl_xor_sync(0xffffffffu, lB, o2);
    }
    if (sinkA > -INFINITY) lA += exp2f(sinkA - mA);
    if (sinkB > -INFINITY) lB += exp2f(sinkB - mB);
    // Every row attends at least to its own position, so l > 0 for rows that exist.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int row = half ? rowB : rowA;
        if (row >= rowCount) continue;
        const float inv = 1.0f / (half ? lB : lA);
        const int t = row / a.group, h = keyHead * a.group + row % a.group;
        bf16* const out = a.out + static_cast<long>(t) * a.ldOut + static_cast<long>(h) * a.outHeadStride;
        const long lo = static_cast<long>(a.tokens) * a.ldOut;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                bf16* hi = out + dt * 8 + 2 * q + c;
                storeBf16(o[dt][2 * half + c] * inv, hi, hi + lo, a.split);
            }
    }
}

template <int D, bool Split, bool SplitValues>
void launchFlash(const AttentionArgs& a, cudaStream_t s) {
    constexpr std::size_t bytes = Layout<D>::bytes(Split);
    TANDEM_CUDA_CHECK(cudaFuncSetAttribute(flashPrefillKernel<D, Split, SplitValues>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    const int rows = a.tokens * a.group;
    const dim3 grid((rows + kFlashRows - 1) / kFlashRows, a.heads / a.group);
    launchChained(flashPrefillKernel<D, Split, SplitValues>, grid, kFlashThreads, bytes, s, a);
}

template <int D>
void launchFlash(const AttentionArgs& a, cudaStream_t s) {
    if (!a.split)
        launchFlash<D, false, false>(a, s);
    else if (a.oneTermValues)
        launchFlash<D, true, false>(a, s);  // a long context's chunk: Q·K split, P·V one term
    else
        launchFlash<D, true, true>(a, s);
}

}  // namespace

bool launchFlashPrefill(const AttentionArgs& a, cudaStream_t s) {
    // GQA only (no second key part, values as wide as keys), float4-aligned rows and heads.
    if (a.tokens < 2 || a.dimB != 0 || a.dimV != a.dimA || a.splits > 1 || a.group < 1 || a.heads % a.group != 0)
        return false;
    if (a.ldqA % 4 || a.qAHeadStride % 4 || a.ldKeyA % 4 || a.ldValue % 4 || a.keyHeadStride % 4) return false;
    switch (a.dimA) {
    case 32: launchFlash<32>(a, s); return true;
    case 64: launchFlash<64>(a, s); return true;
    case 128: launchFlash<128>(a, s); return true;
    default: return false;
    }
}

}  // namespace tandem::cuda
