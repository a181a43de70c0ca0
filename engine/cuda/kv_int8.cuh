#pragma once
// The 8-bit KV cache's arithmetic on the GPU (kernels.h, Int8Rows): a group quantized by one block, and
// codes read back. The same rule as the CPU's quantizeKvGroup (model/kv_cache.cpp), so both paths hold
// the same codes for the same values.
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/kernels.h"

namespace tandem::cuda {

// One group quantized by a block whose threads hold its values (x valid where `inGroup`; every thread
// calls it): the block's largest magnitude sets the scale (thread 0 writes it), each thread writes its
// code. A zero group: zero codes, scale 0; a NaN or infinity: zero codes, scale NaN (as on the CPU, the
// rows that read the group turn NaN as a float cache's would).
__device__ inline void quantizeGroupByBlock(float x, bool inGroup, int index, std::int8_t* codes, float* scale,
                                            float* scratch) {
    const bool finite = !inGroup || isfinite(x);
    const float bad = blockMax(finite ? 0.0f : 1.0f, scratch);
    const float largest = blockMax(inGroup && finite ? fabsf(x) : 0.0f, scratch);
    if (bad > 0.0f || largest == 0.0f) {
        if (threadIdx.x == 0) *scale = bad > 0.0f ? __int_as_float(0x7fc00000) : 0.0f;
        if (inGroup) codes[index] = 0;
        return;
    }
    if (threadIdx.x == 0) *scale = largest / 127.0f;
    if (inGroup) {
        const float inverse = 127.0f / largest;
        codes[index] = static_cast<std::int8_t>(fminf(127.0f, fmaxf(-127.0f, rintf(x * inverse))));
    }
}

// Four codes (one 32-bit word, the lowest byte first) as floats, unscaled: the integer-to-float
// conversion. The GQA key-head kernel reads its codes so.
__device__ __forceinline__ float4 codesToFloat4(std::uint32_t word) {
    return make_float4(static_cast<float>(static_cast<std::int8_t>(word & 0xff)),
                       static_cast<float>(static_cast<std::int8_t>((word >> 8) & 0xff)),
                       static_cast<float>(static_cast<std::int8_t>((word >> 16) & 0xff)),
                       static_cast<float>(static_cast<std::int8_t>(word >> 24)));
}

// The same four floats, exactly, without the conversion, which sm_90 issues at 16 a clock a
// multiprocessor against 128 multiply-adds: each code + 128 is an unsigned byte u, placed by a byte
// permute as the mantissa of 2^23 (the float 2^23 + u), and 2^23 + 128 subtracted. MLA's decode kernel
// reads its codes so (5-12% faster there on the H200; the GQA key-head kernel 1-3% slower, so it converts).
__device__ __forceinline__ float4 codesToFloat4ByPermute(std::uint32_t word) {
    const std::uint32_t u = word ^ 0x80808080u;
    constexpr std::uint32_t kTwo23 = 0x4b000000u;
    constexpr float kOffset = 8388736.0f;  // 2^23 + 128
    return make_float4(__uint_as_float(__byte_perm(u, kTwo23, 0x7650)) - kOffset,
                       __uint_as_float(__byte_perm(u, kTwo23, 0x7651)) - kOffset,
                       __uint_as_float(__byte_perm(u, kTwo23, 0x7652)) - kOffset,
                       __uint_as_float(__byte_perm(u, kTwo23, 0x7653)) - kOffset);
}

}  // namespace tandem::cuda
