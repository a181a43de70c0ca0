// Causal attention over the cached context, one block per (query head, token), in tiles of positions
// with an online softmax, so any context length runs in fixed shared memory. Serves GQA (keys and
// values per KV head) and MLA in its absorbed form (latent keys shared by all heads, plus the rotary key
// part; values are the latent itself).
#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "cuda/attention_common.cuh"
#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/rope.cuh"

namespace tandem::cuda {

namespace {

constexpr int kMaxValuePerThread = 4;  // value width up to 1024

// The online softmax's step over a tile's n <= 64 scores in p (shared memory, written by the block
// before the call): p becomes exp(score - new max), the running max m and sum l are updated, and the
// factor that rescales what was summed before is returned. Every thread of the block calls it; each
// warp reduces the tile itself (two scores a lane), so no thread walks all of p.
static_assert(kTile == 64, "softmaxTile holds two scores a lane");
__device__ inline float softmaxTile(float* p, int n, float& m, float& l) {
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const float v0 = lane < n ? p[lane] : -FLT_MAX, v1 = lane + 32 < n ? p[lane + 32] : -FLT_MAX;
    const float mNew = fmaxf(m, warpMax(fmaxf(v0, v1)));
    const float alpha = expf(m - mNew);
    const float e0 = lane < n ? expf(v0 - mNew) : 0.0f, e1 = lane + 32 < n ? expf(v1 - mNew) : 0.0f;
    const float tileSum = warpSum(e0 + e1);
    __syncthreads();  // every warp has read p
    if (threadIdx.x < 32) {
        if (lane < n) p[lane] = e0;
        if (lane + 32 < n) p[lane + 32] = e1;
    }
    __syncthreads();
    l = l * alpha + tileSum;
    m = mNew;
    return alpha;
}

__global__ void attentionKernel(AttentionArgs a) {
    waitForPrevious();
    startNext();
    extern __shared__ float smem[];
    float* qA = smem;
    float* qB = qA + a.dimA;
    float* p = qB + a.dimB;
    const int h = blockIdx.x, t = blockIdx.y, part = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;

    for (int d = threadIdx.x; d < a.dimA; d += blockDim.x) qA[d] = a.qA[static_cast<long>(t) * a.ldqA + h * a.qAHeadStride + d];
    for (int d = threadIdx.x; d < a.dimB; d += blockDim.x) qB[d] = a.qB[static_cast<long>(t) * a.ldqB + h * a.qBHeadStride + d];
    __syncthreads();

    // This block's share of the context (all of it without splits).
    int first, last;
    partRange(a, *a.start + t, a.splits, part, first, last);
    const long headOffset = static_cast<long>(h / a.group) * a.keyHeadStride;

    float acc[kMaxValuePerThread] = {};
    // A sink starts the softmax of part 0 (sinkLogit): max = sink, sum = exp(sink - sink).
    float m = sinkLogit(a, h, part), l = m > -FLT_MAX ? 1.0f : 0.0f;
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
        const float alpha = softmaxTile(p, n, m, l);
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

// The first `parts` partial softmaxes of head h, token t rescaled to a common maximum and summed. L2
// loads: with the decode kernel, other blocks wrote the parts during this kernel.
__device__ void combineHead(const AttentionArgs& a, int h, int t, int parts) {
    __shared__ float weight[kMaxSplits];
    const float* base = a.partials + (static_cast<long>(t) * a.heads + h) * a.splits * (a.dimV + 2);
    float m = -FLT_MAX;
    for (int z = 0; z < parts; ++z) m = fmaxf(m, __ldcg(base + z * (a.dimV + 2)));
    float l = 0.0f;
    for (int z = 0; z < parts; ++z)
        l += __ldcg(base + z * (a.dimV + 2) + 1) * expf(__ldcg(base + z * (a.dimV + 2)) - m);
    const float inv = 1.0f / l;
    if (threadIdx.x < parts) weight[threadIdx.x] = expf(__ldcg(base + threadIdx.x * (a.dimV + 2)) - m) * inv;
    __syncthreads();
    for (int d = threadIdx.x; d < a.dimV; d += blockDim.x) {
        float v = 0.0f;
        for (int z = 0; z < parts; ++z) v += __ldcg(base + z * (a.dimV + 2) + 2 + d) * weight[z];
        bf16* hi = a.out + static_cast<long>(t) * a.ldOut + h * a.outHeadStride + d;
        storeBf16(v, hi, hi + static_cast<long>(a.tokens) * a.ldOut, a.split);
    }
}

// One block per (head, token).
__global__ void combineKernel(AttentionArgs a) {
    waitForPrevious();
    startNext();
    combineHead(a, blockIdx.x, blockIdx.y, a.splits);
}

// Decode (one query, the context split over blocks): the same online softmax, written so that each
// thread has many independent loads in flight. The kernel above walks a tile one key at a time per
// warp and one value row at a time per thread, so each step waits a full memory latency: ~15-20 us per
// layer for a few hundred keys, which is latency, not bytes. Here each warp scores its 8 keys of a tile
// together (8 running sums per lane) and each thread sums 8 value rows at a time, and the head's last
// part combines the parts. R: values per thread (dimV up to R * kThreads).
constexpr int kKeysPerWarp = kTile / (kThreads / 32);

// Three blocks per multiprocessor (at most 85 registers a thread): the runner sizes the grid (heads x
// splits) to three blocks per multiprocessor, one wave.
template <int R>
__global__ void __launch_bounds__(kThreads, 3) attentionDecodeKernel(AttentionArgs a) {
    waitForPrevious();
    startNext();
    extern __shared__ float smem[];
    __shared__ float scratch[32];
    float* qA = smem;
    float* qB = qA + a.dimA;
    float* p = qB + a.dimB;
    const int h = blockIdx.x, part = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int position = *a.start;

    for (int d = threadIdx.x; d < a.dimA; d += blockDim.x) qA[d] = a.qA[h * a.qAHeadStride + d];
    for (int d = threadIdx.x; d < a.dimB; d += blockDim.x) qB[d] = a.qB[h * a.qBHeadStride + d];
    __syncthreads();
    if (a.prepare) {  // launchAttention: dimA <= blockDim, no qB
        const float q = normRotateHead(threadIdx.x < a.dimA ? qA[threadIdx.x] : 0.0f, a.dimA, a.qNorm, a.eps, a.rope,
                                       position, qA, scratch);
        if (threadIdx.x < a.dimA) qA[threadIdx.x] = q;
    }

    const int parts = decodeParts(a, position);
    if (part >= parts) return;
    int first, last;
    partRange(a, position, parts, part, first, last);
    const long headOffset = static_cast<long>(h / a.group) * a.keyHeadStride;
    if (a.prepare && part == parts - 1) {
        // This position's key and value, which only the last part reads: every query head of the key
        // head writes the same values, and this block reads them back after the barrier.
        const int g = h / a.group;
        const float k = normRotateHead(threadIdx.x < a.dimA ? a.kNew[g * a.dimA + threadIdx.x] : 0.0f, a.dimA, a.kNorm,
                                       a.eps, a.rope, position, p + kTile, scratch);
        if (threadIdx.x < a.dimA) a.keyCache[static_cast<long>(position) * a.ldKeyA + headOffset + threadIdx.x] = k;
        for (int d = threadIdx.x; d < a.dimV; d += blockDim.x)
            a.valueCache[static_cast<long>(position) * a.ldValue + headOffset + d] = a.vNew[g * a.dimV + d];
    }
    __syncthreads();

    float acc[R] = {};
    float m = sinkLogit(a, h, part), l = m > -FLT_MAX ? 1.0f : 0.0f;  // a sink starts part 0's softmax
    for (int j0 = first; j0 <= last; j0 += kTile) {
        const int n = min(kTile, last - j0 + 1);
        // This warp's keys: j0 + warp * kKeysPerWarp + q for q < keys.
        const int key0 = j0 + warp * kKeysPerWarp;
        const int keys = min(kKeysPerWarp, n - warp * kKeysPerWarp);  // may be <= 0 in the last tile
        const float* kA = a.keyA + static_cast<long>(key0) * a.ldKeyA + headOffset;
        const float* kB = a.keyB + static_cast<long>(key0) * a.ldKeyB + headOffset;
        float s[kKeysPerWarp] = {};
#pragma unroll 2
        for (int d = lane; d < a.dimA; d += 32) {
            const float qd = qA[d];
#pragma unroll
            for (int q = 0; q < kKeysPerWarp; ++q)
                if (q < keys) s[q] += qd * kA[static_cast<long>(q) * a.ldKeyA + d];
        }
        for (int d = lane; d < a.dimB; d += 32) {
            const float qd = qB[d];
#pragma unroll
            for (int q = 0; q < kKeysPerWarp; ++q)
                if (q < keys) s[q] += qd * kB[static_cast<long>(q) * a.ldKeyB + d];
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int q = 0; q < kKeysPerWarp; ++q) s[q] += __shfl_xor_sync(0xffffffffu, s[q], o);
        if (lane == 0)
#pragma unroll
            for (int q = 0; q < kKeysPerWarp; ++q)
                if (warp * kKeysPerWarp + q < n) p[warp * kKeysPerWarp + q] = s[q] * a.scale;
        const float alpha = softmaxTile(p, n, m, l);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] *= alpha;
        const float* rows = a.value + static_cast<long>(j0) * a.ldValue + headOffset + threadIdx.x;
        int jj = 0;
        for (; jj + 8 <= n; jj += 8) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (threadIdx.x + r * kThreads >= a.dimV) break;
                float v[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) v[u] = rows[static_cast<long>(jj + u) * a.ldValue + r * kThreads];
#pragma unroll
                for (int u = 0; u < 8; ++u) acc[r] += p[jj + u] * v[u];
            }
        }
        for (; jj < n; ++jj)
#pragma unroll
            for (int r = 0; r < R; ++r)
                if (threadIdx.x + r * kThreads < a.dimV) acc[r] += p[jj] * rows[static_cast<long>(jj) * a.ldValue + r * kThreads];
        __syncthreads();
    }
    if (parts == 1) {
        // The whole context in one part (short contexts): normalized here, as combineHead would do with
        // one part (the same products), without the round trip through the partials.
        const float inv = 1.0f / l;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int d = threadIdx.x + r * kThreads;
            if (d >= a.dimV) break;
            bf16* hi = a.out + h * a.outHeadStride + d;
            storeBf16(acc[r] * inv, hi, hi + static_cast<long>(a.tokens) * a.ldOut, a.split);
        }
        return;
    }
    float* out = a.partials + (static_cast<long>(h) * a.splits + part) * (a.dimV + 2);
    if (threadIdx.x == 0) {
        out[0] = m;
        out[1] = l;
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
        if (threadIdx.x + r * kThreads < a.dimV) out[2 + threadIdx.x + r * kThreads] = acc[r];
    // The head's last part to finish combines them all (combineKernel's work, a kernel fewer): the
    // others' parts are visible to it after their fences.
    __shared__ bool lastPart;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) lastPart = atomicAdd(a.partsDone + h, 1u) == static_cast<unsigned>(parts) - 1;
    __syncthreads();
    if (!lastPart) return;
    __threadfence();
    combineHead(a, h, 0, parts);
    if (threadIdx.x == 0) a.partsDone[h] = 0;
}

}  // namespace

int decodeAttentionSplits(const AttentionArgs& shape, int multiprocessors) {
    // The key-head kernel: as many blocks as the multiprocessors hold (one each: the tiles in flight take
    // most of a multiprocessor's shared memory), so that a long context's parts all run at once, one wave
    // (Qwen3 on the H200's 132: 4 key heads x 33 parts).
    if (keyHeadDecodeServes(shape)) {
        const int blocks = std::max(1, keyHeadDecodeBlocksPerMultiprocessor(shape));
        return std::clamp(blocks * multiprocessors / (shape.heads / shape.group), 2, kMaxSplits);
    }
    // MLA's decode on tensor cores: a block per 16 query heads and part, as many as fit one wave.
    if (mlaDecodeServes(shape)) {
        const int groups = (shape.heads + 15) / 16;
        return std::clamp(std::max(1, mlaDecodeBlocksPerMultiprocessor(shape)) * multiprocessors / groups, 2, kMaxMlaSplits);
    }
    // The per-head kernel: three blocks a multiprocessor (its launch bounds).
    return std::clamp(3 * multiprocessors / shape.heads, 2, 32);
}

void launchAttention(const AttentionArgs& a, cudaStream_t s) {
    if (a.dimV > kThreads * kMaxValuePerThread) throw GpuError("attention value width too large for the GPU kernel");
    if (a.splits > (usesDecodeKernel(a) && mlaDecodeServes(a) ? kMaxMlaSplits : kMaxSplits))
        throw GpuError("attention split into more parts than its decode kernel combines");
    if (a.prepare && (!usesDecodeKernel(a) || a.dimB || a.dimA > kThreads))
        throw GpuError("attention: preparing the step in the kernel needs the decode kernel, one key part and head size <= 256");
    const std::size_t shared = (a.dimA + a.dimB + kTile + (a.prepare ? a.dimA : 0)) * sizeof(float);
    if (usesDecodeKernel(a) && launchMlaDecode(a, s)) return;
    if (usesDecodeKernel(a) && launchKeyHeadDecode(a, s)) return;
    if (a.int8Cache) throw GpuError("attention: the 8-bit KV cache's codes reached a kernel that reads float32 rows");
    if (usesDecodeKernel(a)) {
        const dim3 grid(a.heads, 1, a.splits);
        const int r = (a.dimV + kThreads - 1) / kThreads;
        if (r == 1)
            launchChained(attentionDecodeKernel<1>, grid, kThreads, shared, s, a);
        else if (r == 2)
            launchChained(attentionDecodeKernel<2>, grid, kThreads, shared, s, a);
        else
            launchChained(attentionDecodeKernel<kMaxValuePerThread>, grid, kThreads, shared, s, a);
        return;
    }
    if (!a.noFlash && launchFlashPrefill(a, s)) return;
    launchChained(attentionKernel, dim3(a.heads, a.tokens, std::max(1, a.splits)), kThreads, shared, s, a);
    if (a.splits > 1) {
        launchChained(combineKernel, dim3(a.heads, a.tokens), kThreads, 0, s, a);
    }
}

}  // namespace tandem::cuda
