// Rotary embeddings on the GPU, fused with what surrounds them: Qwen3's per-head q/k RMSNorm and the
// KV-cache writes (GQA), and the latent normalization and cache writes of MLA (the arithmetic:
// rope.cuh). GQA decode does this inside the attention kernel instead (AttentionArgs::prepare).
#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/rope.cuh"

namespace tandem::cuda {

namespace {

// One block per (token, head slot); slots are the q heads, then k heads, then v heads; one thread per
// element of the head.
__global__ void gqaPrepareKernel(float* qkv, int heads, int kvHeads, int headDim, const float* qNorm,
                                 const float* kNorm, float eps, RopeParams rope, const int* start, float* kCache,
                                 float* vCache) {
    waitForPrevious();
    startNext();
    extern __shared__ float head[];
    __shared__ float scratch[32];
    const int t = blockIdx.x, slot = blockIdx.y, i = threadIdx.x;
    const int rowWidth = (heads + 2 * kvHeads) * headDim;
    float* src = qkv + static_cast<long>(t) * rowWidth + static_cast<long>(slot) * headDim;
    const long pos = *start + t;
    const long cacheRow = pos * kvHeads * headDim;
    float x = i < headDim ? src[i] : 0.0f;
    if (slot >= heads + kvHeads) {
        if (i < headDim) vCache[cacheRow + (slot - heads - kvHeads) * headDim + i] = x;
        return;
    }
    const bool isQuery = slot < heads;
    const float out = normRotateHead(x, headDim, isQuery ? qNorm : kNorm, eps, rope, static_cast<int>(pos), head, scratch);
    if (i >= headDim) return;
    if (isQuery)
        src[i] = out;
    else
        kCache[cacheRow + (slot - heads) * headDim + i] = out;
}

// One block per token: normalize the latent into the cache, rotate the key part into the cache.
__global__ void mlaKvKernel(const float* kv, int ldkv, int kvLora, const float* kvNorm, float eps, RopeParams rope,
                            const int* start, float* latentCache, float* ropeCache) {
    waitForPrevious();
    startNext();
    __shared__ float scratch[32];
    const int t = blockIdx.x;
    const float* row = kv + static_cast<long>(t) * ldkv;
    const long pos = *start + t;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < kvLora; i += blockDim.x) sum += row[i] * row[i];
    const float inv = 1.0f / sqrtf(blockSum(sum, scratch) / static_cast<float>(kvLora) + eps);
    for (int i = threadIdx.x; i < kvLora; i += blockDim.x) latentCache[pos * kvLora + i] = row[i] * inv * kvNorm[i];
    const float* k = row + kvLora;
    float* out = ropeCache + pos * rope.dim;
    for (int p = threadIdx.x; p < rope.dim / 2; p += blockDim.x) {
        int a, b;
        ropePair(rope, p, a, b);
        float c, s;
        ropeAngle(rope, static_cast<int>(pos), p, c, s);
        out[a] = k[a] * c - k[b] * s;
        out[b] = k[b] * c + k[a] * s;
    }
}

// One block per (token, head): rotate the query's rotary part in place, convert its nope part to bf16.
__global__ void mlaQueryKernel(float* q, int heads, int nope, RopeParams rope, const int* start, bf16* qNope,
                               bool split) {
    waitForPrevious();
    startNext();
    const int t = blockIdx.x, h = blockIdx.y;
    float* row = q + (static_cast<long>(t) * heads + h) * (nope + rope.dim);
    const int pos = *start + t;
    const long loOffset = static_cast<long>(gridDim.x) * heads * nope;
    for (int d = threadIdx.x; d < nope; d += blockDim.x) {
        bf16* hi = qNope + (static_cast<long>(t) * heads + h) * nope + d;
        storeBf16(row[d], hi, hi + loOffset, split);
    }
    float* r = row + nope;
    for (int p = threadIdx.x; p < rope.dim / 2; p += blockDim.x) {
        int a, b;
        ropePair(rope, p, a, b);
        float c, s;
        ropeAngle(rope, pos, p, c, s);
        const float x = r[a], y = r[b];
        r[a] = x * c - y * s;
        r[b] = y * c + x * s;
    }
}

}  // namespace

void launchGqaPrepare(float* qkv, int tokens, int heads, int kvHeads, int headDim, const float* qNorm,
                      const float* kNorm, float eps, RopeParams rope, const int* start, float* kCache, float* vCache,
                      cudaStream_t s) {
    const int threads = ((headDim + 31) / 32) * 32;
    launchChained(gqaPrepareKernel, dim3(tokens, heads + 2 * kvHeads), threads, headDim * sizeof(float), s, qkv, heads,
                  kvHeads, headDim, qNorm, kNorm, eps, rope, start, kCache, vCache);
}

void launchMlaPrepare(const float* kv, int ldkv, float* q, int tokens, int heads, int nope, int kvLora,
                      const float* kvNorm, float eps, RopeParams rope, const int* start, float* latentCache,
                      float* ropeCache, bf16* qNope, bool split, cudaStream_t s) {
    launchChained(mlaKvKernel, tokens, 256, 0, s, kv, ldkv, kvLora, kvNorm, eps, rope, start, latentCache, ropeCache);
    launchChained(mlaQueryKernel, dim3(tokens, heads), 128, 0, s, q, heads, nope, rope, start, qNope, split);
}

}  // namespace tandem::cuda
