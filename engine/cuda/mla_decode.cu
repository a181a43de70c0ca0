// MLA's two per-head products for one decode token, in our own kernels: the absorbed query
// qLatent[h] = W_k[h]ᵀ qNope[h] and the value expansion out[h] = W_v[h] ctx[h]. cuBLAS's batched GEMM
// over the split hi and lo rows plus a pair-sum kernel took ~12 us a layer for what is a few MB of
// weights: latency, not bytes. Here the split input's halves are added as they are read, in float32.
#include <cstdint>

#include "cuda/attention_common.cuh"
#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/kv_int8.cuh"
#include "cuda/mma.cuh"

namespace tandem::cuda {

namespace {

constexpr int kColumns = 32;  // absorb: columns per block, one per lane
constexpr int kSlices = 8;    // absorb: warps per block, each summing a slice of the rows

// A split value: hi, plus lo when there is one (split inputs, and FP8 weights' kvbLo).
__device__ inline float splitInput(const bf16* hi, const bf16* lo, long i) {
    return __bfloat162float(hi[i]) + (lo ? __bfloat162float(lo[i]) : 0.0f);
}

// Block (head h, columns c0..c0+31): warp s sums rows [s * per, (s + 1) * per) of W_k[h] for its lane's
// column, then the warps' sums are added.
__global__ void absorbKernel(const bf16* kvb, const bf16* kvbLo, long headStride, int nope, int latent,
                             const bf16* qNope, const bf16* qNopeLo, float* qLatent) {
    waitForPrevious();
    startNext();
    __shared__ float q[256];
    __shared__ float part[kSlices][kColumns];
    const int h = blockIdx.x, lane = threadIdx.x & 31, slice = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < nope; i += blockDim.x) q[i] = splitInput(qNope, qNopeLo, static_cast<long>(h) * nope + i);
    __syncthreads();
    const int c = blockIdx.y * kColumns + lane;
    const int per = (nope + kSlices - 1) / kSlices;
    const int begin = slice * per, end = min(nope, begin + per);
    float sum = 0.0f;
    if (c < latent) {
        const long w = h * headStride + c;
#pragma unroll 8
        for (int i = begin; i < end; ++i) sum += splitInput(kvb, kvbLo, w + static_cast<long>(i) * latent) * q[i];
    }
    part[slice][lane] = sum;
    __syncthreads();
    if (slice == 0 && c < latent) {
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < kSlices; ++s) total += part[s][lane];
        qLatent[static_cast<long>(h) * latent + c] = total;
    }
}

// One warp per output row (h, v): W_v[h] row v (latent weights) times ctx[h], written as a bf16 GEMM
// input for o_proj (hi, and with split the lo rows `heads * vDim` further on).
__global__ void valuesKernel(const bf16* kvb, const bf16* kvbLo, long headStride, int nope, int latent, int heads,
                             int vDim, const bf16* ctx, const bf16* ctxLo, bf16* out, bool split) {
    waitForPrevious();
    startNext();
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= heads * vDim) return;
    const int h = row / vDim, v = row % vDim;
    const long w = h * headStride + static_cast<long>(nope + v) * latent;
    const long x0 = static_cast<long>(h) * latent;
    float sum = 0.0f;
#pragma unroll 4
    for (int c = lane; c < latent; c += 32) sum += splitInput(kvb, kvbLo, w + c) * splitInput(ctx, ctxLo, x0 + c);
    sum = warpSum(sum);
    if (lane == 0) storeBf16(sum, out + row, out + static_cast<long>(heads) * vDim + row, split);
}

}  // namespace

void launchMlaAbsorb(const bf16* kvb, const bf16* kvbLo, long headStride, int heads, int nope, int latent,
                     const bf16* qNope, bool split, float* qLatent, cudaStream_t s) {
    if (nope > 256) throw GpuError("MLA key head width above 256 is not supported by the GPU decode kernel");
    const dim3 grid(heads, (latent + kColumns - 1) / kColumns);
    launchChained(absorbKernel, grid, kColumns * kSlices, 0, s, kvb, kvbLo, headStride, nope, latent, qNope,
                  split ? qNope + static_cast<long>(heads) * nope : nullptr, qLatent);
}

void launchMlaValues(const bf16* kvb, const bf16* kvbLo, long headStride, int heads, int nope, int latent, int vDim,
                     const bf16* ctx, bool split, bf16* out, cudaStream_t s) {
    constexpr int kWarps = 8;
    const int rows = heads * vDim;
    launchChained(valuesKernel, (rows + kWarps - 1) / kWarps, kWarps * 32, 0, s, kvb, kvbLo, headStride, nope, latent, heads,
                  vDim, ctx, split ? ctx + static_cast<long>(heads) * latent : nullptr, out, split);
}

namespace {

// ---------------------------------------------------------------------------------------------------
// MLA decode attention on tensor cores, split over the context (issue 28). In the absorbed form every
// head's query (qLatent[h] | q_rope[h]) scores the same cached rows (latent | k_rope) and sums the same
// latent rows as values: multi-query attention with kvLora + rope wide keys. attention.cu's decode
// kernel runs a block per query head and part of the context, so each cached row was read once per head
// (16 times for V2-Lite: at 16K positions a layer's 38 MB cache was read as 600 MB, ~0.14 ms a layer
// on the H200). Here a block takes 16 heads (one m16 tile; V3's 128 heads are 8 such groups, whose
// blocks of one part run side by side and share the rows in L2) and one part of the context: a tile of
// 64 positions is read once from memory into shared memory as bf16 (hi, and lo with split precision),
// S = Q Kᵀ on mma.sync (warp w: keys 8w .. 8w + 7 of the tile, all 16 heads, over the 576 columns), the
// online softmax across the warps through shared memory, and O += P V with the tile's latent columns as
// V (warp w: value columns 64w .. 64w + 63), read from the same rows. Each part's unnormalized result
// and running max and sum go to the partials, and a second kernel (a block per head and 128 columns)
// combines the parts.
//
// Roofline at 16K positions: V2-Lite reads 16384 x 576 floats = 38 MB a layer, ~8 us at ~4.8 TB/s,
// and computes 16 heads x 16384 x 2 x (576 + 512) = 0.57 GFLOP (x3 with split): ~1-3 us on the tensor
// cores. V3: 128 heads, 4.6 GFLOP (x3), about as long as its reads.
namespace mla_split {

constexpr int kLatent = 512, kRope = 64, kKey = kLatent + kRope;  // the widest served (DeepSeek's)
constexpr int kHeads = 16;   // query heads a block
constexpr int kKeys = 64;    // positions a tile
constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kCombineColumns = 128;
// Shared memory in bf16 elements: Q [16 heads][576] and K [64 keys][576] row-major, P [16 heads][64 keys],
// rows padded by 8 (Q and K rows are 292 words apart, P's 36: 4 banks apart, so the fragments' loads
// of 8 rows x 4 lanes hit 32 banks); the hi planes, then with split the lo planes; then the warps'
// maxima and sums [8][16] floats each.
constexpr int kKeyStride = kKey + 8;
constexpr int kPStride = kKeys + 8;
constexpr int kQ = kHeads * kKeyStride;
constexpr int kK = kKeys * kKeyStride;
constexpr int kP = kHeads * kPStride;
constexpr int kPlane = kQ + kK + kP;
// With the 8-bit cache (Q8) K has no lo plane (Q's and P's lo planes follow the hi planes), and the tile's
// latent and rope scales [2][64 keys] floats come last.
__host__ __device__ constexpr int loPlane(bool q8) { return q8 ? kQ + kP : kPlane; }
constexpr std::size_t sharedBytes(bool split, bool q8 = false) {
    return (kPlane + (split ? loPlane(q8) : 0)) * sizeof(bf16) + 2 * kWarps * kHeads * sizeof(float) +
           (q8 ? 2 * kKeys * sizeof(float) : 0);
}
static_assert(kKeys == 8 * kWarps, "a warp scores 8 keys of a tile");
static_assert(kLatent == 64 * kWarps, "a warp sums 64 value columns");
constexpr int kTileLoads = kKeys * kKey / 4 / kThreads;  // float4 a thread loads a tile
// Of them, loaded during the previous tile's products: half (18 leaves no register spills; a build with
// -DTANDEM_MLA_DECODE_PREFETCH=N tries others, as scripts/device-probe.sh did).
#ifndef TANDEM_MLA_DECODE_PREFETCH
#define TANDEM_MLA_DECODE_PREFETCH 18
#endif
constexpr int kPrefetch = TANDEM_MLA_DECODE_PREFETCH;
// Fragments by ldmatrix (an experiment for the next GPU call, off until measured: ncu showed the kernel
// bound by instruction issue, and a k-step's Q and K fragments take twelve 32-bit shared loads with split
// precision, three ldmatrix.x4 with this; scripts/check_attention.cu built with
// -DTANDEM_MLA_DECODE_LDMATRIX=1 against the default compares them).
#ifndef TANDEM_MLA_DECODE_LDMATRIX
#define TANDEM_MLA_DECODE_LDMATRIX 0
#endif
constexpr bool kLdmatrix = TANDEM_MLA_DECODE_LDMATRIX != 0;
constexpr int kRest = 6;       // the others' loads in flight at once
static_assert((kKeys * kKey / 4) % kThreads == 0 && (kTileLoads - kPrefetch) % kRest == 0, "a tile is filled in whole rounds");
// The 8-bit cache (AttentionArgs::int8Cache): a tile's rows are 36 chunks of 16 codes (32 latent, 4 rope),
// all of a thread's loaded during the previous tile's products. Codes are integers of at most 127, exact
// in bf16, so K (and V, the latent codes) take the hi plane alone: S = Q Kᵀ takes two products a k-step
// with split precision (Q's hi and lo), not three, and P V two, not four. A key's score is its latent
// part times the row's latent scale plus its rope part times the rope scale; a value row's latent scale
// multiplies its weight in P (the softmax's sums take the weights unscaled).
constexpr int kChunks = kKey / 16;
constexpr int kTileLoadsQ8 = kKeys * kChunks / kThreads;
static_assert(kKeys * kChunks % kThreads == 0, "a tile's codes in whole rounds");

// The parts' partials: each head's weighted values [heads][splits][dimV], then running max and sum
// [heads][splits][2] (heads * splits * (dimV + 2) floats, as the other decode kernels).
__device__ __forceinline__ float* partValues(const AttentionArgs& a, int h, int part) {
    return a.partials + (static_cast<long>(h) * a.splits + part) * a.dimV;
}
__device__ __forceinline__ float* partState(const AttentionArgs& a, int h, int part) {
    return a.partials + static_cast<long>(a.heads) * a.splits * a.dimV + (static_cast<long>(h) * a.splits + part) * 2;
}

// Four codes (the word's bytes, lowest first) as two bf16 pairs, exact: a code's float has at most 7
// significant bits, so its bf16 is the float's upper half, taken by a byte permute (no conversion).
__device__ __forceinline__ uint2 codesToBf16(std::uint32_t word) {
    const float4 f = codesToFloat4ByPermute(word);
    return make_uint2(__byte_perm(__float_as_uint(f.x), __float_as_uint(f.y), 0x7632),
                      __byte_perm(__float_as_uint(f.z), __float_as_uint(f.w), 0x7632));
}

template <bool Split, bool Q8 = false>
__global__ void __launch_bounds__(kThreads) mlaSplitDecodeKernel(AttentionArgs a) {
    waitForPrevious();
    startNext();
    const int position = *a.start;
    const int parts = decodeParts(a, position, kKeys), part = blockIdx.z;
    if (part >= parts) return;
    int first, last;
    partRange(a, position, parts, part, first, last);

    extern __shared__ __align__(16) unsigned char mlaSplitShared[];
    bf16* const qHi = reinterpret_cast<bf16*>(mlaSplitShared);
    bf16* const kHi = qHi + kQ;
    bf16* const pHi = kHi + kK;
    bf16* const qLo = qHi + kPlane;  // the lo planes: only with Split (K's not with Q8)
    bf16* const kLo = kHi + kPlane;
    bf16* const pLo = Q8 ? qLo + kQ : pHi + kPlane;
    float* const warpMax = reinterpret_cast<float*>(qHi + kPlane + (Split ? loPlane(Q8) : 0));  // [kWarps][kHeads]
    float* const warpSums = warpMax + kWarps * kHeads;                               // [kWarps][kHeads]
    float* const tileScales = warpSums + kWarps * kHeads;  // Q8: [2][kKeys], latent then rope

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const int h0 = blockIdx.x * kHeads;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

    // Q: latent columns [0, 512), rope columns [512, 576); zeros past the widths and the heads.
    for (int i = tid; i < kHeads * (kKey / 4); i += kThreads) {
        const int r = i / (kKey / 4), d = i % (kKey / 4) * 4, h = h0 + r;
        const bool latentPart = d < kLatent;
        const bool valid = h < a.heads && (latentPart ? d < a.dimA : d - kLatent < a.dimB);
        const float* src = latentPart ? a.qA + static_cast<long>(h) * a.qAHeadStride + d
                                      : a.qB + static_cast<long>(h) * a.qBHeadStride + (d - kLatent);
        put4<Split>(valid ? *reinterpret_cast<const float4*>(src) : zero, qHi + r * kKeyStride + d, qLo + r * kKeyStride + d);
    }

    // This thread's heads g and g + 8: the same running max and sum in every warp.
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    float o[kLatent / kWarps / 8][4] = {};
    // The tile's rows go through registers: the first kPrefetch float4 a thread of the next tile are loaded
    // before this tile's products, so they are in flight while the tensor cores work; the rest (all would
    // not fit the registers) as the tile is stored. Zeros past the part and the widths.
    const auto loadRow = [&](int j0, int u) {
        const int n = min(kKeys, last - j0 + 1);
        const int i = tid + u * kThreads, key = i / (kKey / 4), d = i % (kKey / 4) * 4;
        const long j = j0 + key;
        const bool latentPart = d < kLatent;
        const bool valid = key < n && (latentPart ? d < a.dimA : d - kLatent < a.dimB);
        const float* src = latentPart ? a.keyA + j * a.ldKeyA + d : a.keyB + j * a.ldKeyB + (d - kLatent);
        return valid ? *reinterpret_cast<const float4*>(src) : zero;
    };
    const auto storeRow = [&](int u, float4 v) {
        const int i = tid + u * kThreads, key = i / (kKey / 4), d = i % (kKey / 4) * 4;
        put4<Split>(v, kHi + key * kKeyStride + d, kLo + key * kKeyStride + d);
    };
    // Q8: chunk tid + u * kThreads of the tile (key i / 36, chunk i % 36: 32 of the latent's codes, then 4
    // of the rope's), and threads below 2 * kKeys a key's latent or rope scale.
    const int latentWidth = a.keyInt8.width, ropeWidth = a.ropeInt8.width;
    const auto loadCodes = [&](int j0, int u) {
        const int n = min(kKeys, last - j0 + 1);
        const int i = tid + u * kThreads, key = i / kChunks, c = i % kChunks;
        const long j = j0 + key;
        const bool latentPart = c < kLatent / 16;
        const int d = latentPart ? 16 * c : 16 * (c - kLatent / 16);
        const bool valid = key < n && d < (latentPart ? a.dimA : a.dimB);
        const std::int8_t* src = latentPart ? a.keyInt8.codes + j * latentWidth + d : a.ropeInt8.codes + j * ropeWidth + d;
        return valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);
    };
    const auto storeCodes = [&](int u, uint4 w) {
        const int i = tid + u * kThreads, key = i / kChunks, c = i % kChunks;
        bf16* dst = kHi + key * kKeyStride + 16 * c;  // rope chunks land at 512 + 16 (c - 32)
        const uint2 b0 = codesToBf16(w.x), b1 = codesToBf16(w.y), b2 = codesToBf16(w.z), b3 = codesToBf16(w.w);
        reinterpret_cast<uint4*>(dst)[0] = make_uint4(b0.x, b0.y, b1.x, b1.y);
        reinterpret_cast<uint4*>(dst)[1] = make_uint4(b2.x, b2.y, b3.x, b3.y);
    };
    const auto loadScale = [&](int j0) {
        const int key = tid % kKeys;
        if (tid >= 2 * kKeys || j0 + key > last) return 0.0f;
        return tid < kKeys ? a.keyInt8.scales[j0 + key] : a.ropeInt8.scales[j0 + key];
    };
    float4 rows[Q8 ? 1 : kPrefetch];
    uint4 codes[Q8 ? kTileLoadsQ8 : 1];
    float scale = 0.0f;
    if (first <= last) {
        if constexpr (Q8) {
#pragma unroll
            for (int u = 0; u < kTileLoadsQ8; ++u) codes[u] = loadCodes(first, u);
            scale = loadScale(first);
        } else {
#pragma unroll
            for (int u = 0; u < kPrefetch; ++u) rows[u] = loadRow(first, u);
        }
    }
    for (int j0 = first; j0 <= last; j0 += kKeys) {
        const int n = min(kKeys, last - j0 + 1);
        __syncthreads();  // the previous tile's K and P are read (and, the first time, Q is written)
        if constexpr (Q8) {
#pragma unroll
            for (int u = 0; u < kTileLoadsQ8; ++u) storeCodes(u, codes[u]);
            if (tid < 2 * kKeys) tileScales[tid] = scale;
        } else {
#pragma unroll
            for (int u0 = kPrefetch; u0 < kTileLoads; u0 += kRest) {
                float4 rest[kRest];
#pragma unroll
                for (int u = 0; u < kRest; ++u) rest[u] = loadRow(j0, u0 + u);
#pragma unroll
                for (int u = 0; u < kRest; ++u) storeRow(u0 + u, rest[u]);
            }
#pragma unroll
            for (int u = 0; u < kPrefetch; ++u) storeRow(u, rows[u]);
        }
        __syncthreads();
        if (j0 + kKeys <= last) {
            if constexpr (Q8) {
#pragma unroll
                for (int u = 0; u < kTileLoadsQ8; ++u) codes[u] = loadCodes(j0 + kKeys, u);
                scale = loadScale(j0 + kKeys);
            } else {
#pragma unroll
                for (int u = 0; u < kPrefetch; ++u) rows[u] = loadRow(j0 + kKeys, u);
            }
        }

        // S for the 16 heads and this warp's 8 keys.
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if constexpr (Q8) {
            // Codes: the latent's k-steps, then the rope's, each part times its rows' scales.
            float rope[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const auto steps = [&](float (&acc)[4], int begin, int end) {
#pragma unroll 4
                for (int ks = begin; ks < end; ++ks) {
                    std::uint32_t aHi[4], aLo[4];
                    loadA<kKeyStride>(qHi, 0, ks * 16, g, q, aHi);
                    if constexpr (Split) loadA<kKeyStride>(qLo, 0, ks * 16, g, q, aLo);
                    const int at = (warp * 8 + g) * kKeyStride + ks * 16 + 2 * q;
                    const std::uint32_t b0 = lds32(kHi + at), b1 = lds32(kHi + at + 8);
                    mma(acc, aHi, b0, b1);
                    if constexpr (Split) mma(acc, aLo, b0, b1);
                }
            };
            steps(s, 0, kLatent / 16);
            steps(rope, kLatent / 16, kKey / 16);
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int key = warp * 8 + 2 * q + c;
                const float latentScale = tileScales[key], ropeScale = tileScales[kKeys + key];
                s[c] = s[c] * latentScale + rope[c] * ropeScale;
                s[2 + c] = s[2 + c] * latentScale + rope[2 + c] * ropeScale;
            }
        }
#pragma unroll 4
        for (int ks = 0; ks < (Q8 ? 0 : kKey / 16); ++ks) {
            std::uint32_t aHi[4], aLo[4];
            if constexpr (kLdmatrix && Split) {
                ldmatrixA<kKeyStride>(qHi, 0, ks * 16, lane, aHi);
                ldmatrixA<kKeyStride>(qLo, 0, ks * 16, lane, aLo);
                // The warp's 8 keys, k-slots ks * 16 .. + 15: hi's two halves, then lo's (lanes 0-7, 8-15,
                // 16-23, 24-31 address the four 8 x 8 matrices' rows).
                std::uint32_t b[4];
                const int m = lane >> 3;
                ldmatrix4(b, (m < 2 ? kHi : kLo) + (warp * 8 + (lane & 7)) * kKeyStride + ks * 16 + (m & 1) * 8);
                mma(s, aHi, b[0], b[1]);
                mma(s, aHi, b[2], b[3]);
                mma(s, aLo, b[0], b[1]);
            } else {
                loadA<kKeyStride>(qHi, 0, ks * 16, g, q, aHi);
                if constexpr (Split) loadA<kKeyStride>(qLo, 0, ks * 16, g, q, aLo);
                const int at = (warp * 8 + g) * kKeyStride + ks * 16 + 2 * q;
                const std::uint32_t b0 = lds32(kHi + at), b1 = lds32(kHi + at + 8);
                mma(s, aHi, b0, b1);
                if constexpr (Split) {
                    mma(s, aHi, lds32(kLo + at), lds32(kLo + at + 8));
                    mma(s, aLo, b0, b1);
                }
            }
        }
        float maxA = -INFINITY, maxB = -INFINITY;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const bool valid = warp * 8 + 2 * q + c < n;
            s[c] = valid ? s[c] * a.scale : -INFINITY;
            s[2 + c] = valid ? s[2 + c] * a.scale : -INFINITY;
            maxA = fmaxf(maxA, s[c]);
            maxB = fmaxf(maxB, s[2 + c]);
        }
#pragma unroll
        for (int o2 = 1; o2 <= 2; o2 <<= 1) {
            maxA = fmaxf(maxA, __shfl_xor_sync(0xffffffffu, maxA, o2));
            maxB = fmaxf(maxB, __shfl_xor_sync(0xffffffffu, maxB, o2));
        }
        if (q == 0) {
            warpMax[warp * kHeads + g] = maxA;
            warpMax[warp * kHeads + g + 8] = maxB;
        }
        __syncthreads();

        // The tile's max over the warps (finite: every tile has a key), the weights into P.
        float tileA = -INFINITY, tileB = -INFINITY;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            tileA = fmaxf(tileA, warpMax[w * kHeads + g]);
            tileB = fmaxf(tileB, warpMax[w * kHeads + g + 8]);
        }
        const float newA = fmaxf(mA, tileA), newB = fmaxf(mB, tileB);
        const float alphaA = expf(mA - newA), alphaB = expf(mB - newB);  // 0 on the first tile
        mA = newA;
        mB = newB;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            s[c] = expf(s[c] - newA);
            s[2 + c] = expf(s[2 + c] - newB);
        }
        {
            std::uint32_t hi, lo;
            const int at = g * kPStride + warp * 8 + 2 * q;
            // Q8: each weight times its value row's latent scale.
            const float v0 = Q8 ? tileScales[warp * 8 + 2 * q] : 1.0f, v1 = Q8 ? tileScales[warp * 8 + 2 * q + 1] : 1.0f;
            pairs<Split>(s[0] * v0, s[1] * v1, hi, lo);
            *reinterpret_cast<std::uint32_t*>(pHi + at) = hi;
            if constexpr (Split) *reinterpret_cast<std::uint32_t*>(pLo + at) = lo;
            pairs<Split>(s[2] * v0, s[3] * v1, hi, lo);
            *reinterpret_cast<std::uint32_t*>(pHi + at + 8 * kPStride) = hi;
            if constexpr (Split) *reinterpret_cast<std::uint32_t*>(pLo + at + 8 * kPStride) = lo;
        }
        float sumA = s[0] + s[1], sumB = s[2] + s[3];
#pragma unroll
        for (int o2 = 1; o2 <= 2; o2 <<= 1) {
            sumA += __shfl_xor_sync(0xffffffffu, sumA, o2);
            sumB += __shfl_xor_sync(0xffffffffu, sumB, o2);
        }
        if (q == 0) {
            warpSums[warp * kHeads + g] = sumA;
            warpSums[warp * kHeads + g + 8] = sumB;
        }
        __syncthreads();

        float tileSumA = 0.0f, tileSumB = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
            tileSumA += warpSums[w * kHeads + g];
            tileSumB += warpSums[w * kHeads + g + 8];
        }
        lA = lA * alphaA + tileSumA;
        lB = lB * alphaB + tileSumB;
#pragma unroll
        for (int nt = 0; nt < kLatent / kWarps / 8; ++nt) {
            o[nt][0] *= alphaA;
            o[nt][1] *= alphaA;
            o[nt][2] *= alphaB;
            o[nt][3] *= alphaB;
        }
        // O += P V for this warp's 64 value columns: V is the tile's latent columns, read down a column.
#pragma unroll
        for (int kt = 0; kt < kKeys / 16; ++kt) {
            std::uint32_t aHi[4], aLo[4];
            if constexpr (kLdmatrix) {
                ldmatrixA<kPStride>(pHi, 0, kt * 16, lane, aHi);
                if constexpr (Split) ldmatrixA<kPStride>(pLo, 0, kt * 16, lane, aLo);
            } else {
                loadA<kPStride>(pHi, 0, kt * 16, g, q, aHi);
                if constexpr (Split) loadA<kPStride>(pLo, 0, kt * 16, g, q, aLo);
            }
#pragma unroll
            for (int nt = 0; nt < kLatent / kWarps / 8; nt += 2) {
                std::uint32_t b[4], bLo[4];
                ldmatrixBTrans<kKeyStride>(kHi, kt * 16, warp * 64 + nt * 8, lane, b);
                mma(o[nt], aHi, b[0], b[1]);
                mma(o[nt + 1], aHi, b[2], b[3]);
                if constexpr (Split && Q8) {  // codes: V has no lo plane
                    mma(o[nt], aLo, b[0], b[1]);
                    mma(o[nt + 1], aLo, b[2], b[3]);
                } else if constexpr (Split) {
                    ldmatrixBTrans<kKeyStride>(kLo, kt * 16, warp * 64 + nt * 8, lane, bLo);
                    mma(o[nt], aHi, bLo[0], bLo[1]);
                    mma(o[nt + 1], aHi, bLo[2], bLo[3]);
                    mma(o[nt], aLo, b[0], b[1]);
                    mma(o[nt + 1], aLo, b[2], b[3]);
                }
            }
        }
    }

    // The part's result: normalized into the output when it is the whole context, else to the partials.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int h = h0 + g + 8 * half;
        if (h >= a.heads) continue;
        const float l = half ? lB : lA;
        if (parts == 1) {
            const float inv = 1.0f / l;
            bf16* const out = a.out + static_cast<long>(h) * a.outHeadStride;
#pragma unroll
            for (int nt = 0; nt < kLatent / kWarps / 8; ++nt)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int column = warp * 64 + nt * 8 + 2 * q + c;
                    if (column < a.dimV)
                        storeBf16(o[nt][2 * half + c] * inv, out + column, out + column + static_cast<long>(a.tokens) * a.ldOut,
                                  a.split);
                }
            continue;
        }
        float* const values = partValues(a, h, part);
#pragma unroll
        for (int nt = 0; nt < kLatent / kWarps / 8; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int column = warp * 64 + nt * 8 + 2 * q + c;
                if (column < a.dimV) values[column] = o[nt][2 * half + c];
            }
        if (warp == 0 && q == 0) {
            float* const state = partState(a, h, part);
            state[0] = half ? mB : mA;
            state[1] = l;
        }
    }
}

// The parts of head blockIdx.x, columns blockIdx.y * 128 ..: each part's weight exp(m_z - m) / l, then
// the weighted sum of the parts' values, as a bf16 GEMM input.
__global__ void __launch_bounds__(kCombineColumns) mlaCombineKernel(AttentionArgs a) {
    waitForPrevious();
    startNext();
    const int position = *a.start;
    const int parts = decodeParts(a, position, kKeys);
    if (parts == 1) return;  // the decode kernel wrote the output
    constexpr int kPerLane = kMaxMlaSplits / 32;
    __shared__ float weight[kMaxMlaSplits];
    const int h = blockIdx.x, lane = threadIdx.x & 31;
    if (threadIdx.x < 32) {
        float mz[kPerLane], lz[kPerLane];
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
            const int z = lane + 32 * r;
            const float* state = partState(a, h, min(z, parts - 1));
            mz[r] = z < parts ? state[0] : -INFINITY;
            lz[r] = z < parts ? state[1] : 0.0f;
        }
        float mLane = mz[0];
#pragma unroll
        for (int r = 1; r < kPerLane; ++r) mLane = fmaxf(mLane, mz[r]);
        const float m = warpMax(mLane);
        float ez[kPerLane], sum = 0.0f;
#pragma unroll
        for (int r = 0; r < kPerLane; ++r) {
            ez[r] = lane + 32 * r < parts ? expf(mz[r] - m) : 0.0f;
            sum += lz[r] * ez[r];
        }
        const float inv = 1.0f / warpSum(sum);
#pragma unroll
        for (int r = 0; r < kPerLane; ++r)
            if (lane + 32 * r < parts) weight[lane + 32 * r] = ez[r] * inv;
    }
    __syncthreads();
    const int column = blockIdx.y * kCombineColumns + threadIdx.x;
    if (column >= a.dimV) return;
    const float* values = partValues(a, h, 0) + column;
    float v = 0.0f;
#pragma unroll 8
    for (int z = 0; z < parts; ++z) v += weight[z] * values[static_cast<long>(z) * a.dimV];
    bf16* const out = a.out + static_cast<long>(h) * a.outHeadStride + column;
    storeBf16(v, out, out + static_cast<long>(a.tokens) * a.ldOut, a.split);
}

template <bool Split, bool Q8>
void configure() {
    static const cudaError_t configured = cudaFuncSetAttribute(
        mlaSplitDecodeKernel<Split, Q8>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sharedBytes(Split, Q8)));
    TANDEM_CUDA_CHECK(configured);
}

template <bool Split, bool Q8>
int blocksPerMultiprocessor() {
    configure<Split, Q8>();
    int blocks = 0;
    TANDEM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, mlaSplitDecodeKernel<Split, Q8>, kThreads,
                                                                    sharedBytes(Split, Q8)));
    return blocks;
}

template <bool Split, bool Q8>
void launch(const AttentionArgs& a, cudaStream_t s) {
    configure<Split, Q8>();
    launchChained(mlaSplitDecodeKernel<Split, Q8>, dim3((a.heads + kHeads - 1) / kHeads, 1, a.splits), kThreads,
                  sharedBytes(Split, Q8), s, a);
    launchChained(mlaCombineKernel, dim3(a.heads, (a.dimV + kCombineColumns - 1) / kCombineColumns), kCombineColumns, 0, s, a);
}

}  // namespace mla_split

}  // namespace

bool mlaDecodeServes(const AttentionArgs& a) {
    using namespace mla_split;
    return !a.perHeadDecode && a.dimB > 0 && a.keyHeadStride == 0 && a.group == 1 && a.dimV == a.dimA && a.dimA <= kLatent &&
           a.dimB <= kRope && a.dimA % 4 == 0 && a.dimB % 4 == 0 && a.window == 0 && !a.prepare && !a.sinks &&
           (!a.int8Cache || (a.dimA % 16 == 0 && a.dimB % 16 == 0));
}

int mlaDecodeBlocksPerMultiprocessor(const AttentionArgs& a) {
    using namespace mla_split;
    if (a.int8Cache) return a.split ? blocksPerMultiprocessor<true, true>() : blocksPerMultiprocessor<false, true>();
    return a.split ? blocksPerMultiprocessor<true, false>() : blocksPerMultiprocessor<false, false>();
}

bool launchMlaDecode(const AttentionArgs& a, cudaStream_t s) {
    using namespace mla_split;
    const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (!mlaDecodeServes(a) || a.tokens != 1 || a.splits < 1 || a.splits > kMaxMlaSplits || a.qAHeadStride % 4 ||
        a.qBHeadStride % 4 || !aligned(a.qA) || !aligned(a.qB))
        return false;
    if (a.int8Cache) {
        // The codes' rows: the latent (keys and values) and the rope part, 16-byte chunks, a scale a row.
        if (a.keyInt8.width != a.dimA || a.ropeInt8.width != a.dimB || a.keyInt8.groupWidth != a.dimA ||
            a.ropeInt8.groupWidth != a.dimB || a.dimA % 16 || a.dimB % 16 || !aligned(a.keyInt8.codes) || !aligned(a.ropeInt8.codes))
            return false;
        if (a.split)
            launch<true, true>(a, s);
        else
            launch<false, true>(a, s);
        return true;
    }
    if (a.value != a.keyA || a.ldValue != a.ldKeyA || a.ldKeyA % 4 || a.ldKeyB % 4 || !aligned(a.keyA) || !aligned(a.keyB))
        return false;
    if (a.split)
        launch<true, false>(a, s);
    else
        launch<false, false>(a, s);
    return true;
}

}  // namespace tandem::cuda
