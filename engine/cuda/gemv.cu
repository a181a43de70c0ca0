// Decode's matrix-vector product: one token, so every weight is read once and used once, and the
// product is bound by reading W. One warp per output row reads the row 16 bytes per lane and sums
// in float32; the split-precision input's hi and lo rows are added as they are read, so one kernel
// replaces the cuBLAS GEMM over both rows and the pair sum that followed it.
#include <cstdint>

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

}  // namespace

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
