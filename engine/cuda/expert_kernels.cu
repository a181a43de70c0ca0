// Routed experts from the packed layout (expert_kernels.h, io/expert_layout.h).
//
// What the layout gives the kernels: every matrix is a sequence of blocks of 16 outputs x kBlock inputs
// (32 for bf16, 64 for int8/int4), and a block is made of 64-byte rows in which bytes 4o..4o+3 belong
// to output o: a bf16 row holds inputs (2j, 2j+1) of each output, an int8 row inputs 4j..4j+3, an int4
// row (vector v) 4 inputs in its low nibbles and the 4 inputs 16 further on in its high nibbles, with
// the block's 2 x 16 fp16 group scales after its 512 bytes of nibbles. Gate and up blocks alternate
// along K within a 16-row panel; down's panels lie chunk by chunk (128 columns of K per chunk).
//
// Decode (one token or a few) streams the bytes once on the CUDA cores: a warp reads a block as 512-byte
// pieces, each lane 16 bytes (4 outputs x one row), multiplies by float32 activations and keeps 4
// partial sums; lanes and then warps are summed in a fixed order.
//
// Prefill runs mma.sync.m16n8k16 (bf16 in, float32 sums): A = a tile of 32 tokens' activations as
// Splits bf16 terms (hi, lo, ...), B = 16 weight blocks staged in shared memory by cp.async, three
// stages deep. The tensor cores see the weights exactly: bf16 as stored, int8 (u - 128) and int4 (n - 8)
// as bf16 integers; int8 row scales and int4 group scales multiply the float32 sums. The order of the
// 16 inputs inside an mma is free as long as A and B agree, so each lane's B registers come from one
// or two 4-byte words of the packed rows (see loadB*), and its A registers are 8 contiguous bytes of
// the activation row.
#include "cuda/expert_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "tandem/error.h"

namespace tandem::cuda {

using io::ExpertType;

namespace {

using bf16 = __nv_bfloat16;

constexpr int kPanelRows = 16;
constexpr int kChunkCols = 128;
static_assert(kPanelRows == io::kPanelRows && kChunkCols == io::kChunkCols);

constexpr int kMaxTopK = 32;

std::size_t roundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// ---------------------------------------------------------------------------------------------------
// Shared helpers

// 16 (8) weight bytes that are read once: not kept in L1, where the activations live.
__device__ __forceinline__ uint4 streamLoad16(const void* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

__device__ __forceinline__ uint2 streamLoad8(const void* p) {
    uint2 v;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

// u - 128 for byte `byte` of an int8 word: 0x4B0000uu is the float 2^23 + u.
__device__ __forceinline__ float int8Weight(std::uint32_t word, int byte) {
    return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440 + byte)) - 8388736.0f;
}

// n - 8 for byte `byte` of a word of nibbles (already masked to 0x0F0F0F0F).
__device__ __forceinline__ float int4Weight(std::uint32_t nibbles, int byte) {
    return __uint_as_float(__byte_perm(nibbles, 0x4B000000u, 0x7440 + byte)) - 8388616.0f;
}

__device__ __forceinline__ float halfBits(unsigned short bits) { return __half2float(__ushort_as_half(bits)); }

// Down's block (row panel q, K block kb): chunk c = kb / blocksPerChunk holds every row panel over
// its columns, panel after panel; every chunk but the last is full.
template <int BlockInputs>
__device__ __forceinline__ const std::uint8_t* downBlock(const GpuExpertLayout& l, const std::uint8_t* expert, int q,
                                                         int kb) {
    constexpr int kPerChunk = kChunkCols / BlockInputs;
    const int c = kb / kPerChunk;
    const int chunkBlocks = c + 1 < l.chunks ? kPerChunk : (l.interPad - kChunkCols * c) / BlockInputs;
    return expert + l.downOffset + c * l.fullChunkBytes +
           static_cast<std::int64_t>(q * chunkBlocks + kb % kPerChunk) * l.blockBytes;
}

// ---------------------------------------------------------------------------------------------------
// Decode: 512-byte pieces, one 16-byte load per lane. Lane l reads row l / 4 of the piece, outputs
// 4 (l % 4) .. + 3 (int4: vector l / 4 of the block). DecodeFormat<T> says which inputs those words
// hold, loads them (x points at the piece's first input; `valid` inputs from there exist, the rest of
// the block is padding and reads as 0) and adds the 4 dot products into acc.

template <ExpertType T>
struct DecodeFormat;

template <>
struct DecodeFormat<ExpertType::BF16> {
    static constexpr int kPieceInputs = 16;  // 8 rows of 2 inputs
    static constexpr int kPiecesPerBlock = 2;
    struct Weights {
        uint4 w;
    };
    using Inputs = float2;
    __device__ static Weights load(const std::uint8_t* piece, int lane) { return {streamLoad16(piece + 16 * lane)}; }
    __device__ static Inputs inputs(const float* x, int valid, int lane) {
        const int k = 2 * (lane / 4);
        if (valid >= kPieceInputs) return *reinterpret_cast<const float2*>(x + k);
        return {k < valid ? x[k] : 0.0f, k + 1 < valid ? x[k + 1] : 0.0f};
    }
    __device__ static void dot(const Weights& w, Inputs x, float (&acc)[4]) {
        const std::uint32_t words[4] = {w.w.x, w.w.y, w.w.z, w.w.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            acc[i] = fmaf(__uint_as_float(words[i] << 16), x.x, acc[i]);
            acc[i] = fmaf(__uint_as_float(words[i] & 0xffff0000u), x.y, acc[i]);
        }
    }
};

template <>
struct DecodeFormat<ExpertType::INT8> {
    static constexpr int kPieceInputs = 32;  // 8 rows of 4 inputs
    static constexpr int kPiecesPerBlock = 2;
    struct Weights {
        uint4 w;
    };
    using Inputs = float4;
    __device__ static Weights load(const std::uint8_t* piece, int lane) { return {streamLoad16(piece + 16 * lane)}; }
    __device__ static Inputs inputs(const float* x, int valid, int lane) {
        const int k = 4 * (lane / 4);
        if (valid >= kPieceInputs) return *reinterpret_cast<const float4*>(x + k);
        return {k < valid ? x[k] : 0.0f, k + 1 < valid ? x[k + 1] : 0.0f, k + 2 < valid ? x[k + 2] : 0.0f,
                k + 3 < valid ? x[k + 3] : 0.0f};
    }
    // Sums (u - 128) x; the row scale multiplies the total.
    __device__ static void dot(const Weights& w, Inputs x, float (&acc)[4]) {
        const std::uint32_t words[4] = {w.w.x, w.w.y, w.w.z, w.w.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            acc[i] = fmaf(int8Weight(words[i], 0), x.x, acc[i]);
            acc[i] = fmaf(int8Weight(words[i], 1), x.y, acc[i]);
            acc[i] = fmaf(int8Weight(words[i], 2), x.z, acc[i]);
            acc[i] = fmaf(int8Weight(words[i], 3), x.w, acc[i]);
        }
    }
};

template <>
struct DecodeFormat<ExpertType::INT4> {
    static constexpr int kPieceInputs = 64;  // the whole block: 8 vectors of 8 inputs
    static constexpr int kPiecesPerBlock = 1;
    struct Weights {
        uint4 w;
        uint2 scales;  // fp16 scales of the lane's 4 outputs in its vector's group
    };
    struct Inputs {
        float4 lo, hi;
    };
    __device__ static Weights load(const std::uint8_t* piece, int lane) {
        const int group = lane / 16;  // vectors 0-3: inputs 0-31, vectors 4-7: inputs 32-63
        return {streamLoad16(piece + 16 * lane), streamLoad8(piece + 512 + 2 * (16 * group + 4 * (lane % 4)))};
    }
    // Vector v = lane / 4: inputs 32 (v / 4) + 4 (v % 4) + j (low nibbles) and 16 further (high).
    __device__ static Inputs inputs(const float* x, int valid, int lane) {
        const int v = lane / 4, k = 32 * (v / 4) + 4 * (v % 4);
        if (valid >= kPieceInputs)
            return {*reinterpret_cast<const float4*>(x + k), *reinterpret_cast<const float4*>(x + k + 16)};
        auto at = [&](int i) { return i < valid ? x[i] : 0.0f; };
        return {{at(k), at(k + 1), at(k + 2), at(k + 3)}, {at(k + 16), at(k + 17), at(k + 18), at(k + 19)}};
    }
    __device__ static void dot(const Weights& w, const Inputs& x, float (&acc)[4]) {
        const std::uint32_t words[4] = {w.w.x, w.w.y, w.w.z, w.w.w};
        const float scale[4] = {halfBits(w.scales.x & 0xffff), halfBits(w.scales.x >> 16), halfBits(w.scales.y & 0xffff),
                                halfBits(w.scales.y >> 16)};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const std::uint32_t lo = words[i] & 0x0f0f0f0fu, hi = (words[i] >> 4) & 0x0f0f0f0fu;
            float s = int4Weight(lo, 0) * x.lo.x;
            s = fmaf(int4Weight(lo, 1), x.lo.y, s);
            s = fmaf(int4Weight(lo, 2), x.lo.z, s);
            s = fmaf(int4Weight(lo, 3), x.lo.w, s);
            s = fmaf(int4Weight(hi, 0), x.hi.x, s);
            s = fmaf(int4Weight(hi, 1), x.hi.y, s);
            s = fmaf(int4Weight(hi, 2), x.hi.z, s);
            s = fmaf(int4Weight(hi, 3), x.hi.w, s);
            acc[i] = fmaf(scale[i], s, acc[i]);
        }
    }
};

// Sums each of acc[4] over the 8 lanes that share lane % 4 (those hold the same 4 outputs).
__device__ __forceinline__ void sumLaneGroups(float (&acc)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
        for (int o = 4; o < 32; o <<= 1) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
}

constexpr int kDecodeWarps = 8;

// Decode gate/up: act[pair][16 p + o] = SiLU(gate_o . x) * (up_o . x) for panel p = blockIdx.x of the
// pair blockIdx.y's expert, float32 activations. Launched chained (chained_launch.cuh): it waits for the
// routing at once and lets the down kernel start as soon as every block of it runs.
// Threads: 8 warps split the panel's K blocks; warp w takes kPass consecutive blocks at a time
// (w * kPass, then 8 * kPass further), loading all their gate and up pieces (8 16-byte loads per lane)
// before using them. A lane keeps 4 gate and 4 up sums (outputs 4 (lane % 4) + i); lanes are summed
// by shuffles, warps in shared memory in warp order, and 16 threads finish the panel.
template <ExpertType T>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    gateUpDecodeKernel(GpuExpertLayout l, ExpertPairs b, const float* x, int ldx, float* act) {
    using F = DecodeFormat<T>;
    constexpr int kPass = T == ExpertType::INT4 ? 4 : 2;
    __shared__ float partial[kDecodeWarps][2][kPanelRows];
    waitForPrevious();
    startNext();
    const int panel = blockIdx.x, pair = blockIdx.y;
    if (pair >= b.groupStart[b.groups]) return;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const std::uint8_t* p = b.weights[b.pairGroup[pair]] + static_cast<std::int64_t>(panel) * l.gateUpPanelBytes;
    const float* xr = x + static_cast<std::int64_t>(b.pairToken[pair]) * ldx;
    float gate[4] = {}, up[4] = {};
    for (int kb0 = warp * kPass; kb0 < l.hiddenKBlocks; kb0 += kDecodeWarps * kPass) {
        typename F::Weights w[kPass][2][F::kPiecesPerBlock];
#pragma unroll
        for (int u = 0; u < kPass; ++u) {
            if (kb0 + u >= l.hiddenKBlocks) continue;
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int i = 0; i < F::kPiecesPerBlock; ++i)
                    w[u][m][i] = F::load(p + (2 * (kb0 + u) + m) * l.blockBytes + 512 * i, lane);
        }
#pragma unroll
        for (int u = 0; u < kPass; ++u) {
            if (kb0 + u >= l.hiddenKBlocks) continue;
#pragma unroll
            for (int i = 0; i < F::kPiecesPerBlock; ++i) {
                const int k = (kb0 + u) * l.kBlock + i * F::kPieceInputs;
                const auto in = F::inputs(xr + k, l.hidden - k, lane);
                F::dot(w[u][0][i], in, gate);
                F::dot(w[u][1][i], in, up);
            }
        }
    }
    sumLaneGroups(gate);
    sumLaneGroups(up);
    if (lane < 4)
        for (int i = 0; i < 4; ++i) {
            partial[warp][0][4 * lane + i] = gate[i];
            partial[warp][1][4 * lane + i] = up[i];
        }
    __syncthreads();
    if (threadIdx.x < kPanelRows) {
        const int o = threadIdx.x;
        float g = 0.0f, u = 0.0f;
        for (int w = 0; w < kDecodeWarps; ++w) {
            g += partial[w][0][o];
            u += partial[w][1][o];
        }
        if constexpr (T == ExpertType::INT8) {
            const auto* scales = reinterpret_cast<const float*>(p + static_cast<std::int64_t>(l.hiddenKBlocks) * 2 * l.blockBytes);
            g *= scales[o];
            u *= scales[kPanelRows + o];
        }
        act[static_cast<std::int64_t>(pair) * l.interPad + kPanelRows * panel + o] = silu(g) * u;
    }
}

// Decode down and the weighted sum: out[t][16 q + o] (+)= sum over slots s of weight_s * (down_o . act_s)
// for row panel q = blockIdx.x and token t = blockIdx.y.
// Threads: the work is items (slot s, chunk c), each the panel's contiguous piece over one chunk
// (bf16 4 KiB, int8 2 KiB, int4 1152 bytes). Warp w takes kPass items at a time (8 16-byte loads per
// lane), sums each over lanes and writes it to partial[s][c]; then 16 threads add the chunks of each
// slot and the slots in slot order. Launched chained after gate/up: the routing is older than that
// kernel, so the slots' experts are looked up and the first pass's weights loaded before it waits for
// act.
template <ExpertType T>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    downDecodeKernel(GpuExpertLayout l, ExpertPairs b, const float* act, float* out, int ldOut, bool accumulate) {
    using F = DecodeFormat<T>;
    constexpr int kBlocksPerChunk = kChunkCols / (F::kPieceInputs * F::kPiecesPerBlock);
    constexpr int kPiecesPerChunk = kBlocksPerChunk * F::kPiecesPerBlock;
    constexpr int kPass = 8 / kPiecesPerChunk;
    extern __shared__ float partial[];  // [topK][chunks][16]
    __shared__ const std::uint8_t* slotExpert[kMaxTopK];
    __shared__ int slotPair[kMaxTopK];
    const int q = blockIdx.x, t = blockIdx.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x < b.topK) {
        const int pair = b.slotPair[t * b.topK + threadIdx.x];
        slotPair[threadIdx.x] = pair;
        slotExpert[threadIdx.x] = pair >= 0 ? b.weights[b.pairGroup[pair]] : nullptr;
    }
    __syncthreads();
    const int items = b.topK * l.chunks;
    bool waited = false;
    for (int it0 = warp * kPass; it0 < items; it0 += kDecodeWarps * kPass) {
        typename F::Weights w[kPass][kPiecesPerChunk];
        int pieces[kPass];
#pragma unroll
        for (int u = 0; u < kPass; ++u) {
            const int item = it0 + u, s = item / l.chunks, c = item % l.chunks;
            pieces[u] = 0;
            if (item < items && slotPair[s] >= 0) {
                pieces[u] = (c + 1 < l.chunks ? kChunkCols : l.interPad - kChunkCols * c) / F::kPieceInputs;
                const std::uint8_t* first = downBlock<F::kPieceInputs * F::kPiecesPerBlock>(l, slotExpert[s], q, c * kBlocksPerChunk);
#pragma unroll
                for (int i = 0; i < kPiecesPerChunk; ++i)
                    if (i < pieces[u]) w[u][i] = F::load(first + (i / F::kPiecesPerBlock) * l.blockBytes + 512 * (i % F::kPiecesPerBlock), lane);
            }
        }
        if (!waited) {
            waitForPrevious();
            waited = true;
        }
#pragma unroll
        for (int u = 0; u < kPass; ++u) {
            if (pieces[u] == 0) continue;
            const int item = it0 + u, s = item / l.chunks, c = item % l.chunks;
            const float* a = act + static_cast<std::int64_t>(slotPair[s]) * l.interPad + kChunkCols * c;
            float acc[4] = {};
#pragma unroll
            for (int i = 0; i < kPiecesPerChunk; ++i)
                if (i < pieces[u]) F::dot(w[u][i], F::inputs(a + i * F::kPieceInputs, F::kPieceInputs, lane), acc);
            sumLaneGroups(acc);
            if (lane < 4)
                for (int i = 0; i < 4; ++i) partial[item * kPanelRows + 4 * lane + i] = acc[i];
        }
    }
    waitForPrevious();  // out too may be written by the kernels before
    startNext();
    __syncthreads();
    const int n = kPanelRows * q + threadIdx.x;
    if (threadIdx.x < kPanelRows && n < l.hidden) {
        float* o = out + static_cast<std::int64_t>(t) * ldOut + n;
        float sum = accumulate ? *o : 0.0f;
        for (int s = 0; s < b.topK; ++s) {
            if (slotPair[s] < 0) continue;
            float y = 0.0f;
            for (int c = 0; c < l.chunks; ++c) y += partial[(s * l.chunks + c) * kPanelRows + threadIdx.x];
            if constexpr (T == ExpertType::INT8)
                y *= reinterpret_cast<const float*>(slotExpert[s] + l.downScalesOffset)[n];
            sum = fmaf(b.pairWeight[slotPair[s]], y, sum);
        }
        *o = sum;
    }
}

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
    static constexpr int kBlockBytes = T == ExpertType::INT4 ? 576 : 1024;
    static constexpr int kDataBytes = T == ExpertType::INT4 ? 512 : 1024;
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

__device__ __forceinline__ std::uint32_t bf16Pair(float a, float b) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const std::uint32_t*>(&v);
}

// c += A (16 x 16, row) * B (16 x 8, col), bf16 in, float32 sums.
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

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

// An int4 block, group `group` (inputs 32 group .. + 31): one word (vector 4 group + q) holds inputs
// 4q + j in its low nibbles (step 0 of the group) and 16 + 4q + j in its high ones (step 1).
__device__ __forceinline__ void loadBInt4(const std::uint8_t* block, int group, int o, int q, std::uint32_t (&b)[2][2]) {
    const std::uint32_t w = lds32(block + swizzle(64 * (4 * group + q) + 4 * o));
    const std::uint32_t lo = w & 0x0f0f0f0fu, hi = (w >> 4) & 0x0f0f0f0fu;
    b[0][0] = int4Pair(lo, 0x5150);
    b[0][1] = int4Pair(lo, 0x5352);
    b[1][0] = int4Pair(hi, 0x5150);
    b[1][1] = int4Pair(hi, 0x5352);
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
                  bf16* actOut, float* y, int ldy) {
    using S = Stage<T, Splits>;
    constexpr int kThreads = kPrefillWarps * 32;
    constexpr int kPanelsPerBlock = Down ? 16 : 8;
    if (static_cast<int>(blockIdx.y) >= *tileCount) return;
    extern __shared__ __align__(128) std::uint8_t smem[];
    const int4 tile = tiles[blockIdx.y];  // group, first pair, rows
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
    const std::uint8_t* expert = b.weights[tile.x];
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
        if constexpr (T == ExpertType::INT4) {
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
                    loadBInt4(stage + slot * S::kDataBytes, group, 8 * half + g, q, bw);
                    const std::uint32_t sc =
                        lds32(stage + S::kWeights + slot * S::kScaleBytes + 2 * (16 * group + 8 * half + 2 * q));
                    const float2 scale = __half22float2(*reinterpret_cast<const __half2*>(&sc));
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
                    const float v0 = acc[m][t][2 * r2] * scale[0], v1 = acc[m][t][2 * r2 + 1] * scale[1];
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
                        v[e] = silu(acc[m][t][2 * r2 + e] * gateScale[e]) * (acc[m][t + 2][2 * r2 + e] * upScale[e]);
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

// Exclusive prefix sum over the block (at most 1024 threads); every thread gets its prefix and the total.
__device__ int blockExclusiveScan(int v, int& total) {
    __shared__ int warpSums[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
    int inclusive = v;
    for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += n;
    }
    if (lane == 31) warpSums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        int w = lane < warps ? warpSums[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            const int n = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += n;
        }
        warpSums[lane] = w;
    }
    __syncthreads();
    total = warpSums[warps - 1];
    const int result = inclusive - v + (warp > 0 ? warpSums[warp - 1] : 0);
    __syncthreads();  // warpSums may be reused by a later call
    return result;
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

// Routing to groups: one block of 16 warps; warp w owns entries [w N / 16, (w + 1) N / 16) of the
// [tokens, topK] routing. Pass 1 counts per (warp, expert); a scan turns the counts into each warp's
// first position in each expert's group (expert-major, warp-minor: the entries' order); pass 2 places
// 32 entries at a time, ranking equal experts among the lanes with __match_any_sync.
constexpr int kRouteWarps = 16;
constexpr int kMaxRouteExperts = 512;

__global__ void __launch_bounds__(kRouteWarps * 32)
    groupRoutesKernel(const int* ids, const float* routeWeights, int tokens, int topK, const std::uint8_t* const* expertWeights,
                      int experts, int* groupStart, int* pairToken, int* pairGroup, float* pairWeight, int* slotPair) {
    extern __shared__ int cursor[];  // [kRouteWarps][experts]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int entries = tokens * topK;
    const int begin = static_cast<int>(static_cast<std::int64_t>(entries) * warp / kRouteWarps);
    const int end = static_cast<int>(static_cast<std::int64_t>(entries) * (warp + 1) / kRouteWarps);
    auto expertOf = [&](int i) {
        const int e = ids[i];
        return e >= 0 && e < experts && expertWeights[e] ? e : -1;
    };
    for (int i = threadIdx.x; i < kRouteWarps * experts; i += blockDim.x) cursor[i] = 0;
    __syncthreads();
    for (int i = begin + lane; i < end; i += 32) {
        const int e = expertOf(i);
        if (e >= 0) atomicAdd(&cursor[warp * experts + e], 1);
    }
    __syncthreads();
    int groupSize = 0;
    if (threadIdx.x < experts)
        for (int w = 0; w < kRouteWarps; ++w) {
            const int c = cursor[w * experts + threadIdx.x];
            cursor[w * experts + threadIdx.x] = groupSize;
            groupSize += c;
        }
    int total;
    const int start = blockExclusiveScan(groupSize, total);
    if (threadIdx.x < experts) {
        groupStart[threadIdx.x] = start;
        for (int w = 0; w < kRouteWarps; ++w) cursor[w * experts + threadIdx.x] += start;
    }
    if (threadIdx.x == 0) groupStart[experts] = total;
    __syncthreads();
    for (int base = begin; base < end; base += 32) {
        const int i = base + lane;
        const int e = i < end ? expertOf(i) : -1;
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        if (e >= 0) {
            const int pos = cursor[warp * experts + e] + __popc(peers & ((1u << lane) - 1));
            pairToken[pos] = i / topK;
            pairGroup[pos] = e;
            pairWeight[pos] = routeWeights[i];
            slotPair[i] = pos;
        } else if (i < end) {
            slotPair[i] = -1;
        }
        __syncwarp();
        if (e >= 0 && lane == __ffs(peers) - 1) cursor[warp * experts + e] += __popc(peers);
        __syncwarp();
    }
}

// ---------------------------------------------------------------------------------------------------
// Launchers

void requireBatch(const GpuExpertLayout& l, const ExpertPairs& b, const float* x, int ldx, const char* what) {
    if (b.topK < 1 || b.topK > kMaxTopK || b.groups < 1 || b.tokens < 1 || b.maxPairs < 1)
        throw Error(std::string(what) + ": a batch needs 1-" + std::to_string(kMaxTopK) + " slots per token and groups, tokens, pairs");
    if (ldx % 4 != 0 || reinterpret_cast<std::uintptr_t>(x) % 16 != 0)
        throw Error(std::string(what) + ": activation rows must be 16-byte aligned (ldx a multiple of 4)");
    if (l.hidden < 1 || l.inter < 1) throw Error(std::string(what) + ": empty expert layout");
    if (!b.weights || !b.groupStart || !b.pairToken || !b.pairGroup || !b.pairWeight || !b.slotPair)
        throw Error(std::string(what) + ": a batch needs every one of its device arrays");
}

template <ExpertType T>
void decode(const GpuExpertLayout& l, const ExpertPairs& b, const float* x, int ldx, float* out, int ldOut,
            bool accumulate, float* act, cudaStream_t s) {
    const std::size_t shared = static_cast<std::size_t>(b.topK) * l.chunks * kPanelRows * sizeof(float);
    if (shared > 48 * 1024) throw Error("decode experts: topK x chunks too large for one block's partial sums");
    launchChained(gateUpDecodeKernel<T>, dim3(l.gateUpPanels, b.maxPairs), dim3(kDecodeWarps * 32), 0, s, l, b, x, ldx, act);
    launchChained(downDecodeKernel<T>, dim3(l.downPanels, b.tokens), dim3(kDecodeWarps * 32), shared, s, l, b,
                  static_cast<const float*>(act), out, ldOut, accumulate);
}

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
             bool accumulate, const PrefillBuffers& buf, cudaStream_t s) {
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
        l, b, buf.tiles, buf.tileCount, buf.xs, l.hiddenPad, buf.act, nullptr, 0);
    TANDEM_CUDA_CHECK(cudaGetLastError());
    down<<<dim3((l.downPanels + 15) / 16, buf.maxTiles), kPrefillWarps * 32, S::kTotal, s>>>(
        l, b, buf.tiles, buf.tileCount, buf.act, l.interPad, nullptr, buf.y, buf.ldy);
    TANDEM_CUDA_CHECK(cudaGetLastError());
    sumSlotsKernel<<<b.tokens, 256, 0, s>>>(b, buf.y, buf.ldy, l.hidden, out, ldOut, accumulate);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

GpuExpertLayout gpuExpertLayout(const io::ExpertLayout& l) {
    GpuExpertLayout g;
    g.type = l.type;
    g.hidden = l.hidden;
    g.inter = l.inter;
    g.kBlock = l.kBlock;
    g.blockBytes = static_cast<int>(l.blockBytes);
    g.hiddenPad = l.hiddenPad;
    g.interPad = l.interPad;
    g.hiddenKBlocks = l.hiddenKBlocks();
    g.gateUpPanels = l.gateUpPanels;
    g.gateUpPanelBytes = static_cast<int>(l.gateUpPanelBytes);
    g.downPanels = l.downPanels;
    g.chunks = l.chunks;
    g.downOffset = static_cast<std::int64_t>(l.downOffset);
    g.fullChunkBytes = static_cast<std::int64_t>(l.fullChunkBytes());
    g.downScalesOffset = static_cast<std::int64_t>(l.downScalesOffset);
    g.dataBytes = static_cast<std::int64_t>(l.dataBytes);
    return g;
}

ExpertPairs launchGroupRoutes(const int* ids, const float* routeWeights, int tokens, int topK,
                              const std::uint8_t* const* expertWeights, int experts, int* groupStart, int* pairToken,
                              int* pairGroup, float* pairWeight, int* slotPair, cudaStream_t s) {
    if (experts < 1 || experts > kMaxRouteExperts || topK < 1 || topK > kMaxTopK || tokens < 1)
        throw Error("grouping routes: needs 1-" + std::to_string(kMaxRouteExperts) + " experts and 1-" +
                    std::to_string(kMaxTopK) + " slots per token");
    const std::size_t shared = static_cast<std::size_t>(kRouteWarps) * experts * sizeof(int);
    groupRoutesKernel<<<1, kRouteWarps * 32, shared, s>>>(ids, routeWeights, tokens, topK, expertWeights, experts,
                                                         groupStart, pairToken, pairGroup, pairWeight, slotPair);
    TANDEM_CUDA_CHECK(cudaGetLastError());
    ExpertPairs b;
    b.groups = experts;
    b.weights = expertWeights;
    b.groupStart = groupStart;
    b.pairToken = pairToken;
    b.pairGroup = pairGroup;
    b.pairWeight = pairWeight;
    b.maxPairs = tokens * topK;
    b.slotPair = slotPair;
    b.tokens = tokens;
    b.topK = topK;
    return b;
}

std::size_t decodeScratchBytes(const GpuExpertLayout& l, int maxPairs) {
    return roundUp(static_cast<std::size_t>(maxPairs) * l.interPad * sizeof(float), 256);
}

void launchExpertsDecode(const GpuExpertLayout& l, const ExpertPairs& b, const float* x, int ldx, float* out, int ldOut,
                         bool accumulate, void* scratch, cudaStream_t s) {
    requireBatch(l, b, x, ldx, "decode experts");
    auto* act = static_cast<float*>(scratch);
    switch (l.type) {
    case ExpertType::BF16: decode<ExpertType::BF16>(l, b, x, ldx, out, ldOut, accumulate, act, s); return;
    case ExpertType::INT8: decode<ExpertType::INT8>(l, b, x, ldx, out, ldOut, accumulate, act, s); return;
    case ExpertType::INT4: decode<ExpertType::INT4>(l, b, x, ldx, out, ldOut, accumulate, act, s); return;
    }
}

std::size_t prefillScratchBytes(const GpuExpertLayout& l, int tokens, int maxPairs, int groups, int splits) {
    const std::size_t ldy = roundUp(static_cast<std::size_t>(l.hidden), 4);
    const std::size_t maxTiles = static_cast<std::size_t>((maxPairs + kTileTokens - 1) / kTileTokens + groups);
    return roundUp(static_cast<std::size_t>(tokens) * splits * l.hiddenPad * sizeof(bf16), 256) +
           roundUp(static_cast<std::size_t>(maxPairs) * splits * l.interPad * sizeof(bf16), 256) +
           roundUp(static_cast<std::size_t>(maxPairs) * ldy * sizeof(float), 256) + roundUp(maxTiles * sizeof(int4), 256) +
           256;
}

void launchExpertsPrefill(const GpuExpertLayout& l, const ExpertPairs& b, const float* x, int ldx, float* out, int ldOut,
                          bool accumulate, int splits, void* scratch, cudaStream_t s) {
    requireBatch(l, b, x, ldx, "prefill experts");
    if (splits != 2 && splits != 3) throw Error("prefill experts: activations split into 2 or 3 bf16 terms, not " + std::to_string(splits));
    if (b.groups > 1024) throw Error("prefill experts: at most 1024 groups");
    const PrefillBuffers buf = carvePrefill(l, b.tokens, b.maxPairs, b.groups, splits, scratch);
    if (buf.maxTiles > 65535) throw Error("prefill experts: too many pairs for one launch; split the tokens");
    const bool three = splits == 3;
    switch (l.type) {
    case ExpertType::BF16:
        three ? prefill<ExpertType::BF16, 3>(l, b, x, ldx, out, ldOut, accumulate, buf, s)
              : prefill<ExpertType::BF16, 2>(l, b, x, ldx, out, ldOut, accumulate, buf, s);
        return;
    case ExpertType::INT8:
        three ? prefill<ExpertType::INT8, 3>(l, b, x, ldx, out, ldOut, accumulate, buf, s)
              : prefill<ExpertType::INT8, 2>(l, b, x, ldx, out, ldOut, accumulate, buf, s);
        return;
    case ExpertType::INT4:
        three ? prefill<ExpertType::INT4, 3>(l, b, x, ldx, out, ldOut, accumulate, buf, s)
              : prefill<ExpertType::INT4, 2>(l, b, x, ldx, out, ldOut, accumulate, buf, s);
        return;
    }
}

}  // namespace tandem::cuda
