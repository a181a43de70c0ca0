// Expert routing on the GPU, one block per token, reproducing model::routeToken exactly: softmax or
// sigmoid scores, the optional correction bias for the choice, group limiting (by best expert or by the
// sum of the two best), top-k with ties to the lower index, weights heaviest first, normalize, scale.
#include <cfloat>

#include "cuda/block_reduce.cuh"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

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

// Argmax over values[0, n) with ties to the lower index; every thread gets the result.
__device__ Best blockArgmax(const float* values, int n, float* scratchV, int* scratchI) {
    Best best{-FLT_MAX, 0x7fffffff};
    for (int i = threadIdx.x; i < n; i += blockDim.x) best = better(best, Best{values[i], i});
    for (int o = 16; o > 0; o >>= 1) {
        const Best other{__shfl_xor_sync(0xffffffffu, best.value, o), __shfl_xor_sync(0xffffffffu, best.index, o)};
        best = better(best, other);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
        scratchV[warp] = best.value;
        scratchI[warp] = best.index;
    }
    __syncthreads();
    Best result{-FLT_MAX, 0x7fffffff};
    for (int w = 0; w < (blockDim.x >> 5); ++w) result = better(result, Best{scratchV[w], scratchI[w]});
    return result;
}

__global__ void routerKernel(const float* logits, int experts, const float* bias, model::RouterSpec spec, int* ids,
                             float* weights) {
    extern __shared__ float shared[];
    float* scores = shared;
    float* choice = scores + experts;
    __shared__ float scratch[32];
    __shared__ float scratchV[32];
    __shared__ int scratchI[32];
    __shared__ float groupScore[kMaxGroups];
    __shared__ int keepGroup[kMaxGroups];
    __shared__ int chosen[kMaxTopK];
    const int t = blockIdx.x;

    for (int e = threadIdx.x; e < experts; e += blockDim.x) scores[e] = logits[static_cast<long>(t) * experts + e];
    __syncthreads();
    if (spec.scoring == model::ExpertScoring::Softmax) {
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

    if (spec.selection != model::ExpertSelection::TopK && spec.numGroups > 1) {
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
            groupScore[threadIdx.x] = spec.selection == model::ExpertSelection::GroupLimitedByMax ? first : first + second;
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

    for (int r = 0; r < spec.topK; ++r) {
        const Best b = blockArgmax(choice, experts, scratchV, scratchI);
        if (threadIdx.x == 0) {
            chosen[r] = b.index;
            choice[b.index] = -FLT_MAX;  // below every real score, above the excluded groups' -inf
        }
        __syncthreads();
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
            ids[static_cast<long>(t) * spec.topK + i] = chosen[i];
            weights[static_cast<long>(t) * spec.topK + i] = scores[chosen[i]] * factor;
        }
    }
}

}  // namespace

void launchRouter(const float* logits, int tokens, int experts, const float* bias, const model::RouterSpec& spec,
                  int* ids, float* weights, cudaStream_t s) {
    if (spec.topK > kMaxTopK || spec.numGroups > kMaxGroups)
        throw GpuError("the GPU router supports at most 32 active experts and 64 groups");
    routerKernel<<<tokens, kThreads, 2 * experts * sizeof(float), s>>>(logits, experts, bias, spec, ids, weights);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tandem::cuda
