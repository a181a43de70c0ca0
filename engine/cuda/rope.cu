// Rotary embeddings on the GPU, fused with what surrounds them: Qwen3's per-head q/k RMSNorm and the
// KV-cache writes (GQA), and the latent normalization and cache writes of MLA (the arithmetic:
// rope.cuh). GQA decode does this inside the attention kernel instead (AttentionArgs::prepare).
#include <algorithm>

#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/kv_int8.cuh"
#include "cuda/rope.cuh"

namespace tandem::cuda {

namespace {

// One block per (token, head slot); slots are the q heads, then k heads, then v heads; one thread per
// element of the head. With 8-bit streams (kInt8, vInt8) the block quantizes its key or value head.
__global__ void gqaPrepareKernel(float* qkv, int heads, int kvHeads, int headDim, const float* qNorm,
                                 const float* kNorm, float eps, RopeParams rope, const int* start, float* kCache,
                                 float* vCache, Int8Rows kInt8, Int8Rows vInt8) {
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
    // A key or value head into its cache: head `kv` of the position's row.
    const auto store = [&](float value, float* cache, const Int8Rows& q, int kv) {
        if (q) {
            quantizeGroupByBlock(value, i < headDim, i, q.codes + cacheRow + static_cast<long>(kv) * headDim,
                                 q.scales + pos * kvHeads + kv, scratch);
        } else if (i < headDim) {
            cache[cacheRow + static_cast<long>(kv) * headDim + i] = value;
        }
    };
    if (slot >= heads + kvHeads) {
        store(x, vCache, vInt8, slot - heads - kvHeads);
        return;
    }
    const bool isQuery = slot < heads;
    const float out = normRotateHead(x, headDim, isQuery ? qNorm : kNorm, eps, rope, static_cast<int>(pos), head, scratch);
    if (isQuery) {
        if (i < headDim) src[i] = out;
    } else {
        store(out, kCache, kInt8, slot - heads);
    }
}

// One block per token: normalize the latent into the cache, rotate the key part into the cache (or
// quantize each, one group a row, into the 8-bit streams).
__global__ void mlaKvKernel(const float* kv, int ldkv, int kvLora, const float* kvNorm, float eps, RopeParams rope,
                            const int* start, float* latentCache, float* ropeCache, Int8Rows latentInt8, Int8Rows ropeInt8) {
    waitForPrevious();
    startNext();
    __shared__ float scratch[32];
    const int t = blockIdx.x;
    const float* row = kv + static_cast<long>(t) * ldkv;
    const long pos = *start + t;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < kvLora; i += blockDim.x) sum += row[i] * row[i];
    const float inv = 1.0f / sqrtf(blockSum(sum, scratch) / static_cast<float>(kvLora) + eps);
    const float* k = row + kvLora;
    if (latentInt8) {
        // A thread's values of each row in registers (kvLora <= kMaxLatentPerThread * blockDim.x), then the
        // block quantizes the row, then the rope row (rope.dim <= blockDim.x: a thread an element).
        constexpr int kMaxLatentPerThread = 4;
        float x[kMaxLatentPerThread];
        float largest = 0.0f, bad = 0.0f;
#pragma unroll
        for (int r = 0; r < kMaxLatentPerThread; ++r) {
            const int i = threadIdx.x + r * blockDim.x;
            x[r] = i < kvLora ? row[i] * inv * kvNorm[i] : 0.0f;
            if (!isfinite(x[r])) bad = 1.0f;
            largest = fmaxf(largest, isfinite(x[r]) ? fabsf(x[r]) : 0.0f);
        }
        bad = blockMax(bad, scratch);
        largest = blockMax(largest, scratch);
        std::int8_t* codes = latentInt8.codes + pos * kvLora;
        if (threadIdx.x == 0) latentInt8.scales[pos] = bad > 0.0f ? __int_as_float(0x7fc00000) : largest / 127.0f;
        const float inverse = bad > 0.0f || largest == 0.0f ? 0.0f : 127.0f / largest;
#pragma unroll
        for (int r = 0; r < kMaxLatentPerThread; ++r) {
            const int i = threadIdx.x + r * blockDim.x;
            // A NaN or infinity in the row: zero codes beside the NaN scale, as on the CPU.
            if (i < kvLora) codes[i] = bad > 0.0f ? 0 : static_cast<std::int8_t>(fminf(127.0f, fmaxf(-127.0f, rintf(x[r] * inverse))));
        }
        float y = 0.0f;
        const int d = threadIdx.x;
        if (d < rope.dim) {
            int p = rope.interleaved ? d / 2 : d % (rope.dim / 2), a, b;
            ropePair(rope, p, a, b);
            float c, s;
            ropeAngle(rope, static_cast<int>(pos), p, c, s);
            y = d == a ? k[a] * c - k[b] * s : k[b] * c + k[a] * s;
        }
        quantizeGroupByBlock(y, d < rope.dim, d, ropeInt8.codes + pos * rope.dim, ropeInt8.scales + pos, scratch);
        return;
    }
    for (int i = threadIdx.x; i < kvLora; i += blockDim.x) latentCache[pos * kvLora + i] = row[i] * inv * kvNorm[i];
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

// The rows [first, *start + extra) of an 8-bit stream as float32, a block per position (grid-stride); with a
// window, only the rows the step's first query sees and after.
__global__ void dequantizeRowsKernel(Int8Rows q, int first, const int* start, int extra, int window, float* out, int ld) {
    waitForPrevious();
    startNext();
    const int end = *start + extra, groups = q.width / q.groupWidth;
    const int begin = window > 0 ? max(first, *start - window + 1) : first;
    for (long pos = begin + blockIdx.x; pos < end; pos += gridDim.x) {
        const std::int8_t* codes = q.codes + pos * q.width;
        const float* scales = q.scales + pos * groups;
        for (int i = threadIdx.x; i < q.width; i += blockDim.x)
            out[pos * ld + i] = static_cast<float>(codes[i]) * scales[i / q.groupWidth];
    }
}

// Rows [first, first + count) as a bf16 GEMM input, a block per row.
__global__ void dequantizeRowsToBf16Kernel(Int8Rows q, int first, int count, bf16* out, bool split) {
    waitForPrevious();
    startNext();
    const int r = blockIdx.x, groups = q.width / q.groupWidth;
    const long pos = first + r;
    const std::int8_t* codes = q.codes + pos * q.width;
    const float* scales = q.scales + pos * groups;
    for (int i = threadIdx.x; i < q.width; i += blockDim.x) {
        bf16* hi = out + static_cast<long>(r) * q.width + i;
        storeBf16(static_cast<float>(codes[i]) * scales[i / q.groupWidth], hi, hi + static_cast<long>(count) * q.width, split);
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
                      cudaStream_t s, Int8Rows kInt8, Int8Rows vInt8) {
    const int threads = ((headDim + 31) / 32) * 32;
    launchChained(gqaPrepareKernel, dim3(tokens, heads + 2 * kvHeads), threads, headDim * sizeof(float), s, qkv, heads,
                  kvHeads, headDim, qNorm, kNorm, eps, rope, start, kCache, vCache, kInt8, vInt8);
}

void launchMlaPrepare(const float* kv, int ldkv, float* q, int tokens, int heads, int nope, int kvLora,
                      const float* kvNorm, float eps, RopeParams rope, const int* start, float* latentCache,
                      float* ropeCache, bf16* qNope, bool split, cudaStream_t s, Int8Rows latentInt8, Int8Rows ropeInt8) {
    constexpr int kThreads = 256;
    if (latentInt8 && (kvLora > 4 * kThreads || rope.dim > kThreads))
        throw GpuError("the 8-bit KV cache on the GPU holds MLA latents of up to 1024 values and rope parts of up to 256");
    launchChained(mlaKvKernel, tokens, kThreads, 0, s, kv, ldkv, kvLora, kvNorm, eps, rope, start, latentCache, ropeCache,
                  latentInt8, ropeInt8);
    launchChained(mlaQueryKernel, dim3(tokens, heads), 128, 0, s, q, heads, nope, rope, start, qNope, split);
}

void launchDequantizeRows(Int8Rows rows, int first, const int* start, int extra, int capacity, float* out, int ld,
                          cudaStream_t s, int window) {
    constexpr int kMaxBlocks = 2048;
    const int span = window > 0 ? std::min(capacity - first, window + extra) : capacity - first;
    const int blocks = std::max(1, std::min(kMaxBlocks, span));
    launchChained(dequantizeRowsKernel, blocks, 128, 0, s, rows, first, start, extra, window, out, ld);
}

void launchDequantizeRowsToBf16(Int8Rows rows, int first, int count, bf16* out, bool split, cudaStream_t s) {
    if (count <= 0) return;
    launchChained(dequantizeRowsToBf16Kernel, count, 128, 0, s, rows, first, count, out, split);
}

}  // namespace tandem::cuda
