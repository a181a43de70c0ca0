// Decode's matrix-vector product: one token, so every weight is read once and used once, and the
// product is bound by reading W. One warp per output row reads the row 16 bytes per lane and sums
// in float32; the split-precision input's hi and lo rows are added as they are read, so one kernel
// replaces the cuBLAS GEMM over both rows and the pair sum that followed it.
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ inline float inputAt(const bf16* x, const bf16* lo, int i) {
    return __bfloat162float(x[i]) + (lo ? __bfloat162float(lo[i]) : 0.0f);
}

// Eight weights times eight inputs, each a 16-byte load of bf16, summed in float32.
__device__ inline float dot8(uint4 w, uint4 x) {
    const auto* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
    const auto* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 wf = __bfloat1622float2(wp[j]), xf = __bfloat1622float2(xp[j]);
        sum += wf.x * xf.x + wf.y * xf.y;
    }
    return sum;
}

__global__ void gemvKernel(const bf16* w, int n, int k, const bf16* x, const bf16* lo, float* y, bool accumulate,
                           bool vectorized) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= n) return;
    const bf16* wr = w + static_cast<long>(row) * k;
    float sum = 0.0f;
    int tail = 0;
    if (vectorized) {
        const int full = k / 256 * 256;  // 32 lanes x 8 weights per pass
        for (int c = lane * 8; c < full; c += 256) {
            const uint4 wv = *reinterpret_cast<const uint4*>(wr + c);
            sum += dot8(wv, *reinterpret_cast<const uint4*>(x + c));
            if (lo) sum += dot8(wv, *reinterpret_cast<const uint4*>(lo + c));
        }
        tail = full;
    }
    for (int c = tail + lane; c < k; c += 32) sum += __bfloat162float(wr[c]) * inputAt(x, lo, c);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[row] = (accumulate ? y[row] : 0.0f) + sum;
}

// Decode's first products of a layer with its RMSNorm folded in: y = W (x / rms(x) * gamma), x float32.
// Every block takes the norm of x itself (a few KB, from L2), so the norm kernel and its bf16 output
// go away; the input is float32, as the norm's output was before rounding.
__global__ void gemvNormedKernel(const bf16* w, int n, int k, const float* x, const float* gamma, float eps, float* y,
                                 bool vectorized) {
    __shared__ float scratch[32];
    float squares = 0.0f;
    for (int i = threadIdx.x; i < k; i += blockDim.x) squares += x[i] * x[i];
    const float inv = 1.0f / sqrtf(blockSum(squares, scratch) / static_cast<float>(k) + eps);
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= n) return;
    const bf16* wr = w + static_cast<long>(row) * k;
    float sum = 0.0f;
    int tail = 0;
    if (vectorized) {
        const int full = k / 256 * 256;
        for (int c = lane * 8; c < full; c += 256) {
            const uint4 wv = *reinterpret_cast<const uint4*>(wr + c);
            const auto* wp = reinterpret_cast<const __nv_bfloat162*>(&wv);
            const float4 x0 = *reinterpret_cast<const float4*>(x + c), x1 = *reinterpret_cast<const float4*>(x + c + 4);
            const float4 g0 = *reinterpret_cast<const float4*>(gamma + c), g1 = *reinterpret_cast<const float4*>(gamma + c + 4);
            const float2 w0 = __bfloat1622float2(wp[0]), w1 = __bfloat1622float2(wp[1]);
            const float2 w2 = __bfloat1622float2(wp[2]), w3 = __bfloat1622float2(wp[3]);
            sum += w0.x * x0.x * g0.x + w0.y * x0.y * g0.y + w1.x * x0.z * g0.z + w1.y * x0.w * g0.w +
                   w2.x * x1.x * g1.x + w2.y * x1.y * g1.y + w3.x * x1.z * g1.z + w3.y * x1.w * g1.w;
        }
        tail = full;
    }
    for (int c = tail + lane; c < k; c += 32) sum += __bfloat162float(wr[c]) * x[c] * gamma[c];
    sum = warpSum(sum);
    if (lane == 0) y[row] = sum * inv;
}

}  // namespace

void launchGemvNormed(const bf16* w, int n, int k, const float* x, const float* gamma, float eps, float* y,
                      cudaStream_t s) {
    auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const bool vectorized = k % 8 == 0 && aligned(w) && aligned(x) && aligned(gamma);
    const int blocks = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
    gemvNormedKernel<<<blocks, kWarpsPerBlock * 32, 0, s>>>(w, n, k, x, gamma, eps, y, vectorized);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchGemv(const bf16* w, int n, int k, const bf16* x, int ldx, bool split, float* y, bool accumulate,
                cudaStream_t s) {
    // 16-byte loads need every row of W and both input rows to start 16-byte aligned.
    auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const bool vectorized = k % 8 == 0 && aligned(w) && aligned(x) && (!split || aligned(x + ldx));
    const int blocks = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
    gemvKernel<<<blocks, kWarpsPerBlock * 32, 0, s>>>(w, n, k, x, split ? x + ldx : nullptr, y, accumulate, vectorized);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tandem::cuda
