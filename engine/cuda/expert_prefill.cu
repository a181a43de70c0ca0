// Routed experts on the GPU for many tokens (expert_kernels.h): the tensor-core prefill kernels. The
// packed layout and the scheme are described at the top of expert_kernels.cu.
#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/expert_kernels.h"
#include "cuda/expert_kernels_common.cuh"
#include "cuda/mma.cuh"
#include "tandem/error.h"

namespace tandem::cuda {
namespace {

// ---------------------------------------------------------------------------------------------------
// Prefill: tensor cores over tiles of 32 tokens.

constexpr int kTileTokens = 32;
constexpr int kPrefillWarps = 4;
constexpr int kStageBlocks = 16;  // weight blocks per stage: 8 gate/up panels x (gate, up), or 16 down panels
constexpr int kStages = 3;

// One pipeline stage in shared memory: the 16 weight blocks of one K block (int4: nibbles and scales
// apart), then the tile's activations over those inputs, Splits planes of 32 rows.
template <ExpertType T, int Splits>
struct Stage {
    static constexpr int kBlockInputs = T == ExpertType::BF16 ? 32 : 64;
    static constexpr int kBlockBytes = fourBit(T) ? 576 : 1024;
    static constexpr int kDataBytes = fourBit(T) ? 512 : 1024;
    static constexpr int kScaleBytes = kBlockBytes - kDataBytes;
    // Rows padded by 32 bytes: the 8-byte A loads of 8 rows x 4 lanes then hit 32 distinct banks.
    static constexpr int kActRowBytes = 2 * kBlockInputs + 32;
    static constexpr int kWeights = kStageBlocks * kDataBytes;
    static constexpr int kScales = kStageBlocks * kScaleBytes;
    static constexpr int kActs = Splits * kTileTokens * kActRowBytes;
    static constexpr int kBytes = kWeights + kScales + kActs;
    static constexpr int kTotal = kStages * kBytes;
};

// Where byte `off` of a block's weights lies in shared memory: the 16-byte chunks of each 128-byte line
// (two rows) are XORed with 2 (line % 4), so that the B loads below (4 rows x 8 outputs) hit 32 banks.
__device__ __forceinline__ int swizzle(int off) { return off ^ (((off >> 7) & 3) << 5); }

__device__ __forceinline__ void cpAsync16(void* shared, const void* global) {
    const auto s = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global));
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;"); }
template <int Pending>
__device__ __forceinline__ void cpAsyncWait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(Pending));
}

__device__ __forceinline__ std::uint32_t lds32(const std::uint8_t* p) { return *reinterpret_cast<const std::uint32_t*>(p); }
__device__ __forceinline__ uint2 lds64(const std::uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }

// Fragments (lane = 4 g + q). A's registers hold rows g and g + 8 at k-slots (2q, 2q+1) and (2q+8,
// 2q+9); B's hold column (output) g at the same k-slots; C's rows g, g + 8 and columns 2q, 2q + 1.
// The kernels give k-slots 2q + h the input 4q + h and k-slots 2q + 8 + h the input 4q + 2 + h of the
// 16 inputs of a step, so a lane's A registers for one row are the 8 bytes of inputs 4q .. 4q + 3.
template <int Splits, int ActRowBytes>
__device__ __forceinline__ void loadA(const std::uint8_t* acts, int m, int step, int g, int q,
                                      std::uint32_t (&a)[Splits][4]) {
#pragma unroll
    for (int sp = 0; sp < Splits; ++sp) {
        const std::uint8_t* row = acts + (sp * kTileTokens + 16 * m + g) * ActRowBytes + 2 * (16 * step + 4 * q);
        const uint2 top = lds64(row), bottom = lds64(row + 8 * ActRowBytes);
        a[sp][0] = top.x;
        a[sp][1] = bottom.x;
        a[sp][2] = top.y;
        a[sp][3] = bottom.y;
    }
}

// B of step `step` for output o of a bf16 block: inputs 16 step + 4q + (0, 1) are row 8 step + 2q,
// inputs + (2, 3) the row after it.
__device__ __forceinline__ void loadBBf16(const std::uint8_t* block, int step, int o, int q, std::uint32_t& b0,
                                          std::uint32_t& b1) {
    const int row = 8 * step + 2 * q;
    b0 = lds32(block + swizzle(64 * row + 4 * o));
    b1 = lds32(block + swizzle(64 * (row + 1) + 4 * o));
}

// An int8 block: inputs 16 step + 4q .. + 3 are one word (row 4 step + q), u - 128 each, exact in bf16.
__device__ __forceinline__ void loadBInt8(const std::uint8_t* block, int step, int o, int q, std::uint32_t& b0,
                                          std::uint32_t& b1) {
    const std::uint32_t w = lds32(block + swizzle(64 * (4 * step + q) + 4 * o));
    b0 = bf16Pair(int8Weight(w, 0), int8Weight(w, 1));
    b1 = bf16Pair(int8Weight(w, 2), int8Weight(w, 3));
}

// Two nibbles of a masked int4 word as bf16 n - 8: __byte_perm puts 0x43 above each nibble (the bf16
// 128 + n); `selector` 0x5150 takes bytes 0 and 1, 0x5352 bytes 2 and 3.
__device__ __forceinline__ std::uint32_t int4Pair(std::uint32_t nibbles, unsigned selector) {
    const std::uint32_t biased = __byte_perm(nibbles, 0x43434343u, selector);
    const __nv_bfloat162 v = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), __floats2bfloat162_rn(136.0f, 136.0f));
    return *reinterpret_cast<const std::uint32_t*>(&v);
}

// Bytes `first` and first + 1 (0 or 2) of a masked nibble word as a bf16 pair: INT4 n - 8 (int4Pair),
// MXFP4 its e2m1 values times two (fp4Pair).
template <ExpertType T>
__device__ __forceinline__ std::uint32_t nibblePair(std::uint32_t nibbles, int first) {
    if constexpr (T == ExpertType::MXFP4)
        return fp4Pair(nibbles, first);
    else
        return int4Pair(nibbles, first ? 0x5352 : 0x5150);
}

// An int4 or mxfp4 block, group `group` (inputs 32 group .. + 31): one word (vector 4 group + q) holds
// inputs 4q + j in its low nibbles (step 0 of the group) and 16 + 4q + j in its high ones (step 1).
template <ExpertType T>
__device__ __forceinline__ void loadBFourBit(const std::uint8_t* block, int group, int o, int q, std::uint32_t (&b)[2][2]) {
    const std::uint32_t w = lds32(block + swizzle(64 * (4 * group + q) + 4 * o));
    const std::uint32_t lo = w & 0x0f0f0f0fu, hi = (w >> 4) & 0x0f0f0f0fu;
    b[0][0] = nibblePair<T>(lo, 0);
    b[0][1] = nibblePair<T>(lo, 2);
    b[1][0] = nibblePair<T>(hi, 0);
    b[1][1] = nibblePair<T>(hi, 2);
}

// Prefill gate/up (Down = false) or down (Down = true) for one tile of up to 32 pairs of one group.
//   gate/up: blockIdx.x covers 8 panels; actOut[pair][sp][16 p + o] = the Splits bf16 terms of
//            SiLU(gate_o . x) * (up_o . x), x from `in` = the split x rows [token][Splits][hiddenPad].
//   down:    blockIdx.x covers 16 row panels; y[pair][n] = down_n . act, act from `in` = actOut.
// Threads: 4 warps; every warp takes all 32 tokens (2 m16 tiles) and 64 outputs, 8 n8 tiles: gate/up
// two panels (gate rows 0-7, 8-15, up rows 0-7, 8-15 of each), down four panels. Per K block the 16
// weight blocks and the activation rows are copied by cp.async into a 3-stage ring; each thread copies
// 16-byte chunks of one weight block (thread / 8) and of a few activation rows.
template <ExpertType T, int Splits, bool Down>
__global__ void __launch_bounds__(kPrefillWarps * 32)
    prefillKernel(GpuExpertLayout l, ExpertPairs b, const int4* tiles, const int* tileCount, const bf16* in, int inCols,
                  bf16* actOut, float* y, int ldy, ExpertEpilogue ep) {
    using S = Stage<T, Splits>;
    constexpr int kThreads = kPrefillWarps * 32;
    constexpr int kPanelsPerBlock = Down ? 16 : 8;
    if (static_cast<int>(blockIdx.y) >= *tileCount) return;
    extern __shared__ __align__(128) std::uint8_t smem[];
    const int4 tile = tiles[blockIdx.y];  // group, first pair, rows
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const std::uint8_t* expert = b.weights[tile.x];
    const int expertIndex = groupExpertOf(b, tile.x);  // its biases (ExpertEpilogue)
    const int panels = Down ? l.downPanels : l.gateUpPanels;
    const int firstPanel = blockIdx.x * kPanelsPerBlock;
    const int steps = Down ? l.interPad / S::kBlockInputs : l.hiddenKBlocks;

    // This thread's copies: chunks (thread % 8) + 8 j of weight block slot thread / 8 (panels past the
    // end read the last one again; their results are dropped), and activation chunks thread + 128 j.
    const int copySlot = threadIdx.x / 8, copyChunk = threadIdx.x % 8;
    const std::uint8_t* slotBase = nullptr;
    int downPanel = 0;
    if constexpr (Down)
        downPanel = min(firstPanel + copySlot, panels - 1);
    else
        slotBase = expert + static_cast<std::int64_t>(min(firstPanel + copySlot / 2, panels - 1)) * l.gateUpPanelBytes +
                   (copySlot % 2) * l.blockBytes;
    constexpr int kRowChunks = S::kBlockInputs * 2 / 16;
    constexpr int kActCopies = Splits * kTileTokens * kRowChunks / kThreads;
    static_assert(Splits * kTileTokens * kRowChunks % kThreads == 0);
    const bf16* actSource[kActCopies];
    int actDest[kActCopies];
#pragma unroll
    for (int j = 0; j < kActCopies; ++j) {
        const int i = threadIdx.x + kThreads * j, c = i % kRowChunks, r = i / kRowChunks % kTileTokens,
                  sp = i / (kRowChunks * kTileTokens);
        const int pair = tile.y + min(r, tile.z - 1);
        const int row = Down ? pair : b.pairToken[pair];
        actSource[j] = in + (static_cast<std::int64_t>(row) * Splits + sp) * inCols + 8 * c;
        actDest[j] = S::kWeights + S::kScales + (sp * kTileTokens + r) * S::kActRowBytes + 16 * c;
    }
    auto loadStage = [&](int kb) {
        std::uint8_t* stage = smem + (kb % kStages) * S::kBytes;
        const std::uint8_t* block;
        if constexpr (Down)
            block = downBlock<S::kBlockInputs>(l, expert, downPanel, kb);
        else
            block = slotBase + static_cast<std::int64_t>(kb) * 2 * l.blockBytes;
#pragma unroll
        for (int c = copyChunk; c < S::kBlockBytes / 16; c += 8) {
            const int off = 16 * c;
            cpAsync16(off < S::kDataBytes ? stage + copySlot * S::kDataBytes + swizzle(off)
                                          : stage + S::kWeights + copySlot * S::kScaleBytes + (off - S::kDataBytes),
                      block + off);
        }
#pragma unroll
        for (int j = 0; j < kActCopies; ++j) cpAsync16(stage + actDest[j], actSource[j] + kb * S::kBlockInputs);
    };

    // n8 tile t of this warp: weight block slot and which 8 of its 16 outputs.
    auto slotOf = [&](int t) { return Down ? 4 * warp + t / 2 : 4 * warp + 2 * (t / 4) + (t / 2) % 2; };
    // The tensor cores' float32 sums lose more than float32 FMAs do over a long K (about 2e-5 of a row
    // over 2048 inputs, measured), so each K block's (int4: each group's) products are summed apart and
    // added into acc by the CUDA cores.
    float acc[2][8][4] = {};
    const bool upper = tile.z > 16;  // rows 16-31 hold tokens (else their mma are skipped)
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < steps) loadStage(s);
        cpAsyncCommit();
    }
    for (int kb = 0; kb < steps; ++kb) {
        cpAsyncWait<kStages - 2>();
        __syncthreads();  // stage kb is in; everyone is done with the stage the next copy overwrites
        if (kb + kStages - 1 < steps) loadStage(kb + kStages - 1);
        cpAsyncCommit();
        const std::uint8_t* stage = smem + (kb % kStages) * S::kBytes;
        const std::uint8_t* acts = stage + S::kWeights + S::kScales;
        if constexpr (fourBit(T)) {
            // Each 32-input group: tile products of its two steps into part, then acc += scale * part.
#pragma unroll
            for (int group = 0; group < 2; ++group) {
                std::uint32_t a[2][2][Splits][4];
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int m = 0; m < 2; ++m)
                        if (m == 0 || upper) loadA<Splits, S::kActRowBytes>(acts, m, 2 * group + h, g, q, a[h][m]);
#pragma unroll
                for (int t = 0; t < 8; ++t) {
                    const int slot = slotOf(t), half = t % 2;
                    std::uint32_t bw[2][2];
                    loadBFourBit<T>(stage + slot * S::kDataBytes, group, 8 * half + g, q, bw);
                    const std::uint32_t sc =
                        lds32(stage + S::kWeights + slot * S::kScaleBytes + 2 * (16 * group + 8 * half + 2 * q));
                    float2 scale;
                    if constexpr (T == ExpertType::MXFP4)
                        scale = make_float2(bf16Bits(sc & 0xffff), bf16Bits(sc >> 16));
                    else
                        scale = __half22float2(*reinterpret_cast<const __half2*>(&sc));
#pragma unroll
                    for (int m = 0; m < 2; ++m) {
                        if (m == 1 && !upper) continue;
                        float part[4] = {};
#pragma unroll
                        for (int h = 0; h < 2; ++h)
#pragma unroll
                            for (int sp = 0; sp < Splits; ++sp) mma(part, a[h][m][sp], bw[h][0], bw[h][1]);
                        acc[m][t][0] = fmaf(scale.x, part[0], acc[m][t][0]);
                        acc[m][t][1] = fmaf(scale.y, part[1], acc[m][t][1]);
                        acc[m][t][2] = fmaf(scale.x, part[2], acc[m][t][2]);
                        acc[m][t][3] = fmaf(scale.y, part[3], acc[m][t][3]);
                    }
                }
            }
        } else {
            float part[2][8][4] = {};
#pragma unroll
            for (int step = 0; step < S::kBlockInputs / 16; ++step) {
                std::uint32_t a[2][Splits][4];
#pragma unroll
                for (int m = 0; m < 2; ++m)
                    if (m == 0 || upper) loadA<Splits, S::kActRowBytes>(acts, m, step, g, q, a[m]);
#pragma unroll
                for (int t = 0; t < 8; ++t) {
                    const std::uint8_t* block = stage + slotOf(t) * S::kDataBytes;
                    std::uint32_t b0, b1;
                    if constexpr (T == ExpertType::BF16)
                        loadBBf16(block, step, 8 * (t % 2) + g, q, b0, b1);
                    else
                        loadBInt8(block, step, 8 * (t % 2) + g, q, b0, b1);
#pragma unroll
                    for (int m = 0; m < 2; ++m) {
                        if (m == 1 && !upper) continue;
#pragma unroll
                        for (int sp = 0; sp < Splits; ++sp) mma(part[m][t], a[m][sp], b0, b1);
                    }
                }
            }
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int t = 0; t < 8; ++t)
#pragma unroll
                    for (int r = 0; r < 4; ++r) acc[m][t][r] += part[m][t][r];
        }
    }

    // Epilogue. C element r of tile (m, t): token row 16 m + g + 8 (r / 2), output 8 (t % 2) + 2q + r % 2.
    if constexpr (Down) {
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            const int n = kPanelRows * (firstPanel + slotOf(t)) + 8 * (t % 2) + 2 * q;
            float scale[2] = {1.0f, 1.0f};
            if constexpr (T == ExpertType::INT8) {
                const auto* rowScales = reinterpret_cast<const float*>(expert + l.downScalesOffset);
                for (int e = 0; e < 2; ++e) scale[e] = n + e < l.hidden ? rowScales[n + e] : 0.0f;
            }
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int r2 = 0; r2 < 2; ++r2) {
                    const int row = 16 * m + g + 8 * r2;
                    if (row >= tile.z) continue;
                    float* dst = y + static_cast<std::int64_t>(tile.y + row) * ldy + n;
                    const float v0 = acc[m][t][2 * r2] * scale[0] + (n < l.hidden ? downBiasOf(ep, expertIndex, n, l.hidden) : 0.0f);
                    const float v1 = acc[m][t][2 * r2 + 1] * scale[1] + (n + 1 < l.hidden ? downBiasOf(ep, expertIndex, n + 1, l.hidden) : 0.0f);
                    if (n + 1 < l.hidden)
                        *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
                    else if (n < l.hidden)
                        *dst = v0;
                }
        }
    } else {
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            if ((t / 2) % 2) continue;  // the up tiles are read with their gate tiles
            const int panel = firstPanel + slotOf(t) / 2;
            if (panel >= panels) continue;
            const int col = 8 * (t % 2) + 2 * q;
            float gateScale[2] = {1.0f, 1.0f}, upScale[2] = {1.0f, 1.0f};
            if constexpr (T == ExpertType::INT8) {
                const auto* scales = reinterpret_cast<const float*>(expert + static_cast<std::int64_t>(panel) * l.gateUpPanelBytes +
                                                                    static_cast<std::int64_t>(l.hiddenKBlocks) * 2 * l.blockBytes);
                for (int e = 0; e < 2; ++e) {
                    gateScale[e] = scales[col + e];
                    upScale[e] = scales[kPanelRows + col + e];
                }
            }
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int r2 = 0; r2 < 2; ++r2) {
                    const int row = 16 * m + g + 8 * r2;
                    if (row >= tile.z) continue;
                    float v[2];
                    for (int e = 0; e < 2; ++e)
                        v[e] = gatedActivation(ep, expertIndex, kPanelRows * panel + col + e, l.inter,
                                               acc[m][t][2 * r2 + e] * gateScale[e], acc[m][t + 2][2 * r2 + e] * upScale[e]);
                    bf16* dst = actOut + static_cast<std::int64_t>(tile.y + row) * Splits * l.interPad + kPanelRows * panel + col;
#pragma unroll
                    for (int sp = 0; sp < Splits; ++sp) {
                        const __nv_bfloat162 term = __floats2bfloat162_rn(v[0], v[1]);
                        *reinterpret_cast<__nv_bfloat162*>(dst + sp * l.interPad) = term;
                        const float2 back = __bfloat1622float2(term);
                        v[0] -= back.x;
                        v[1] -= back.y;
                    }
                }
        }
    }
}

// out[t] = x[t] as Splits bf16 terms per value, [tokens][Splits][colsPad], zero past `cols`.
template <int Splits>
__global__ void splitRowsKernel(const float* x, int ldx, int cols, int colsPad, bf16* out) {
    const std::int64_t t = blockIdx.x;
    for (int k = threadIdx.x; k < colsPad; k += blockDim.x) {
        float v = k < cols ? x[t * ldx + k] : 0.0f;
#pragma unroll
        for (int sp = 0; sp < Splits; ++sp) {
            const bf16 term = __float2bfloat16_rn(v);
            out[(t * Splits + sp) * colsPad + k] = term;
            v -= __bfloat162float(term);
        }
    }
}

// The tiles of a batch: group g's pairs in pieces of 32, as (group, first pair, rows). One block of
// 1024 threads, thread g for group g.
__global__ void buildTilesKernel(const int* groupStart, int groups, int4* tiles, int* tileCount) {
    const int g = threadIdx.x;
    const int first = g < groups ? groupStart[g] : 0, n = g < groups ? groupStart[g + 1] - first : 0;
    const int count = (n + kTileTokens - 1) / kTileTokens;
    int total;
    const int at = blockExclusiveScan(count, total);
    for (int i = 0; i < count; ++i)
        tiles[at + i] = make_int4(g, first + kTileTokens * i, min(kTileTokens, n - kTileTokens * i), 0);
    if (g == 0) *tileCount = total;
}

// out[t] (+)= sum over slots s in order of pairWeight * y[pair of s], for token t = blockIdx.x.
__global__ void sumSlotsKernel(ExpertPairs b, const float* y, int ldy, int hidden, float* out, int ldOut, bool accumulate) {
    __shared__ int pairs[kMaxTopK];
    __shared__ float weights[kMaxTopK];
    const int t = blockIdx.x;
    if (threadIdx.x < b.topK) {
        const int pair = b.slotPair[t * b.topK + threadIdx.x];
        pairs[threadIdx.x] = pair;
        weights[threadIdx.x] = pair >= 0 ? b.pairWeight[pair] : 0.0f;
    }
    __syncthreads();
    for (int n = threadIdx.x; n < hidden; n += blockDim.x) {
        float* o = out + static_cast<std::int64_t>(t) * ldOut + n;
        float sum = accumulate ? *o : 0.0f;
        for (int s = 0; s < b.topK; ++s)
            if (pairs[s] >= 0) sum = fmaf(weights[s], y[static_cast<std::int64_t>(pairs[s]) * ldy + n], sum);
        *o = sum;
    }
}

// ---------------------------------------------------------------------------------------------------
// Launchers

struct PrefillBuffers {
    bf16* xs;
    bf16* act;
    float* y;
    int ldy;
    int4* tiles;
    int* tileCount;
    int maxTiles;
};

PrefillBuffers carvePrefill(const GpuExpertLayout& l, int tokens, int maxPairs, int groups, int splits, void* scratch) {
    auto* p = static_cast<std::uint8_t*>(scratch);
    PrefillBuffers buf{};
    buf.ldy = static_cast<int>(roundUp(static_cast<std::size_t>(l.hidden), 4));
    buf.maxTiles = (maxPairs + kTileTokens - 1) / kTileTokens + groups;
    auto take = [&](std::size_t bytes) {
        std::uint8_t* at = p;
        p += roundUp(bytes, 256);
        return at;
    };
    buf.xs = reinterpret_cast<bf16*>(take(static_cast<std::size_t>(tokens) * splits * l.hiddenPad * sizeof(bf16)));
    buf.act = reinterpret_cast<bf16*>(take(static_cast<std::size_t>(maxPairs) * splits * l.interPad * sizeof(bf16)));
    buf.y = reinterpret_cast<float*>(take(static_cast<std::size_t>(maxPairs) * buf.ldy * sizeof(float)));
    buf.tiles = reinterpret_cast<int4*>(take(static_cast<std::size_t>(buf.maxTiles) * sizeof(int4)));
    buf.tileCount = reinterpret_cast<int*>(take(sizeof(int)));
    return buf;
}

template <class Kernel>
void allowSharedMemory(Kernel kernel, int bytes) {
    TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

template <ExpertType T, int Splits>
void prefill(const GpuExpertLayout& l, const ExpertPairs& b, const float* x, int ldx, float* out, int ldOut,
             bool accumulate, const PrefillBuffers& buf, cudaStream_t s, const ExpertEpilogue& ep) {
    using S = Stage<T, Splits>;
    splitRowsKernel<Splits><<<b.tokens, 256, 0, s>>>(x, ldx, l.hidden, l.hiddenPad, buf.xs);
    TANDEM_CUDA_CHECK(cudaGetLastError());
    buildTilesKernel<<<1, 1024, 0, s>>>(b.groupStart, b.groups, buf.tiles, buf.tileCount);
    TANDEM_CUDA_CHECK(cudaGetLastError());
    auto gateUp = prefillKernel<T, Splits, false>;
    auto down = prefillKernel<T, Splits, true>;
    allowSharedMemory(gateUp, S::kTotal);
    allowSharedMemory(down, S::kTotal);
    gateUp<<<dim3((l.gateUpPanels + 7) / 8, buf.maxTiles), kPrefillWarps * 32, S::kTotal, s>>>(
        l, b, buf.tiles, buf.tileCount, buf.xs, l.hiddenPad, buf.act, nullptr, 0, ep);
    TANDEM_CUDA_CHECK(cudaGetLastError());
    down<<<dim3((l.downPanels + 15) / 16, buf.maxTiles), kPrefillWarps * 32, S::kTotal, s>>>(
        l, b, buf.tiles, buf.tileCount, buf.act, l.interPad, nullptr, buf.y, buf.ldy, ep);
    TANDEM_CUDA_CHECK(cudaGetLastError());
    sumSlotsKernel<<<b.tokens, 256, 0, s>>>(b, buf.y, buf.ldy, l.hidden, out, ldOut, accumulate);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

std::size_t prefillScratchBytes(const GpuExpertLayout& l, int tokens, int maxPairs, int groups, int splits) {
    const std::size_t ldy = roundUp(static_cast<std::size_t>(l.hidden), 4);
    const std::size_t maxTiles = static_cast<std::size_t>((maxPairs + kTileTokens - 1) / kTileTokens + groups);
    return roundUp(static_cast<std::size_t>(tokens) * splits * l.hiddenPad * sizeof(bf16), 256) +
           roundUp(static_cast<std::size_t>(maxPairs) * splits * l.interPad * sizeof(bf16), 256) +
           roundUp(static_cast<std::size_t>(maxPairs) * ldy * sizeof(float), 256) + roundUp(maxTiles * sizeof(int4), 256) +
           256;
}

void launchExpertsPrefill(const GpuExpertLayout& l, const ExpertPairs& b, const float* x, int ldx, float* out, int ldOut,
                          bool accumulate, int splits, void* scratch, cudaStream_t s, const ExpertEpilogue& ep) {
    requireBatch(l, b, x, ldx, "prefill experts");
    if (splits < 1 || splits > 3 || (splits == 1 && l.type == ExpertType::BF16))
        throw Error("prefill experts: activations in 2 or 3 bf16 terms (1 for int8, int4 and mxfp4 experts), not " + std::to_string(splits));
    if (b.groups > 1024) throw Error("prefill experts: at most 1024 groups");
    const PrefillBuffers buf = carvePrefill(l, b.tokens, b.maxPairs, b.groups, splits, scratch);
    if (buf.maxTiles > 65535) throw Error("prefill experts: too many pairs for one launch; split the tokens");
    const bool three = splits == 3;
    switch (l.type) {
    case ExpertType::BF16:
        three ? prefill<ExpertType::BF16, 3>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep)
              : prefill<ExpertType::BF16, 2>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep);
        return;
    case ExpertType::INT8:
        three           ? prefill<ExpertType::INT8, 3>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep)
        : splits == 1   ? prefill<ExpertType::INT8, 1>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep)
                        : prefill<ExpertType::INT8, 2>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep);
        return;
    case ExpertType::INT4:
        three           ? prefill<ExpertType::INT4, 3>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep)
        : splits == 1   ? prefill<ExpertType::INT4, 1>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep)
                        : prefill<ExpertType::INT4, 2>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep);
        return;
    case ExpertType::MXFP4:
        three           ? prefill<ExpertType::MXFP4, 3>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep)
        : splits == 1   ? prefill<ExpertType::MXFP4, 1>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep)
                        : prefill<ExpertType::MXFP4, 2>(l, b, x, ldx, out, ldOut, accumulate, buf, s, ep);
        return;
    }
}

}  // namespace tandem::cuda
