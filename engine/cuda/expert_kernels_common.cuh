#pragma once
// What the routed-expert kernels share (expert_kernels.cu: decode, the routes' grouping and the layout;
// expert_prefill.cu: prefill): the packed layout's constants, weight loads and conversions, the block
// scan and the batch check. Internal to those two files (and fp8.cu, which widens int8 dense weights with
// int8Weight); the description of the layout is at the top of expert_kernels.cu.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "cuda/expert_kernels.h"
#include "tandem/error.h"

namespace tandem::cuda {
namespace {

using io::ExpertType;
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

// The expert whose biases group `group` of a batch takes (ExpertPairs::groupExpert).
__device__ __forceinline__ int groupExpertOf(const ExpertPairs& b, int group) { return b.groupExpert ? b.groupExpert[group] : group; }

// The gated activation of intermediate row o (< interPad) of `expert`, from its gate and up sums: SiLU(g) * u,
// or with an epilogue its biases first (rows past inter have none) and its activation (ExpertEpilogue).
// Padding rows (zero weights, no bias) give 0 either way.
__device__ __forceinline__ float gatedActivation(const ExpertEpilogue& ep, int expert, int o, int inter, float g, float u) {
    if (o < inter) {
        if (ep.gateBias) g += ep.gateBias[static_cast<std::int64_t>(expert) * inter + o];
        if (ep.upBias) u += ep.upBias[static_cast<std::int64_t>(expert) * inter + o];
    }
    if (!ep.clampedSwiglu) return silu(g) * u;
    const float gc = fminf(g, ep.limit), uc = fminf(fmaxf(u, -ep.limit), ep.limit);
    return (uc + 1.0f) * gc / (1.0f + expf(-ep.alpha * gc));
}

// Down's bias of output n (< hidden) of `expert`, or 0.
__device__ __forceinline__ float downBiasOf(const ExpertEpilogue& ep, int expert, int n, int hidden) {
    return ep.downBias ? ep.downBias[static_cast<std::int64_t>(expert) * hidden + n] : 0.0f;
}

// u - 128 for byte `byte` of an int8 word: 0x4B0000uu is the float 2^23 + u.
__device__ __forceinline__ float int8Weight(std::uint32_t word, int byte) {
    return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440 + byte)) - 8388736.0f;
}

// n - 8 for byte `byte` of a word of nibbles (already masked to 0x0F0F0F0F).
__device__ __forceinline__ float int4Weight(std::uint32_t nibbles, int byte) {
    return __uint_as_float(__byte_perm(nibbles, 0x4B000000u, 0x7440 + byte)) - 8388616.0f;
}

__device__ __forceinline__ float halfBits(unsigned short bits) { return __half2float(__ushort_as_half(bits)); }

// INT4 and MXFP4 share the block geometry (512 bytes of nibbles, 2 x 16 16-bit group scales).
__host__ __device__ constexpr bool fourBit(ExpertType t) { return t == ExpertType::INT4 || t == ExpertType::MXFP4; }

// MXFP4 (gpt-oss): bytes `first` and first + 1 (0 or 2) of a masked nibble word as a bf16 pair of the
// e2m1 values times two (cpu::kFp4Doubled: 0, 1, 2, 3, 4, 6, 8, 12 by the low 3 bits, bit 3 the sign),
// exact in bf16; the group's bf16 scale 2^(e - 128) holds the halving. Two __byte_perm table lookups give
// each value's low and high byte (tables by magnitude: 00 80 00 40 80 C0 00 40 and 00 3F 40 40 40 40 41 41),
// a third interleaves them, and the sign bits go to bits 15 and 31.
__device__ __forceinline__ std::uint32_t fp4Pair(std::uint32_t nibbles, int first) {
    const std::uint32_t w = nibbles >> (8 * first);
    const std::uint32_t selector = (w & 7u) | ((w >> 4) & 0x70u);
    const std::uint32_t lo = __byte_perm(0x40008000u, 0x4000C080u, selector);
    const std::uint32_t hi = __byte_perm(0x40403F00u, 0x41414040u, selector);
    const std::uint32_t sign = ((w & 0x08u) << 12) | ((w & 0x0800u) << 20);
    return __byte_perm(lo, hi, 0x5140) | sign;
}

__device__ __forceinline__ float bf16Bits(unsigned short bits) { return __uint_as_float(static_cast<std::uint32_t>(bits) << 16); }

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

inline void requireBatch(const GpuExpertLayout& l, const ExpertPairs& b, const float* x, int ldx, const char* what) {
    if (b.topK < 1 || b.topK > kMaxTopK || b.groups < 1 || b.tokens < 1 || b.maxPairs < 1)
        throw Error(std::string(what) + ": a batch needs 1-" + std::to_string(kMaxTopK) + " slots per token and groups, tokens, pairs");
    if (ldx % 4 != 0 || reinterpret_cast<std::uintptr_t>(x) % 16 != 0)
        throw Error(std::string(what) + ": activation rows must be 16-byte aligned (ldx a multiple of 4)");
    if (l.hidden < 1 || l.inter < 1) throw Error(std::string(what) + ": empty expert layout");
    if (!b.weights || !b.groupStart || !b.pairToken || !b.pairGroup || !b.pairWeight || !b.slotPair)
        throw Error(std::string(what) + ": a batch needs every one of its device arrays");
}

}  // namespace
}  // namespace tandem::cuda
