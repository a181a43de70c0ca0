// Routed experts from the packed layout (expert_kernels.h, io/expert_layout.h).
//
// What the layout gives the kernels: every matrix is a sequence of blocks of 16 outputs x kBlock inputs
// (32 for bf16, 64 for int8/int4), and a block is made of 64-byte rows in which bytes 4o..4o+3 belong
// to output o: a bf16 row holds inputs (2j, 2j+1) of each output, an int8 row inputs 4j..4j+3, an int4
// row (vector v) 4 inputs in its low nibbles and the 4 inputs 16 further on in its high nibbles, with
// the block's 2 x 16 fp16 group scales after its 512 bytes of nibbles (MXFP4: the same, its nibbles e2m1
// values and its scales bf16 powers of two). Gate and up blocks alternate
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

#include <algorithm>
#include <string>

#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/expert_kernels_common.cuh"
#include "tandem/error.h"

namespace tandem::cuda {
namespace {

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

// The 4 values of a masked nibble word (bytes 0-3), and a 16-bit group scale: INT4 n - 8 with fp16
// scales; MXFP4 the e2m1 values times two (fp4Pair) with bf16 scales 2^(e - 128).
template <ExpertType T>
__device__ __forceinline__ float4 nibbleValues(std::uint32_t nibbles) {
    if constexpr (T == ExpertType::MXFP4) {
        const std::uint32_t p01 = fp4Pair(nibbles, 0), p23 = fp4Pair(nibbles, 2);
        return {__uint_as_float(p01 << 16), __uint_as_float(p01 & 0xffff0000u), __uint_as_float(p23 << 16),
                __uint_as_float(p23 & 0xffff0000u)};
    } else {
        return {int4Weight(nibbles, 0), int4Weight(nibbles, 1), int4Weight(nibbles, 2), int4Weight(nibbles, 3)};
    }
}
template <ExpertType T>
__device__ __forceinline__ float groupScale(std::uint32_t bits) {
    if constexpr (T == ExpertType::MXFP4)
        return bf16Bits(static_cast<unsigned short>(bits));
    else
        return halfBits(static_cast<unsigned short>(bits));
}

// INT4 and MXFP4 (the same block geometry).
template <ExpertType T>
struct FourBitDecode {
    static constexpr int kPieceInputs = 64;  // the whole block: 8 vectors of 8 inputs
    static constexpr int kPiecesPerBlock = 1;
    struct Weights {
        uint4 w;
        uint2 scales;  // 16-bit scales of the lane's 4 outputs in its vector's group
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
        const float scale[4] = {groupScale<T>(w.scales.x & 0xffff), groupScale<T>(w.scales.x >> 16),
                                groupScale<T>(w.scales.y & 0xffff), groupScale<T>(w.scales.y >> 16)};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float4 lo = nibbleValues<T>(words[i] & 0x0f0f0f0fu), hi = nibbleValues<T>((words[i] >> 4) & 0x0f0f0f0fu);
            float s = lo.x * x.lo.x;
            s = fmaf(lo.y, x.lo.y, s);
            s = fmaf(lo.z, x.lo.z, s);
            s = fmaf(lo.w, x.lo.w, s);
            s = fmaf(hi.x, x.hi.x, s);
            s = fmaf(hi.y, x.hi.y, s);
            s = fmaf(hi.z, x.hi.z, s);
            s = fmaf(hi.w, x.hi.w, s);
            acc[i] = fmaf(scale[i], s, acc[i]);
        }
    }
};

template <>
struct DecodeFormat<ExpertType::INT4> : FourBitDecode<ExpertType::INT4> {};
template <>
struct DecodeFormat<ExpertType::MXFP4> : FourBitDecode<ExpertType::MXFP4> {};

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
    gateUpDecodeKernel(GpuExpertLayout l, ExpertPairs b, const float* x, int ldx, float* act, ExpertEpilogue ep) {
    using F = DecodeFormat<T>;
    constexpr int kPass = fourBit(T) ? 4 : 2;
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
        const int row = kPanelRows * panel + o;
        act[static_cast<std::int64_t>(pair) * l.interPad + row] =
            gatedActivation(ep, groupExpertOf(b, b.pairGroup[pair]), row, l.inter, g, u);
    }
}

// Decode down and the weighted sum: out[t][16 q + o] (+)= sum over slots s of weight_s * (down_o . act_s)
// for row panel q = blockIdx.x and token t = blockIdx.y.
// Threads: the work is items (slot s, chunk c), each the panel's contiguous piece over one chunk
// (bf16 4 KiB, int8 2 KiB, int4 1152 bytes). Warp w takes kPass items at a time (8 16-byte loads per
// lane), sums each over lanes and writes it to partial[s][c]; then 16 threads add the chunks of each
// slot and the slots in slot order. Launched chained after gate/up: the routing is older than that
// kernel, so the slots' experts are looked up and the first pass's weights loaded before it waits for
// act. Pass items a warp at a time: 8 loads' worth (defaultDownPass), or for int4 as many as make every
// item one pass (Qwen3-30B-A3B: 8 slots x 6 chunks = 48 items, 6 a warp), so that all of the kernel's
// weight loads are in flight before it waits.
template <ExpertType T>
constexpr int defaultDownPass() {
    using F = DecodeFormat<T>;
    return 8 / (kChunkCols / (F::kPieceInputs * F::kPiecesPerBlock) * F::kPiecesPerBlock);
}

template <ExpertType T, int Pass>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    downDecodeKernel(GpuExpertLayout l, ExpertPairs b, const float* act, float* out, int ldOut, bool accumulate,
                     DecodeNorm norm, ExpertEpilogue ep) {
    using F = DecodeFormat<T>;
    constexpr int kBlocksPerChunk = kChunkCols / (F::kPieceInputs * F::kPiecesPerBlock);
    constexpr int kPiecesPerChunk = kBlocksPerChunk * F::kPiecesPerBlock;
    constexpr int kPass = Pass;
    extern __shared__ float partial[];  // [topK][chunks][16]
    __shared__ const std::uint8_t* slotExpert[kMaxTopK];
    __shared__ int slotPair[kMaxTopK];
    __shared__ int slotIndex[kMaxTopK];  // the layer's expert of each slot (its down bias)
    const int q = blockIdx.x, t = blockIdx.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x < b.topK) {
        const int pair = b.slotPair[t * b.topK + threadIdx.x];
        slotPair[threadIdx.x] = pair;
        slotExpert[threadIdx.x] = pair >= 0 ? b.weights[b.pairGroup[pair]] : nullptr;
        slotIndex[threadIdx.x] = pair >= 0 ? groupExpertOf(b, b.pairGroup[pair]) : 0;
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
            y += downBiasOf(ep, slotIndex[s], n, l.hidden);
            sum = fmaf(b.pairWeight[slotPair[s]], y, sum);
        }
        *o = sum;
    }
    if (!norm.weight) return;
    // The norm that comes next, by the block that finishes last (one token): its row is whole once every
    // block's writes are visible, which the fence before each block's count and after the last one's see to.
    __shared__ bool last;
    __shared__ float scratch[32];
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(norm.blocksDone, 1u) == gridDim.x * gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    float squares = 0.0f;
    for (int i = threadIdx.x; i < l.hidden; i += blockDim.x) {
        const float v = __ldcg(out + i);
        squares += v * v;
    }
    const float inv = 1.0f / sqrtf(blockSum(squares, scratch) / static_cast<float>(l.hidden) + norm.eps);
    for (int i = threadIdx.x; i < l.hidden; i += blockDim.x)
        storeBf16(__ldcg(out + i) * inv * norm.weight[i], norm.out + i, norm.out + l.hidden + i, norm.split);
    if (threadIdx.x == 0) *norm.blocksDone = 0;
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

template <ExpertType T>
void decode(const GpuExpertLayout& l, const ExpertPairs& b, const float* x, int ldx, float* out, int ldOut,
            bool accumulate, float* act, cudaStream_t s, const DecodeNorm& norm, const ExpertEpilogue& ep) {
    const std::size_t shared = static_cast<std::size_t>(b.topK) * l.chunks * kPanelRows * sizeof(float);
    if (shared > 48 * 1024) throw Error("decode experts: topK x chunks too large for one block's partial sums");
    launchChained(gateUpDecodeKernel<T>, dim3(l.gateUpPanels, b.maxPairs), dim3(kDecodeWarps * 32), 0, s, l, b, x, ldx, act, ep);
    const dim3 grid(l.downPanels, b.tokens);
    const auto launchDown = [&](auto kernel) {
        launchChained(kernel, grid, dim3(kDecodeWarps * 32), shared, s, l, b, static_cast<const float*>(act), out, ldOut,
                      accumulate, norm, ep);
    };
    const int items = b.topK * l.chunks;
    constexpr int kDefault = defaultDownPass<T>();
    if constexpr (fourBit(T)) {
        if (items > kDecodeWarps * kDefault && items <= kDecodeWarps * 6) return launchDown(downDecodeKernel<T, 6>);
        if (items > kDecodeWarps * 6 && items <= kDecodeWarps * 8) return launchDown(downDecodeKernel<T, 8>);
    }
    launchDown(downDecodeKernel<T, kDefault>);
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
                         bool accumulate, void* scratch, cudaStream_t s, const DecodeNorm& norm, const ExpertEpilogue& ep) {
    requireBatch(l, b, x, ldx, "decode experts");
    if (norm.weight && (b.tokens != 1 || !norm.blocksDone || !norm.out))
        throw Error("decode experts: the following norm needs one token, its output and a counter");
    auto* act = static_cast<float*>(scratch);
    switch (l.type) {
    case ExpertType::BF16: decode<ExpertType::BF16>(l, b, x, ldx, out, ldOut, accumulate, act, s, norm, ep); return;
    case ExpertType::INT8: decode<ExpertType::INT8>(l, b, x, ldx, out, ldOut, accumulate, act, s, norm, ep); return;
    case ExpertType::INT4: decode<ExpertType::INT4>(l, b, x, ldx, out, ldOut, accumulate, act, s, norm, ep); return;
    case ExpertType::MXFP4: decode<ExpertType::MXFP4>(l, b, x, ldx, out, ldOut, accumulate, act, s, norm, ep); return;
    }
}

}  // namespace tandem::cuda
