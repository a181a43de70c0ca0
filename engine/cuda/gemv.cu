// Decode's matrix-vector product: one token, so every weight is read once and used once, and the
// product is bound by reading W. One warp per output row reads the row 16 bytes per lane and sums
// in float32; the split-precision input's hi and lo rows are added as they are read, so one kernel
// replaces the cuBLAS GEMM over both rows and the pair sum that followed it. Launched chained
// (chained_launch.cuh), each warp loads the start of its row and asks L2 for the rest before the
// previous kernel has finished: only x depends on it.
#include <cstdint>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kEarlyPasses = 2;  // 16-byte loads per lane issued before the wait (42 registers, as without)

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
    const bf16* wr = w + static_cast<long>(row < n ? row : 0) * k;
    const int full = vectorized ? k / 256 * 256 : 0;  // 32 lanes x 8 weights per pass
    uint4 early[kEarlyPasses];
#pragma unroll
    for (int p = 0; p < kEarlyPasses; ++p) {
        const int c = lane * 8 + p * 256;
        if (row < n && c < full) early[p] = *reinterpret_cast<const uint4*>(wr + c);
    }
    constexpr int kEarly = kEarlyPasses * 256;
    if (row < n && lane == 0 && full > kEarly) prefetchToL2(wr + kEarly, static_cast<unsigned>(full - kEarly) * sizeof(bf16));
    waitForPrevious();
    startNext();
    if (row >= n) return;
    float sum = 0.0f;
#pragma unroll
    for (int p = 0; p < kEarlyPasses; ++p) {
        const int c = lane * 8 + p * 256;
        if (c < full) {
            sum += dot8(early[p], *reinterpret_cast<const uint4*>(x + c));
            if (lo) sum += dot8(early[p], *reinterpret_cast<const uint4*>(lo + c));
        }
    }
    for (int c = lane * 8 + kEarlyPasses * 256; c < full; c += 256) {
        const uint4 wv = *reinterpret_cast<const uint4*>(wr + c);
        sum += dot8(wv, *reinterpret_cast<const uint4*>(x + c));
        if (lo) sum += dot8(wv, *reinterpret_cast<const uint4*>(lo + c));
    }
    for (int c = full + lane; c < k; c += 32) sum += __bfloat162float(wr[c]) * inputAt(x, lo, c);
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
    launchChained(gemvKernel, blocks, kWarpsPerBlock * 32, 0, s, w, n, k, x, split ? x + ldx : nullptr, y, accumulate,
                  vectorized);
}

bool chainedLaunchesSupported() {
    // The waits exist only in code built for sm_90 or later; a GPU running this build's sm_80 PTX (a
    // newer architecture than the build names) must not get kernels launched early.
    int device = 0, major = 0;
    TANDEM_CUDA_CHECK(cudaGetDevice(&device));
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    cudaFuncAttributes attributes{};
    TANDEM_CUDA_CHECK(cudaFuncGetAttributes(&attributes, gemvKernel));
    return major >= 9 && attributes.ptxVersion >= 90;
}

void enableChainedLaunches(bool on) { setChainedLaunches(on); }

}  // namespace tandem::cuda
