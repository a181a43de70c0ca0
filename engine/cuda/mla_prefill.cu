// MLA (DeepSeek-V2/V3) prefill attention on tensor cores, flash-attention style, in the non-absorbed
// form (issue 28). The runner (GpuRunner::enqueueMlaFlash) decompresses the cached latent of the context
// into per-head keys and values with one GEMM (kv_b_proj over all positions: k_nope and v of every
// head), and this kernel attends with q = [q_nope | q_rope] (nope + rope wide) against
// k = [k_nope | k_rope] (k_rope: the rotated key part of the cache, shared by every head) and values of
// vDim. One block of four warps takes 64 query tokens of one head; per tile of 64 keys: S = Q Kᵀ with
// mma.sync (16 rows a warp), the causal mask, the online softmax in registers, then O += P V with P
// taken straight from S's accumulators (the design of attention_prefill.cu's GQA kernel). Tiles past
// the block's last query position are never read.
//
// One instantiation (per precision) serves every width up to DeepSeek's nope 128 + rope 64, v 128:
// narrower heads (the test fixtures' 32 + 16 / 32) are zero-padded in shared memory.
//
// Long contexts: the decompressed keys and values take heads x (nope + v) floats a position (16 KB for
// V2-Lite, 128 KB for V3), so the runner decompresses at most mlaPassRows positions at a time and runs
// the kernel once per such pass; between passes each row's unnormalized sums, running max and sum wait
// in `state` (float32), and the last pass normalizes and writes the bf16 output.
//
// Precision: K, V and Q arrive as float32. With split precision (kernels.h) every operand is carried as
// a bf16 pair hi + lo and each product takes hi·hi + hi·lo + lo·hi (~2^-16 relative error); without
// it, one bf16 product.
//
// Roofline of a 16K-token prompt's attention, per layer (causal: 16384² / 2 = 134M query-key pairs,
// each 2 x (192 + 128) = 640 FLOPs a head on the non-absorbed widths):
//   V2-Lite, 16 heads:  134M x 16 x 640  = 1.37 TFLOP a layer, x 27 layers = 37 TFLOP
//                       -> 62 ms at ~600 TFLOP/s dense bf16 on the H200 (~3.8 us a prompt token)
//   V3, 128 heads:      134M x 128 x 640 = 11 TFLOP a layer,   x 61 layers = 671 TFLOP -> 1.1 s
// (Split precision triples the tensor-core work; a long context's chunks split Q·K only, oneTermValues.) The absorbed form would cost 2 x (576 + 512) = 2176
// FLOPs a pair and head, 3.4 times as much. The decompression adds, per chunk, context x heads x
// latent x (nope + v) x 2 FLOPs (V2-Lite: 4.2 MFLOP a position; a 2048-token chunk at 16K: 69 GFLOP
// against its ~340 GFLOP of attention).
#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/mma.cuh"

namespace tandem::cuda {

namespace {
namespace mla_flash {

constexpr int kRows = 64;  // query tokens per block, 16 per warp
constexpr int kKeys = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kNope = 128, kRope = 64, kValue = 128;  // the widest heads served
constexpr int kQk = kNope + kRope;
constexpr int kUnroll = 4;  // float4 loads a thread has in flight while filling a tile
static_assert(kKeys * (kQk / 4) % (kThreads * kUnroll) == 0 && kKeys * (kValue / 4) % (kThreads * kUnroll) == 0);

// Shared memory, in bf16 elements: Q [64 rows][nope | rope], K [64 keys][nope | rope] and V [64 keys]
// [value] row-major, each row padded by 8 so that ldmatrix's eight 16-byte rows (and the staging's 8-byte
// stores) fall in distinct banks. Fragments load with ldmatrix, V's with ldmatrix.trans.
constexpr int kRowStride = kQk + 8;
constexpr int kValueStride = kValue + 8;
constexpr int kQ = kRows * kRowStride;
constexpr int kK = kKeys * kRowStride;
constexpr int kV = kKeys * kValueStride;
// Q's hi plane is staged in K's (kQ == kK) and read into registers before the first tile; with split
// the lo planes of K and V follow, then Q's lo plane (read a tile at a time). 112 KB with split, so two
// blocks share a multiprocessor.
static_assert(kQ == kK);
constexpr std::size_t sharedBytes(bool split) { return (split ? 2 * (kK + kV) + kQ : kK + kV) * sizeof(bf16); }

__device__ __forceinline__ float4 load4(const float* p, bool valid) {
    return valid ? *reinterpret_cast<const float4*>(p) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// Where a pass keeps row (t, h)'s unnormalized sums [vDim], and its running max and sum [2].
__device__ __forceinline__ float* stateSums(const MlaPrefillArgs& a, int t, int h) {
    return a.state + (static_cast<long>(t) * a.heads + h) * a.vDim;
}
__device__ __forceinline__ float* stateSoftmax(const MlaPrefillArgs& a, int t, int h) {
    return a.state + static_cast<long>(a.tokens) * a.heads * a.vDim + (static_cast<long>(t) * a.heads + h) * 2;
}

// SplitValues: P·V split too (Split without it: a long context's chunk, Q·K split, P·V one fp16 term).
template <bool Split, bool SplitValues>
__global__ void __launch_bounds__(kThreads) mlaFlashKernel(MlaPrefillArgs a) {
    waitForPrevious();
    startNext();
    constexpr ValueForm VF = kValueForm<Split, SplitValues>;
    extern __shared__ __align__(16) unsigned char mlaFlashShared[];
    bf16* const kHi = reinterpret_cast<bf16*>(mlaFlashShared);
    bf16* const qHi = kHi;  // until Q's fragments are in registers
    bf16* const vHi = kHi + kK;
    bf16* const kLo = vHi + kV;  // the lo planes: only with Split
    bf16* const vLo = kLo + kK;
    bf16* const qLo = vLo + kV;

    const int h = blockIdx.y, firstRow = blockIdx.x * kRows;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const long headKv = static_cast<long>(h) * a.kvHeadStride;
    // Scores in log2 units (scaled by log2 e), so the softmax's exponentials are exp2; the running max
    // kept between passes is in the same units.
    const float scale = a.scale * 1.4426950408889634f;

    // Q: nope columns at [0, kNope), rope columns at [kNope, kQk), zeros past the head's widths and rows.
    for (int i = tid; i < kRows * (kQk / 4); i += kThreads) {
        const int r = i / (kQk / 4), d = i % (kQk / 4) * 4, t = firstRow + r;
        const float* row = a.q + static_cast<long>(t) * a.ldq + static_cast<long>(h) * a.qHeadStride;
        const bool nopePart = d < kNope;
        const int column = nopePart ? d : a.nope + d - kNope;
        const bool valid = t < a.tokens && (nopePart ? d < a.nope : d - kNope < a.rope);
        put4<Split>(load4(row + column, valid), qHi + r * kRowStride + d, qLo + r * kRowStride + d);
    }

    __syncthreads();
    // The warp's 16 rows of Q's hi plane as A fragments for every tile (the lo plane is read a tile at a time:
    // both would not fit the registers).
    std::uint32_t qa[kQk / 16][4];
#pragma unroll
    for (int ks = 0; ks < kQk / 16; ++ks) ldmatrixA<kRowStride>(qHi, warp * 16, ks * 16, lane, qa[ks]);

    // This thread's two rows (g and g + 8 of its warp's 16): their positions (-1: no row).
    const int rowA = firstRow + warp * 16 + g, rowB = rowA + 8;
    const int posA = rowA < a.tokens ? a.start + rowA : -1;
    const int posB = rowB < a.tokens ? a.start + rowB : -1;
    // The keys of this pass the block attends to: [kvFirst, last].
    const int last = min(a.kvFirst + a.kvCount - 1, a.start + min(a.tokens - 1, firstRow + kRows - 1));

    float o[kValue / 8][4];
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    if (a.firstPass) {
#pragma unroll
        for (int dt = 0; dt < kValue / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    } else {
        // The earlier passes' sums of this thread's columns; the running sum once a quad (lane q = 0).
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = half ? rowB : rowA;
            const bool valid = row < a.tokens;
            const float* sums = valid ? stateSums(a, row, h) : nullptr;
#pragma unroll
            for (int dt = 0; dt < kValue / 8; ++dt)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int column = dt * 8 + 2 * q + c;
                    o[dt][2 * half + c] = valid && column < a.vDim ? sums[column] : 0.0f;
                }
            const float m = valid ? stateSoftmax(a, row, h)[0] : -INFINITY;
            const float l = valid && q == 0 ? stateSoftmax(a, row, h)[1] : 0.0f;
            if (half) {
                mB = m;
                lB = l;
            } else {
                mA = m;
                lA = l;
            }
        }
    }

    for (int j0 = a.kvFirst; j0 <= last; j0 += kKeys) {
        const int n = min(kKeys, last - j0 + 1);
        __syncthreads();  // the previous tile is read (the first time: Q's hi fragments, from K's plane)
        // K: k_nope of this head from the pass's rows, k_rope of the position from the cache; kUnroll
        // float4 loads in flight a thread.
        for (int i0 = tid; i0 < kKeys * (kQk / 4); i0 += kThreads * kUnroll) {
            float4 x[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int i = i0 + u * kThreads, key = i / (kQk / 4), d = i % (kQk / 4) * 4, j = j0 + key;
                const bool nopePart = d < kNope;
                const float* src = nopePart ? a.kv + static_cast<long>(j - a.kvFirst) * a.ldkv + headKv + d
                                            : a.ropeKeys + static_cast<long>(j) * a.ldRope + (d - kNope);
                x[u] = load4(src, key < n && (nopePart ? d < a.nope : d - kNope < a.rope));
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int i = i0 + u * kThreads, key = i / (kQk / 4), d = i % (kQk / 4) * 4;
                put4<Split>(x[u], kHi + key * kRowStride + d, kLo + key * kRowStride + d);
            }
        }
        // V row-major; zeros past the tile's end (P is 0 there, and 0 x NaN would not be).
        for (int i0 = tid; i0 < kKeys * (kValue / 4); i0 += kThreads * kUnroll) {
            float4 x[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int i = i0 + u * kThreads, key = i / (kValue / 4), d = i % (kValue / 4) * 4, j = j0 + key;
                x[u] = load4(a.kv + static_cast<long>(j - a.kvFirst) * a.ldkv + headKv + a.nope + d, key < n && d < a.vDim);
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int i = i0 + u * kThreads, key = i / (kValue / 4), d = i % (kValue / 4) * 4;
                putValues4<VF>(x[u], vHi + key * kValueStride + d, vLo + key * kValueStride + d);
            }
        }
        __syncthreads();

        // S = Q Kᵀ for the warp's 16 rows and the tile's 64 keys (8 blocks of 8 keys).
        float s[kKeys / 8][4];
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < kQk / 16; ++ks) {
            const std::uint32_t(&aHi)[4] = qa[ks];
            std::uint32_t aLo[4];
            if constexpr (Split) ldmatrixA<kRowStride>(qLo, warp * 16, ks * 16, lane, aLo);
#pragma unroll
            for (int nt = 0; nt < kKeys / 8; nt += 2) {
                std::uint32_t b[4], bLo[4];
                ldmatrixB<kRowStride>(kHi, nt * 8, ks * 16, lane, b);
                mma(s[nt], aHi, b[0], b[1]);
                mma(s[nt + 1], aHi, b[2], b[3]);
                if constexpr (Split) {
                    ldmatrixB<kRowStride>(kLo, nt * 8, ks * 16, lane, bLo);
                    mma(s[nt], aHi, bLo[0], bLo[1]);
                    mma(s[nt + 1], aHi, bLo[2], bLo[3]);
                    mma(s[nt], aLo, b[0], b[1]);
                    mma(s[nt + 1], aLo, b[2], b[3]);
                }
            }
        }

        // The causal mask (and the pass's end), then the online softmax; a quad's four lanes share rows.
        float maxA = -INFINITY, maxB = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int key = j0 + nt * 8 + 2 * q + c;
                s[nt][c] = key <= posA && key <= last ? s[nt][c] * scale : -INFINITY;
                s[nt][2 + c] = key <= posB && key <= last ? s[nt][2 + c] * scale : -INFINITY;
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
        for (int nt = 0; nt < kKeys / 8; ++nt)
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
        for (int dt = 0; dt < kValue / 8; ++dt) {
            o[dt][0] *= alphaA;
            o[dt][1] *= alphaA;
            o[dt][2] *= alphaB;
            o[dt][3] *= alphaB;
        }

        // O += P V: P's A fragments are S's accumulators of two blocks of 8 keys.
#pragma unroll
        for (int kt = 0; kt < kKeys / 16; ++kt) {
            std::uint32_t pHi[4], pLo[4];
            weightPair<VF>(s[2 * kt][0], s[2 * kt][1], pHi[0], pLo[0]);
            weightPair<VF>(s[2 * kt][2], s[2 * kt][3], pHi[1], pLo[1]);
            weightPair<VF>(s[2 * kt + 1][0], s[2 * kt + 1][1], pHi[2], pLo[2]);
            weightPair<VF>(s[2 * kt + 1][2], s[2 * kt + 1][3], pHi[3], pLo[3]);
#pragma unroll
            for (int dt = 0; dt < kValue / 8; dt += 2) {
                std::uint32_t b[4], bLo[4];
                ldmatrixBTrans<kValueStride>(vHi, kt * 16, dt * 8, lane, b);
                mmaValues<VF>(o[dt], pHi, b[0], b[1]);
                mmaValues<VF>(o[dt + 1], pHi, b[2], b[3]);
                if constexpr (SplitValues) {
                    ldmatrixBTrans<kValueStride>(vLo, kt * 16, dt * 8, lane, bLo);
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
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const int row = half ? rowB : rowA;
        if (row >= a.tokens) continue;
        if (!a.lastPass) {
            // For the next pass: the unnormalized sums, the running max and the quad's running sum.
            float* sums = stateSums(a, row, h);
#pragma unroll
            for (int dt = 0; dt < kValue / 8; ++dt)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int column = dt * 8 + 2 * q + c;
                    if (column < a.vDim) sums[column] = o[dt][2 * half + c];
                }
            if (q == 0) {
                float* softmax = stateSoftmax(a, row, h);
                softmax[0] = half ? mB : mA;
                softmax[1] = half ? lB : lA;
            }
            continue;
        }
        // Every row attends at least to its own position, so l > 0 for rows that exist.
        const float inv = 1.0f / (half ? lB : lA);
        bf16* const out = a.out + static_cast<long>(row) * a.ldOut + static_cast<long>(h) * a.outHeadStride;
        const long lo = static_cast<long>(a.tokens) * a.ldOut;
#pragma unroll
        for (int dt = 0; dt < kValue / 8; ++dt)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int column = dt * 8 + 2 * q + c;
                if (column < a.vDim) storeBf16(o[dt][2 * half + c] * inv, out + column, out + column + lo, a.split);
            }
    }
}

template <bool Split, bool SplitValues>
void launch(const MlaPrefillArgs& a, cudaStream_t s) {
    constexpr std::size_t bytes = sharedBytes(Split);
    static const cudaError_t configured = cudaFuncSetAttribute(mlaFlashKernel<Split, SplitValues>,
                                                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    TANDEM_CUDA_CHECK(configured);
    const dim3 grid((a.tokens + kRows - 1) / kRows, a.heads);
    launchChained(mlaFlashKernel<Split, SplitValues>, grid, kThreads, bytes, s, a);
}

// Float rows to a bf16 GEMM input: hi rows, then with split the lo rows `rows` rows further.
__global__ void toBf16Kernel(const float* x, int ldx, int rows, int width, bf16* out, int ldOut, bool split) {
    waitForPrevious();
    startNext();
    const long count = static_cast<long>(rows) * width, stride = static_cast<long>(gridDim.x) * blockDim.x;
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count; i += stride) {
        const long r = i / width, c = i % width;
        bf16* hi = out + r * ldOut + c;
        storeBf16(x[r * ldx + c], hi, hi + static_cast<long>(rows) * ldOut, split);
    }
}

}  // namespace mla_flash
}  // namespace

bool mlaFlashPrefillServes(int nope, int rope, int vDim) {
    using namespace mla_flash;
    return nope > 0 && rope > 0 && vDim > 0 && nope <= kNope && rope <= kRope && vDim <= kValue && nope % 4 == 0 &&
           rope % 4 == 0 && vDim % 4 == 0;
}

void launchMlaFlashPrefill(const MlaPrefillArgs& a, cudaStream_t s) {
    const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (!mlaFlashPrefillServes(a.nope, a.rope, a.vDim))
        throw GpuError("MLA flash prefill: head widths beyond nope 128, rope 64, v 128 or not multiples of 4");
    if (a.ldq % 4 || a.qHeadStride % 4 || a.ldkv % 4 || a.kvHeadStride % 4 || a.ldRope % 4 || !aligned(a.q) ||
        !aligned(a.kv) || !aligned(a.ropeKeys) || a.kvCount < 1 || a.tokens < 1 || (!(a.firstPass && a.lastPass) && !a.state))
        throw GpuError("MLA flash prefill: misaligned rows or an empty pass");
    if (!a.split)
        mla_flash::launch<false, false>(a, s);
    else if (a.oneTermValues)
        mla_flash::launch<true, false>(a, s);  // a long context's chunk: Q·K split, P·V one term
    else
        mla_flash::launch<true, true>(a, s);
}

void launchToBf16(const float* x, int ldx, int rows, int width, bf16* out, int ldOut, bool split, cudaStream_t s) {
    if (rows < 1 || width < 1) return;
    const long count = static_cast<long>(rows) * width;
    const int blocks = static_cast<int>(std::min<long>((count + 255) / 256, 4096));
    launchChained(mla_flash::toBf16Kernel, blocks, 256, 0, s, x, ldx, rows, width, out, ldOut, split);
}

}  // namespace tandem::cuda
