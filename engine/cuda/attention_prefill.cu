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

// Shared memory, in bf16 elements: Q [64 rows][D] and K [64 keys][D] row-major, V transposed
// [D][64 keys], each row padded by 8 so that the fragments' 32-bit loads (8 rows x 4 lanes) fall in 32
// distinct banks; the three hi planes, then with split the three lo planes.
template <int D>
struct Layout {
    static constexpr int kRowStride = D + 8;
    static constexpr int kValueStride = kFlashKeys + 8;
    static constexpr int kQ = kFlashRows * kRowStride;
    static constexpr int kK = kFlashKeys * kRowStride;
    static constexpr int kV = D * kValueStride;
    static constexpr int kPlane = kQ + kK + kV;
    static constexpr std::size_t bytes(bool split) { return (split ? 2 : 1) * kPlane * sizeof(bf16); }
};

// SplitValues: P·V split too (Split without it: the long-context form, Q·K split, P·V one fp16 term).
template <int D, bool Split, bool SplitValues>
__global__ void __launch_bounds__(kFlashThreads) flashPrefillKernel(AttentionArgs a) {
    waitForPrevious();
    startNext();
    using L = Layout<D>;
    constexpr ValueForm VF = kValueForm<Split, SplitValues>;
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

    for (int i = tid; i < kFlashRows * D / 4; i += kFlashThreads) {
        const int r = i / (D / 4), d = i % (D / 4) * 4, row = firstRow + r;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (row < rowCount) {
            const int t = row / a.group, h = keyHead * a.group + row % a.group;
            v = *reinterpret_cast<const float4*>(a.qA + static_cast<long>(t) * a.ldqA + static_cast<long>(h) * a.qAHeadStride + d);
        }
        put4<Split>(v, qHi + r * L::kRowStride + d, qLo + r * L::kRowStride + d);
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
    // after the quad's lanes are summed (each lane's l holds only its columns).
    const float sinkA = a.sinks && rowA < rowCount ? a.sinks[keyHead * a.group + rowA % a.group] : -INFINITY;
    const float sinkB = a.sinks && rowB < rowCount ? a.sinks[keyHead * a.group + rowB % a.group] : -INFINITY;
    float mA = sinkA, mB = sinkB, lA = 0.0f, lB = 0.0f;
    for (int j0 = firstKey; j0 <= lastKey; j0 += kFlashKeys) {
        const int n = min(kFlashKeys, lastKey - j0 + 1);
        __syncthreads();  // the previous tile is read (and, the first time, Q is written)
        for (int i = tid; i < kFlashKeys * D / 4; i += kFlashThreads) {
            const int key = i / (D / 4), d = i % (D / 4) * 4;
            float4 k = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v = k;  // zeros past the tile's end: P is 0 there
            if (key < n) {
                k = *reinterpret_cast<const float4*>(a.keyA + static_cast<long>(j0 + key) * a.ldKeyA + headOffset + d);
                v = *reinterpret_cast<const float4*>(a.value + static_cast<long>(j0 + key) * a.ldValue + headOffset + d);
            }
            put4<Split>(k, kHi + key * L::kRowStride + d, kLo + key * L::kRowStride + d);
            const int at = d * L::kValueStride + key;
            putValue<VF>(v.x, vHi + at, vLo + at);
            putValue<VF>(v.y, vHi + at + L::kValueStride, vLo + at + L::kValueStride);
            putValue<VF>(v.z, vHi + at + 2 * L::kValueStride, vLo + at + 2 * L::kValueStride);
            putValue<VF>(v.w, vHi + at + 3 * L::kValueStride, vLo + at + 3 * L::kValueStride);
        }
        __syncthreads();

        // S = Q Kᵀ for the warp's 16 rows and the tile's 64 keys (8 blocks of 8 keys).
        float s[kFlashKeys / 8][4] = {};
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
            std::uint32_t aHi[4], aLo[4];
            loadA<L::kRowStride>(qHi, warp * 16, ks * 16, g, q, aHi);
            if constexpr (Split) loadA<L::kRowStride>(qLo, warp * 16, ks * 16, g, q, aLo);
#pragma unroll
            for (int nt = 0; nt < kFlashKeys / 8; ++nt) {
                const int at = (nt * 8 + g) * L::kRowStride + ks * 16 + 2 * q;
                const std::uint32_t b0 = lds32(kHi + at), b1 = lds32(kHi + at + 8);
                mma(s[nt], aHi, b0, b1);
                if constexpr (Split) {
                    mma(s[nt], aHi, lds32(kLo + at), lds32(kLo + at + 8));
                    mma(s[nt], aLo, b0, b1);
                }
            }
        }

        // Mask, then the online softmax; the four lanes of a quad share their rows.
        float maxA = -INFINITY, maxB = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kFlashKeys / 8; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int key = j0 + nt * 8 + 2 * q + c;
                s[nt][c] = key <= posA && key >= fromA ? s[nt][c] * a.scale : -INFINITY;
                s[nt][2 + c] = key <= posB && key >= fromB ? s[nt][2 + c] * a.scale : -INFINITY;
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
        const float alphaA = expf(mA - baseA), alphaB = expf(mB - baseB);
        mA = newA;
        mB = newB;
        float sumA = 0.0f, sumB = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kFlashKeys / 8; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                s[nt][c] = expf(s[nt][c] - baseA);
                s[nt][2 + c] = expf(s[nt][2 + c] - baseB);
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

        // O += P V: P's A fragments are S's accumulators of two blocks of 8 keys.
#pragma unroll
        for (int kt = 0; kt < kFlashKeys / 16; ++kt) {
            std::uint32_t pHi[4], pLo[4];
            weightPair<VF>(s[2 * kt][0], s[2 * kt][1], pHi[0], pLo[0]);
            weightPair<VF>(s[2 * kt][2], s[2 * kt][3], pHi[1], pLo[1]);
            weightPair<VF>(s[2 * kt + 1][0], s[2 * kt + 1][1], pHi[2], pLo[2]);
            weightPair<VF>(s[2 * kt + 1][2], s[2 * kt + 1][3], pHi[3], pLo[3]);
#pragma unroll
            for (int dt = 0; dt < D / 8; ++dt) {
                const int at = (dt * 8 + g) * L::kValueStride + kt * 16 + 2 * q;
                const std::uint32_t b0 = lds32(vHi + at), b1 = lds32(vHi + at + 8);
                mmaValues<VF>(o[dt], pHi, b0, b1);
                if constexpr (SplitValues) {
                    mma(o[dt], pHi, lds32(vLo + at), lds32(vLo + at + 8));
                    mma(o[dt], pLo, b0, b1);
                }
            }
        }
    }

#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
        lA += __shfl_xor_sync(0xffffffffu, lA, o2);
        lB += __shfl_xor_sync(0xffffffffu, lB, o2);
    }
    if (sinkA > -INFINITY) lA += expf(sinkA - mA);
    if (sinkB > -INFINITY) lB += expf(sinkB - mB);
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
