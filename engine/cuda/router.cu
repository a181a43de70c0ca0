// Expert routing on the GPU, one block per token (decode: the norm before it, the router's product,
// the routing and the hand-over in one kernel), reproducing model::routeToken exactly: softmax or
// sigmoid scores (after gpt-oss's logit bias), the optional correction bias for the choice, group limiting (by best expert or by the
// sum of the two best), top-k with ties to the lower index, weights heaviest first, normalize, scale.
#include <cfloat>

#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"
#include "cuda/slot_signal.cuh"

namespace tandem::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxTopK = 32;
constexpr int kMaxGroups = 64;

struct Best {
    float value;
    int index;
};

__device__ inline Best better(Best a, Best b) {
    return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

// Routes one token whose logits are in scores[0, experts) (shared memory; choice is the next `experts`
// floats), writing its ids and weights. Every thread of the block calls it.
__device__ void routeLogits(float* scores, int experts, const float* bias, const RouterSpec& spec, int* ids,
                            float* weights) {
    float* choice = scores + experts;
    __shared__ float scratch[32];
    __shared__ float groupScore[kMaxGroups];
    __shared__ int keepGroup[kMaxGroups];
    __shared__ int chosen[kMaxTopK];
    __syncthreads();
    if (spec.scoring == ExpertScoring::Softmax) {
        float mx = -FLT_MAX;
        for (int e = threadIdx.x; e < experts; e += blockDim.x) mx = fmaxf(mx, scores[e]);
        mx = blockMax(mx, scratch);
        float sum = 0.0f;
        for (int e = threadIdx.x; e < experts; e += blockDim.x) {
            scores[e] = expf(scores[e] - mx);
            sum += scores[e];
        }
        const float inv = 1.0f / blockSum(sum, scratch);
        for (int e = threadIdx.x; e < experts; e += blockDim.x) scores[e] *= inv;
    } else {
        for (int e = threadIdx.x; e < experts; e += blockDim.x) scores[e] = 1.0f / (1.0f + expf(-scores[e]));
    }
    for (int e = threadIdx.x; e < experts; e += blockDim.x) choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
    __syncthreads();

    if (spec.selection != ExpertSelection::TopK && spec.numGroups > 1) {
        const int perGroup = experts / spec.numGroups;
        if (threadIdx.x < spec.numGroups) {
            const float* g = choice + threadIdx.x * perGroup;
            float first = -FLT_MAX, second = -FLT_MAX;
            for (int i = 0; i < perGroup; ++i) {
                if (g[i] > first) {
                    second = first;
                    first = g[i];
                } else if (g[i] > second) {
                    second = g[i];
                }
            }
            groupScore[threadIdx.x] = spec.selection == ExpertSelection::GroupLimitedByMax ? first : first + second;
            keepGroup[threadIdx.x] = 0;
        }
        __syncthreads();
        if (threadIdx.x == 0)
            for (int r = 0; r < spec.topKGroups; ++r) {
                int best = -1;
                for (int g = 0; g < spec.numGroups; ++g)
                    if (!keepGroup[g] && (best < 0 || groupScore[g] > groupScore[best])) best = g;
                keepGroup[best] = 1;
            }
        __syncthreads();
        for (int e = threadIdx.x; e < experts; e += blockDim.x)
            if (!keepGroup[e / perGroup]) choice[e] = -INFINITY;
        __syncthreads();
    }

    // Top-k in the first warp alone: k rounds of a warp argmax, no block-wide barrier per round.
    if (threadIdx.x < 32) {
        for (int r = 0; r < spec.topK; ++r) {
            Best best{-FLT_MAX, 0x7fffffff};
            for (int i = threadIdx.x; i < experts; i += 32) best = better(best, Best{choice[i], i});
            for (int o = 16; o > 0; o >>= 1)
                best = better(best, Best{__shfl_xor_sync(0xffffffffu, best.value, o), __shfl_xor_sync(0xffffffffu, best.index, o)});
            if (threadIdx.x == 0) {
                chosen[r] = best.index;
                choice[best.index] = -FLT_MAX;  // below every real score, above the excluded groups' -inf
            }
            __syncwarp();
        }
    }

    if (threadIdx.x == 0) {
        // Heaviest first; a stable insertion sort keeps the choice order among equal weights.
        for (int i = 1; i < spec.topK; ++i)
            for (int j = i; j > 0 && scores[chosen[j]] > scores[chosen[j - 1]]; --j) {
                const int tmp = chosen[j];
                chosen[j] = chosen[j - 1];
                chosen[j - 1] = tmp;
            }
        float sum = 0.0f;
        for (int i = 0; i < spec.topK; ++i) sum += scores[chosen[i]];
        const float factor = spec.normalize ? spec.scale / sum : spec.scale;
        for (int i = 0; i < spec.topK; ++i) {
            ids[i] = chosen[i];
            weights[i] = scores[chosen[i]] * factor;
        }
    }
}

__global__ void routerKernel(const float* logits, int experts, const float* logitBias, const float* bias, RouterSpec spec,
                             int* ids, float* weights) {
    extern __shared__ float scores[];
    const int t = blockIdx.x;
    for (int e = threadIdx.x; e < experts; e += blockDim.x)
        scores[e] = logits[static_cast<long>(t) * experts + e] + (logitBias ? logitBias[e] : 0.0f);
    routeLogits(scores, experts, bias, spec, ids + static_cast<long>(t) * spec.topK, weights + static_cast<long>(t) * spec.topK);
}

// Decode's MoE entry (kernels.h). Every block normalizes the row itself into shared memory (reading
// 8-28 KB beats a kernel boundary), then computes the float32 logits of its experts, kSlices warps per
// expert (each a slice of the row, so each lane has few loads in a row). With a hand-over, block 0
// also writes the row to the slot. The block that finishes last routes the token (the others'
// logits are visible to it after their fences), writing the routing to the slot, and signals the
// CPU. It puts the counter back to zero for the next launch.
constexpr int kSlices = 4;

__global__ void routerDecodeKernel(RouteDecodeArgs a) {
    extern __shared__ float shared[];
    float* row = shared;                 // [hidden]: the normalized row
    float* scores = shared + a.hidden;   // [2 * experts]: routeLogits' scratch
    __shared__ float scratch[32];
    __shared__ bool last;
    __shared__ float part[kThreads / 32];
    // The router's weights are no kernel's output: each lane's first loads are issued before waiting for
    // the kernel before, so their latency hides behind its tail (chained_launch.cuh).
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int e = blockIdx.x * (kThreads / 32 / kSlices) + warp / kSlices, slice = warp % kSlices;
    const bool vectorized = a.hidden % (4 * kSlices) == 0;
    const int per = vectorized ? a.hidden / 4 / kSlices : 0;
    const float4* r4 = e < a.experts && vectorized ? reinterpret_cast<const float4*>(a.w + static_cast<long>(e) * a.hidden) + slice * per
                                                   : nullptr;
    constexpr int kAhead = 4;
    float4 ahead[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
        if (r4 && lane + 32 * u < per) ahead[u] = r4[lane + 32 * u];
    waitForPrevious();
    startNext();
    float squares = 0.0f;
    for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) squares += a.x[i] * a.x[i];
    const float inv = 1.0f / sqrtf(blockSum(squares, scratch) / static_cast<float>(a.hidden) + a.eps);
    for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) {
        const float v = a.x[i] * inv * a.normWeight[i];
        row[i] = v;
        if (blockIdx.x != 0) continue;
        if (a.hF32) a.hF32[i] = v;
        if (a.hBf16) storeBf16(v, a.hBf16 + i, a.hBf16 + a.hidden + i, a.split);
        if (a.control) a.hostHidden[i] = v;
    }
    // Block 0 hands the row over now, while the logits are computed. Its fence before its count
    // below, and the last block's system fence before `ready`, order the row before the signal.
    __syncthreads();

    float sum = 0.0f;
    if (e < a.experts) {
        const float* weights = a.w + static_cast<long>(e) * a.hidden;
        if (r4) {
            const auto* x4 = reinterpret_cast<const float4*>(row) + slice * per;
#pragma unroll
            for (int u = 0; u < kAhead; ++u) {
                const int i = lane + 32 * u;
                if (i >= per) continue;
                const float4 w = ahead[u], v = x4[i];
                sum += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
            }
#pragma unroll 4
            for (int i = lane + 32 * kAhead; i < per; i += 32) {
                const float4 w = r4[i], v = x4[i];
                sum += w.x * v.x + w.y * v.y + w.z * v.z + w.w * v.w;
            }
        } else {
            for (int i = slice * 32 + lane; i < a.hidden; i += 32 * kSlices) sum += weights[i] * row[i];
        }
    }
    sum = warpSum(sum);
    if (lane == 0) part[warp] = sum;
    __syncthreads();
    if (slice == 0 && lane == 0 && e < a.experts) {
        float total = 0.0f;
        for (int k = 0; k < kSlices; ++k) total += part[warp + k];
        a.logits[e] = total;
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(a.blocksDone, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = threadIdx.x; i < a.experts; i += blockDim.x)
        scores[i] = __ldcg(a.logits + i) + (a.logitBias ? a.logitBias[i] : 0.0f);
    routeLogits(scores, a.experts, a.bias, a.spec, a.ids, a.weights);
    if (threadIdx.x != 0) return;
    if (a.table) {
        // Thread 0 wrote the routing: the batch of the chosen experts, one group per slot.
        for (int j = 0; j < a.spec.topK; ++j) {
            a.slotExperts[j] = a.table[a.ids[j]];
            a.groupStart[j] = j;
            a.pairToken[j] = 0;
            a.pairGroup[j] = j;
            a.pairWeight[j] = a.weights[j];
            a.slotPair[j] = j;
        }
        a.groupStart[a.spec.topK] = a.spec.topK;
    }
    // Thread 0 wrote the routing; the signal's own system fence orders it, and the row block 0 wrote
    // before its count, before `ready`.
    if (a.control) signalSlot(a.control, a.counter, a.layer, a.clock);
    *a.blocksDone = 0;
}

// One block: which experts `ids` names, counted in shared memory and written out whole.
__global__ void markRoutedKernel(const int* ids, int count, int experts, int* routed) {
    extern __shared__ int seen[];
    for (int e = threadIdx.x; e < experts; e += blockDim.x) seen[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        const int id = ids[i];
        if (id >= 0 && id < experts) seen[id] = 1;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < experts; e += blockDim.x) routed[e] = seen[e];
}

}  // namespace

void launchRouter(const float* logits, int tokens, int experts, const float* logitBias, const float* bias,
                  const RouterSpec& spec, int* ids, float* weights, cudaStream_t s) {
    if (spec.topK > kMaxTopK || spec.numGroups > kMaxGroups)
        throw GpuError("the GPU router supports at most 32 active experts and 64 groups");
    routerKernel<<<tokens, kThreads, 2 * experts * sizeof(float), s>>>(logits, experts, logitBias, bias, spec, ids, weights);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchMarkRouted(const int* ids, int count, int experts, int* routed, cudaStream_t s) {
    markRoutedKernel<<<1, 1024, static_cast<std::size_t>(experts) * sizeof(int), s>>>(ids, count, experts, routed);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

ExpertPairs decodeSlotBatch(const RouteDecodeArgs& a) {
    ExpertPairs b;
    b.groups = a.spec.topK;
    b.weights = a.slotExperts;
    b.groupStart = a.groupStart;
    b.pairToken = a.pairToken;
    b.pairGroup = a.pairGroup;
    b.pairWeight = a.pairWeight;
    b.maxPairs = a.spec.topK;
    b.slotPair = a.slotPair;
    b.groupExpert = a.ids;  // group j is slot j: its expert is ids[j] (the epilogue's biases)
    b.tokens = 1;
    b.topK = a.spec.topK;
    return b;
}

void launchRouterDecode(const RouteDecodeArgs& a, cudaStream_t s) {
    if (a.spec.topK > kMaxTopK || a.spec.numGroups > kMaxGroups)
        throw GpuError("the GPU router supports at most 32 active experts and 64 groups");
    const int perBlock = kThreads / 32 / kSlices;
    launchChained(routerDecodeKernel, (a.experts + perBlock - 1) / perBlock, kThreads,
                  (a.hidden + 2 * a.experts) * sizeof(float), s, a);
}

}  // namespace tandem::cuda
