// Causal attention over the cached context, one block per (query head, token), in tiles of positions
// with an online softmax, so any context length runs in fixed shared memory. Serves GQA (keys and
// values per KV head) and MLA in its absorbed form (latent keys shared by all heads, plus the rotary key
// part; values are the latent itself).
#include <algorithm>
#include <cfloat>

#include "cuda/block_reduce.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace tandem::cuda {

namespace {

constexpr int kTile = 64;
constexpr int kThreads = 256;
constexpr int kMaxValuePerThread = 4;  // value width up to 1024

__global__ void attentionKernel(AttentionArgs a) {
    extern __shared__ float smem[];
    float* qA = smem;
    float* qB = qA + a.dimA;
    float* p = qB + a.dimB;
    const int h = blockIdx.x, t = blockIdx.y, part = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;

    for (int d = threadIdx.x; d < a.dimA; d += blockDim.x) qA[d] = a.qA[static_cast<long>(t) * a.ldqA + h * a.qAHeadStride + d];
    for (int d = threadIdx.x; d < a.dimB; d += blockDim.x) qB[d] = a.qB[static_cast<long>(t) * a.ldqB + h * a.qBHeadStride + d];
    __syncthreads();

    const int lastPosition = *a.start + t;
    const int firstPosition = a.window > 0 ? max(0, lastPosition - a.window + 1) : 0;
    // This block's share of the context (all of it without splits).
    const int perPart = (lastPosition - firstPosition + a.splits) / a.splits;
    const int first = firstPosition + part * perPart;
    const int last = min(lastPosition, first + perPart - 1);
    const long headOffset = static_cast<long>(h / a.group) * a.keyHeadStride;

    float acc[kMaxValuePerThread] = {};
    float m = -FLT_MAX, l = 0.0f;
    for (int j0 = first; j0 <= last; j0 += kTile) {
        const int n = min(kTile, last - j0 + 1);
        for (int jj = warp; jj < n; jj += warps) {
            const long j = j0 + jj;
            const float* kA = a.keyA + j * a.ldKeyA + headOffset;
            float s = 0.0f;
            for (int d = lane; d < a.dimA; d += 32) s += qA[d] * kA[d];
            if (a.dimB) {
                const float* kB = a.keyB + j * a.ldKeyB + headOffset;
                for (int d = lane; d < a.dimB; d += 32) s += qB[d] * kB[d];
            }
            s = warpSum(s);
            if (lane == 0) p[jj] = s * a.scale;
        }
        __syncthreads();
        float tileMax = -FLT_MAX;
        for (int jj = 0; jj < n; ++jj) tileMax = fmaxf(tileMax, p[jj]);
        const float mNew = fmaxf(m, tileMax);
        const float alpha = expf(m - mNew);
        __syncthreads();
        if (threadIdx.x < n) p[threadIdx.x] = expf(p[threadIdx.x] - mNew);
        __syncthreads();
        float tileSum = 0.0f;
        for (int jj = 0; jj < n; ++jj) tileSum += p[jj];
        l = l * alpha + tileSum;
        m = mNew;
        for (int r = 0; r < kMaxValuePerThread; ++r) {
            const int d = threadIdx.x + r * blockDim.x;
            if (d >= a.dimV) break;
            float v = acc[r] * alpha;
            const float* value = a.value + static_cast<long>(j0) * a.ldValue + headOffset + d;
            for (int jj = 0; jj < n; ++jj) v += p[jj] * value[static_cast<long>(jj) * a.ldValue];
            acc[r] = v;
        }
        __syncthreads();
    }
    if (a.splits > 1) {
        // Unnormalized partial result: running max, sum of exponentials, weighted values.
        float* out = a.partials + ((static_cast<long>(t) * a.heads + h) * a.splits + part) * (a.dimV + 2);
        if (threadIdx.x == 0) {
            out[0] = m;
            out[1] = l;
        }
        for (int r = 0; r < kMaxValuePerThread; ++r) {
            const int d = threadIdx.x + r * blockDim.x;
            if (d >= a.dimV) break;
            out[2 + d] = acc[r];
        }
        return;
    }
    const float inv = 1.0f / l;
    for (int r = 0; r < kMaxValuePerThread; ++r) {
        const int d = threadIdx.x + r * blockDim.x;
        if (d >= a.dimV) break;
        bf16* hi = a.out + static_cast<long>(t) * a.ldOut + h * a.outHeadStride + d;
        storeBf16(acc[r] * inv, hi, hi + static_cast<long>(a.tokens) * a.ldOut, a.split);
    }
}

// One block per (head, token): the split partial softmaxes rescaled to a common maximum and summed.
__global__ void combineKernel(AttentionArgs a) {
    const int h = blockIdx.x, t = blockIdx.y;
    const float* parts = a.partials + (static_cast<long>(t) * a.heads + h) * a.splits * (a.dimV + 2);
    float m = -FLT_MAX;
    for (int z = 0; z < a.splits; ++z) m = fmaxf(m, parts[z * (a.dimV + 2)]);
    float l = 0.0f;
    for (int z = 0; z < a.splits; ++z) l += parts[z * (a.dimV + 2) + 1] * expf(parts[z * (a.dimV + 2)] - m);
    const float inv = 1.0f / l;
    for (int d = threadIdx.x; d < a.dimV; d += blockDim.x) {
        float v = 0.0f;
        for (int z = 0; z < a.splits; ++z) {
            const float* part = parts + z * (a.dimV + 2);
            v += part[2 + d] * expf(part[0] - m);
        }
        bf16* hi = a.out + static_cast<long>(t) * a.ldOut + h * a.outHeadStride + d;
        storeBf16(v * inv, hi, hi + static_cast<long>(a.tokens) * a.ldOut, a.split);
    }
}

}  // namespace

void launchAttention(const AttentionArgs& a, cudaStream_t s) {
    if (a.dimV > kThreads * kMaxValuePerThread) throw GpuError("attention value width too large for the GPU kernel");
    const std::size_t shared = (a.dimA + a.dimB + kTile) * sizeof(float);
    attentionKernel<<<dim3(a.heads, a.tokens, std::max(1, a.splits)), kThreads, shared, s>>>(a);
    TANDEM_CUDA_CHECK(cudaGetLastError());
    if (a.splits > 1) {
        combineKernel<<<dim3(a.heads, a.tokens), kThreads, 0, s>>>(a);
        TANDEM_CUDA_CHECK(cudaGetLastError());
    }
}

}  // namespace tandem::cuda
