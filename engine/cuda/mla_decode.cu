// MLA's two per-head products for one decode token, in our own kernels: the absorbed query
// qLatent[h] = W_k[h]ᵀ qNope[h] and the value expansion out[h] = W_v[h] ctx[h]. cuBLAS's batched GEMM
// over the split hi and lo rows plus a pair-sum kernel took ~12 us a layer for what is a few MB of
// weights: latency, not bytes. Here the split input's halves are added as they are read, in float32.
#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace tandem::cuda {

namespace {

constexpr int kColumns = 32;  // absorb: columns per block, one per lane
constexpr int kSlices = 8;    // absorb: warps per block, each summing a slice of the rows

// A split value: hi, plus lo when there is one (split inputs, and FP8 weights' kvbLo).
__device__ inline float splitInput(const bf16* hi, const bf16* lo, long i) {
    return __bfloat162float(hi[i]) + (lo ? __bfloat162float(lo[i]) : 0.0f);
}

// Block (head h, columns c0..c0+31): warp s sums rows [s * per, (s + 1) * per) of W_k[h] for its lane's
// column, then the warps' sums are added.
__global__ void absorbKernel(const bf16* kvb, const bf16* kvbLo, long headStride, int nope, int latent,
                             const bf16* qNope, const bf16* qNopeLo, float* qLatent) {
    waitForPrevious();
    startNext();
    __shared__ float q[256];
    __shared__ float part[kSlices][kColumns];
    const int h = blockIdx.x, lane = threadIdx.x & 31, slice = threadIdx.x >> 5;
    for (int i = threadIdx.x; i < nope; i += blockDim.x) q[i] = splitInput(qNope, qNopeLo, static_cast<long>(h) * nope + i);
    __syncthreads();
    const int c = blockIdx.y * kColumns + lane;
    const int per = (nope + kSlices - 1) / kSlices;
    const int begin = slice * per, end = min(nope, begin + per);
    float sum = 0.0f;
    if (c < latent) {
        const long w = h * headStride + c;
#pragma unroll 8
        for (int i = begin; i < end; ++i) sum += splitInput(kvb, kvbLo, w + static_cast<long>(i) * latent) * q[i];
    }
    part[slice][lane] = sum;
    __syncthreads();
    if (slice == 0 && c < latent) {
        float total = 0.0f;
#pragma unroll
        for (int s = 0; s < kSlices; ++s) total += part[s][lane];
        qLatent[static_cast<long>(h) * latent + c] = total;
    }
}

// One warp per output row (h, v): W_v[h] row v (latent weights) times ctx[h], written as a bf16 GEMM
// input for o_proj (hi, and with split the lo rows `heads * vDim` further on).
__global__ void valuesKernel(const bf16* kvb, const bf16* kvbLo, long headStride, int nope, int latent, int heads,
                             int vDim, const bf16* ctx, const bf16* ctxLo, bf16* out, bool split) {
    waitForPrevious();
    startNext();
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= heads * vDim) return;
    const int h = row / vDim, v = row % vDim;
    const long w = h * headStride + static_cast<long>(nope + v) * latent;
    const long x0 = static_cast<long>(h) * latent;
    float sum = 0.0f;
#pragma unroll 4
    for (int c = lane; c < latent; c += 32) sum += splitInput(kvb, kvbLo, w + c) * splitInput(ctx, ctxLo, x0 + c);
    sum = warpSum(sum);
    if (lane == 0) storeBf16(sum, out + row, out + static_cast<long>(heads) * vDim + row, split);
}

}  // namespace

void launchMlaAbsorb(const bf16* kvb, const bf16* kvbLo, long headStride, int heads, int nope, int latent,
                     const bf16* qNope, bool split, float* qLatent, cudaStream_t s) {
    if (nope > 256) throw GpuError("MLA key head width above 256 is not supported by the GPU decode kernel");
    const dim3 grid(heads, (latent + kColumns - 1) / kColumns);
    launchChained(absorbKernel, grid, kColumns * kSlices, 0, s, kvb, kvbLo, headStride, nope, latent, qNope,
                  split ? qNope + static_cast<long>(heads) * nope : nullptr, qLatent);
}

void launchMlaValues(const bf16* kvb, const bf16* kvbLo, long headStride, int heads, int nope, int latent, int vDim,
                     const bf16* ctx, bool split, bf16* out, cudaStream_t s) {
    constexpr int kWarps = 8;
    const int rows = heads * vDim;
    launchChained(valuesKernel, (rows + kWarps - 1) / kWarps, kWarps * 32, 0, s, kvb, kvbLo, headStride, nope, latent, heads,
                  vDim, ctx, split ? ctx + static_cast<long>(heads) * latent : nullptr, out, split);
}

}  // namespace tandem::cuda
