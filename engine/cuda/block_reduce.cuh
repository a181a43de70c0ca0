#pragma once
// Warp and block reductions used by several kernels.
#include <cuda_runtime.h>

#include <cuda_bf16.h>

namespace tandem::cuda {

// Stores v as a bf16 GEMM input: the rounded value at hi, and with split the rounding error at lo.
__device__ inline void storeBf16(float v, __nv_bfloat16* hi, __nv_bfloat16* lo, bool split) {
    const __nv_bfloat16 h = __float2bfloat16(v);
    *hi = h;
    if (split) *lo = __float2bfloat16(v - __bfloat162float(h));
}

__device__ inline float warpSum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ inline float warpMax(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 floats.
__device__ inline float blockSum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warpSum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? scratch[lane] : 0.0f;
    return warpSum(v);
}

__device__ inline float blockMax(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warpMax(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    v = lane < warps ? scratch[lane] : -INFINITY;
    return warpMax(v);
}

}  // namespace tandem::cuda
