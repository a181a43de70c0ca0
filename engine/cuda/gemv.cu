// Decode's matrix-vector product: one token, so every weight is read once and used once, and the
// product is bound by reading W. Warps read rows 16 bytes per lane, `Unroll` loads in flight, and sum
// in float32; the split-precision input's hi and lo rows are added as they are read, so one kernel
// replaces the cuBLAS GEMM over both rows and the pair sum that followed it. A matrix of few rows
// (most of a layer's projections) has too few warps to keep enough loads in flight with one warp per
// row, so two warps share a row; larger ones take one warp a row. launchGemv picks, from what
// scripts/bench_gemv.cu measured (docs/BENCHMARKS.md). Launched chained (chained_launch.cuh), each
// warp issues its first loads before the previous kernel has finished: only x depends on it.
#include <cstdint>

#include "cuda/chained_launch.cuh"
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

// SplitK warps per row, each over k / SplitK columns (SplitK > 1 only when vectorized and k is a
// multiple of 8 * SplitK); without `vectorized` (unaligned rows) one warp a row reads bf16 by bf16.
template <int SplitK, int Unroll>
__global__ void gemvKernel(const bf16* w, int n, int k, const bf16* x, const bf16* lo, float* y, bool accumulate,
                           bool vectorized, const float* bias) {
    __shared__ float partial[kWarpsPerBlock];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = blockIdx.x * (kWarpsPerBlock / SplitK) + warp / SplitK, part = warp % SplitK;
    const bool valid = row < n;
    const int per = k / SplitK;
    const bf16* wr = w + static_cast<long>(valid ? row : 0) * k + part * per;
    const int first = lane * 8;
    uint4 wv[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u)
        if (vectorized && valid && first + u * 256 < per) wv[u] = *reinterpret_cast<const uint4*>(wr + first + u * 256);
    waitForPrevious();
    startNext();
    float sum = 0.0f;
    if (valid && vectorized) {
        const bf16* xr = x + part * per;
        const bf16* lr = lo ? lo + part * per : nullptr;
        for (int c = first; c < per; c += 256 * Unroll) {
            if (c != first) {
#pragma unroll
                for (int u = 0; u < Unroll; ++u)
                    if (c + u * 256 < per) wv[u] = *reinterpret_cast<const uint4*>(wr + c + u * 256);
            }
#pragma unroll
            for (int u = 0; u < Unroll; ++u) {
                if (c + u * 256 >= per) continue;
                sum += dot8(wv[u], *reinterpret_cast<const uint4*>(xr + c + u * 256));
                if (lr) sum += dot8(wv[u], *reinterpret_cast<const uint4*>(lr + c + u * 256));
            }
        }
    } else if (valid) {
        for (int c = lane; c < k; c += 32) sum += __bfloat162float(wr[c]) * inputAt(x, lo, c);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if constexpr (SplitK > 1) {
        if (lane == 0) partial[warp] = sum;
        __syncthreads();
        if (part != 0) return;
        for (int p = 1; p < SplitK; ++p) sum += partial[warp + p];
    }
    if (valid && lane == 0) y[row] = (accumulate ? y[row] : 0.0f) + sum + (bias ? bias[row] : 0.0f);
}

template <int SplitK, int Unroll>
void launchVariant(const bf16* w, int n, int k, const bf16* x, const bf16* lo, float* y, bool accumulate,
                   bool vectorized, const float* bias, cudaStream_t s) {
    constexpr int rows = kWarpsPerBlock / SplitK;
    launchChained(gemvKernel<SplitK, Unroll>, (n + rows - 1) / rows, kWarpsPerBlock * 32, 0, s, w, n, k, x, lo, y,
                  accumulate, vectorized, bias);
}

}  // namespace

void launchGemv(const bf16* w, int n, int k, const bf16* x, int ldx, bool split, float* y, bool accumulate,
                cudaStream_t s, const float* bias) {
    // 16-byte loads need every row of W and both input rows to start 16-byte aligned.
    auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const bool vectorized = k % 8 == 0 && aligned(w) && aligned(x) && (!split || aligned(x + ldx));
    const bf16* lo = split ? x + ldx : nullptr;
    // Variants by rows, as measured (scripts/bench_gemv.cu): under 4096 rows too few warps keep loads in
    // flight, so two share a row; from 4096 one warp a row does as well or better (DeepSeek-V3's o_proj,
    // 7168 x 16384: 60 against 69 us); the vocabulary's matrix takes four loads in flight.
    if (vectorized && n >= 16384)
        launchVariant<1, 4>(w, n, k, x, lo, y, accumulate, true, bias, s);
    else if (vectorized && n >= 4096)
        launchVariant<1, 1>(w, n, k, x, lo, y, accumulate, true, bias, s);
    else if (vectorized && k % 16 == 0)
        launchVariant<2, 2>(w, n, k, x, lo, y, accumulate, true, bias, s);
    else
        launchVariant<1, 2>(w, n, k, x, lo, y, accumulate, vectorized, bias, s);
}

bool chainedLaunchesSupported() {
    // The waits exist only in code built for sm_90 or later; a GPU running this build's sm_80 PTX (a
    // newer architecture than the build names) must not get kernels launched early.
    int device = 0, major = 0;
    TANDEM_CUDA_CHECK(cudaGetDevice(&device));
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    cudaFuncAttributes attributes{};
    TANDEM_CUDA_CHECK(cudaFuncGetAttributes(&attributes, gemvKernel<1, 2>));
    return major >= 9 && attributes.ptxVersion >= 90;
}

void enableChainedLaunches(bool on) { chain_detail::enabled = on; }

}  // namespace tandem::cuda
