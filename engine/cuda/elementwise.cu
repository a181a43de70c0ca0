// Row-wise and element-wise kernels: embedding lookup, RMSNorm, SiLU·mul, the split-precision pair sums,
// and the routed experts' hand-over through mapped host memory.
#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace tandem::cuda {

namespace {

__global__ void embedKernel(const int* ids, const bf16* table, int hidden, float* x) {
    waitForPrevious();
    startNext();
    const bf16* row = table + static_cast<long>(ids[blockIdx.x]) * hidden;
    float* out = x + static_cast<long>(blockIdx.x) * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[i] = __bfloat162float(row[i]);
}

__global__ void rmsNormKernel(const float* x, int ldx, const float* weight, float eps, int width, float* outF32,
                              int ldF32, bf16* outBf16, int ldBf16, bool split) {
    waitForPrevious();
    startNext();
    __shared__ float scratch[32];
    const float* row = x + static_cast<long>(blockIdx.x) * ldx;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < width; i += blockDim.x) sum += row[i] * row[i];
    const float inv = 1.0f / sqrtf(blockSum(sum, scratch) / static_cast<float>(width) + eps);
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        const float v = row[i] * inv * weight[i];
        if (outF32) outF32[static_cast<long>(blockIdx.x) * ldF32 + i] = v;
        if (outBf16) {
            bf16* hi = outBf16 + static_cast<long>(blockIdx.x) * ldBf16 + i;
            storeBf16(v, hi, hi + static_cast<long>(gridDim.x) * ldBf16, split);
        }
    }
}

// y[t, i] += bias[i] for every token row of y (width values, ldy apart).
__global__ void addBiasKernel(float* y, int ldy, int width, const float* bias) {
    waitForPrevious();
    startNext();
    float* row = y + static_cast<long>(blockIdx.x) * ldy;
    for (int i = threadIdx.x; i < width; i += blockDim.x) row[i] += bias[i];
}

__global__ void siluMulKernel(const float* gateUp, int inner, bf16* out, bool split) {
    waitForPrevious();
    startNext();
    const float* row = gateUp + static_cast<long>(blockIdx.x) * 2 * inner;
    for (int i = threadIdx.x; i < inner; i += blockDim.x) {
        const float g = row[i];
        bf16* hi = out + static_cast<long>(blockIdx.x) * inner + i;
        storeBf16(g / (1.0f + expf(-g)) * row[inner + i], hi, hi + static_cast<long>(gridDim.x) * inner, split);
    }
}

__global__ void pairSumKernel(const float* y, int ldy, int tokens, int width, float* out, int ldOut, bool accumulate) {
    const float* a = y + static_cast<long>(blockIdx.x) * ldy;
    const float* b = a + static_cast<long>(tokens) * ldy;
    float* o = out + static_cast<long>(blockIdx.x) * ldOut;
    for (int i = threadIdx.x; i < width; i += blockDim.x) o[i] = (accumulate ? o[i] : 0.0f) + a[i] + b[i];
}

__global__ void pairSumToBf16Kernel(const float* y, int ldy, int tokens, int width, bf16* out, int ldOut, bool split) {
    const float* a = y + static_cast<long>(blockIdx.x) * ldy;
    const float* b = a + static_cast<long>(tokens) * ldy;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        bf16* hi = out + static_cast<long>(blockIdx.x) * ldOut + i;
        // Without split there is no second half either: y holds one row per token.
        storeBf16(split ? a[i] + b[i] : a[i], hi, hi + static_cast<long>(tokens) * ldOut, split);
    }
}

__global__ void exportKernel(const float* hidden, long count, const int* ids, const float* weights, int routes,
                             float* hostHidden, int* hostIds, float* hostWeights) {
    const long stride = static_cast<long>(gridDim.x) * blockDim.x;
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count; i += stride) hostHidden[i] = hidden[i];
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < routes; i += stride) {
        hostIds[i] = ids[i];
        hostWeights[i] = weights[i];
    }
    __threadfence_system();  // visible to the CPU before the signal that follows says so
}

__global__ void addFromHostKernel(const float* a, const float* b, float* x, long n) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x)
        x[i] += b ? a[i] + b[i] : a[i];
}

unsigned gridFor(long n, int block) {
    const long blocks = (n + block - 1) / block;
    return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace

void launchEmbed(const int* ids, int tokens, const bf16* table, int hidden, float* x, cudaStream_t s) {
    launchChained(embedKernel, tokens, 256, 0, s, ids, table, hidden, x);
}

void launchRmsNorm(const float* x, int ldx, const float* weight, float eps, int tokens, int width, float* outF32,
                   int ldF32, bf16* outBf16, int ldBf16, bool split, cudaStream_t s) {
    launchChained(rmsNormKernel, tokens, width >= 1024 ? 1024 : 256, 0, s, x, ldx, weight, eps, width, outF32, ldF32,
                  outBf16, ldBf16, split);
}

void launchAddBias(float* y, int ldy, int tokens, int width, const float* bias, cudaStream_t s) {
    launchChained(addBiasKernel, tokens, 256, 0, s, y, ldy, width, bias);
}

void launchSiluMul(const float* gateUp, int tokens, int inner, bf16* out, bool split, cudaStream_t s) {
    launchChained(siluMulKernel, tokens, 256, 0, s, gateUp, inner, out, split);
}

void launchPairSum(const float* y, int ldy, int tokens, int width, float* out, int ldOut, bool accumulate,
                   cudaStream_t s) {
    pairSumKernel<<<tokens, 256, 0, s>>>(y, ldy, tokens, width, out, ldOut, accumulate);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchPairSumToBf16(const float* y, int ldy, int tokens, int width, bf16* out, int ldOut, bool split,
                         cudaStream_t s) {
    pairSumToBf16Kernel<<<tokens, 256, 0, s>>>(y, ldy, tokens, width, out, ldOut, split);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchExportToHost(const float* hidden, int tokens, int width, const int* ids, const float* weights, int topK,
                        float* hostHidden, int* hostIds, float* hostWeights, cudaStream_t s) {
    const long count = static_cast<long>(tokens) * width;
    exportKernel<<<gridFor(count, 256), 256, 0, s>>>(hidden, count, ids, weights, tokens * topK, hostHidden, hostIds,
                                                      hostWeights);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchAddFromHost(const float* hostA, const float* hostB, float* x, long count, cudaStream_t s) {
    addFromHostKernel<<<gridFor(count, 256), 256, 0, s>>>(hostA, hostB, x, count);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tandem::cuda
