#pragma once
// Rotary embeddings on the GPU, the arithmetic shared by the kernels that apply them (rope.cu, and the
// decode attention kernel, which prepares its own query and the new key): the same as model::Rope on
// the CPU, angle = position * invFreq[i] in float32, times the attention factor.
#include "cuda/block_reduce.cuh"
#include "cuda/kernels.h"

namespace tandem::cuda {

__device__ inline void ropeAngle(const RopeParams& r, int position, int pair, float& c, float& s) {
    const float a = static_cast<float>(position) * r.invFreq[pair];
    c = cosf(a) * r.attentionFactor;
    s = sinf(a) * r.attentionFactor;
}

// The two elements rotated together by pair p.
__device__ inline void ropePair(const RopeParams& r, int p, int& a, int& b) {
    a = r.interleaved ? 2 * p : p;
    b = r.interleaved ? 2 * p + 1 : p + r.dim / 2;
}

// One head of `dim` <= blockDim.x elements, x held by thread i < dim (0 elsewhere): the optional
// RMSNorm with weights `norm`, then the rotation of the first rope.dim elements at `position`, through
// `head` (dim floats of shared memory). Returns thread i's element; every thread of the block calls it.
__device__ inline float normRotateHead(float x, int dim, const float* norm, float eps, const RopeParams& rope, int position,
                                       float* head, float* scratch) {
    const int i = threadIdx.x;
    if (norm) {
        const float inv = 1.0f / sqrtf(blockSum(x * x, scratch) / static_cast<float>(dim) + eps);
        if (i < dim) x = x * inv * norm[i];
    }
    if (i < dim) head[i] = x;
    __syncthreads();
    float out = x;
    if (i < rope.dim) {
        // Find the pair of element i and whether it is the first or second of it.
        const int half = rope.dim / 2;
        const int p = rope.interleaved ? i / 2 : i % half;
        int a, b;
        ropePair(rope, p, a, b);
        float c, s;
        ropeAngle(rope, position, p, c, s);
        out = i == a ? head[a] * c - head[b] * s : head[b] * c + head[a] * s;
    }
    __syncthreads();  // every thread has read head
    return out;
}

}  // namespace tandem::cuda
