// Decode GEMV variants on the GPU, alone: y = W x for one token (bf16 W, split bf16 x), W rotating
// through copies larger than L2 so each call reads HBM as in a real step. Prints µs per call and
// TB/s of weights for each shape and variant; the engine's kernel (launchGemv) is "engine".
// Build and run on the GPU machine:
//   nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/bench_gemv.cu engine/cuda/gemv.cu -o /tmp/bench-gemv
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "cuda/kernels.h"

using tandem::cuda::bf16;

namespace {

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

// SplitK warps per row, each over k / SplitK, Unroll 16-byte loads per lane in flight; 8 warps a block.
template <int SplitK, int Unroll>
__global__ void gemvVariant(const bf16* w, int n, int k, const bf16* x, const bf16* lo, float* y) {
    __shared__ float partial[8];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = blockIdx.x * (8 / SplitK) + warp / SplitK, part = warp % SplitK;
    const int per = k / SplitK;
    float sum = 0.0f;
    if (row < n) {
        const bf16* wr = w + static_cast<long>(row) * k + part * per;
        const bf16* xr = x + part * per;
        const bf16* lr = lo + part * per;
        for (int c = lane * 8; c < per; c += 256 * Unroll) {
            uint4 wv[Unroll];
#pragma unroll
            for (int u = 0; u < Unroll; ++u)
                if (c + u * 256 < per) wv[u] = *reinterpret_cast<const uint4*>(wr + c + u * 256);
#pragma unroll
            for (int u = 0; u < Unroll; ++u)
                if (c + u * 256 < per) {
                    sum += dot8(wv[u], *reinterpret_cast<const uint4*>(xr + c + u * 256));
                    sum += dot8(wv[u], *reinterpret_cast<const uint4*>(lr + c + u * 256));
                }
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) partial[warp] = sum;
    __syncthreads();
    if (row < n && part == 0 && lane == 0) {
        float total = 0.0f;
        for (int p = 0; p < SplitK; ++p) total += partial[warp + p];
        y[row] = total;
    }
}

struct Shape {
    const char* name;
    int n, k;
};

template <int SplitK, int Unroll>
void launchVariant(const bf16* w, int n, int k, const bf16* x, float* y, cudaStream_t s) {
    const int rowsPerBlock = 8 / SplitK;
    gemvVariant<SplitK, Unroll><<<(n + rowsPerBlock - 1) / rowsPerBlock, 256, 0, s>>>(w, n, k, x, x + k, y);
}

}  // namespace

int main() {
    const Shape shapes[] = {{"qwen3 qkv", 5120, 2048},   {"qwen3 o", 2048, 4096},     {"v2lite q", 3072, 2048},
                            {"v2lite o", 2048, 2048},    {"v2lite shared gu", 5632, 2048}, {"v2lite shared down", 2048, 2816},
                            {"v3 q_a+kv_a", 2112, 7168}, {"v3 o", 7168, 16384},      {"lm_head qwen3", 151936, 2048}};
    cudaStream_t s;
    cudaStreamCreate(&s);
    float* y;
    bf16* x;
    cudaMalloc(&y, 200000 * sizeof(float));
    cudaMalloc(&x, 2 * 16384 * sizeof(bf16));
    cudaMemset(x, 0, 2 * 16384 * sizeof(bf16));
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    using Launch = void (*)(const bf16*, int, int, const bf16*, float*, cudaStream_t);
    struct Variant {
        const char* name;
        Launch launch;
    };
    const Variant variants[] = {
        {"engine", [](const bf16* w, int n, int k, const bf16* x, float* y, cudaStream_t s) {
             tandem::cuda::launchGemv(w, n, k, x, k, true, y, false, s);
         }},
        {"split1 unroll1", launchVariant<1, 1>}, {"split1 unroll4", launchVariant<1, 4>},
        {"split2 unroll2", launchVariant<2, 2>}, {"split2 unroll4", launchVariant<2, 4>},
        {"split4 unroll2", launchVariant<4, 2>}, {"split4 unroll4", launchVariant<4, 4>},
        {"split8 unroll2", launchVariant<8, 2>},
    };
    std::printf("%-20s %-16s %9s %7s\n", "shape", "variant", "us/call", "TB/s");
    for (const Shape& sh : shapes) {
        const std::size_t bytes = static_cast<std::size_t>(sh.n) * sh.k * sizeof(bf16);
        const int copies = static_cast<int>(std::max<std::size_t>(2, (400u << 20) / bytes));
        bf16* w;
        if (cudaMalloc(&w, bytes * copies) != cudaSuccess) return 1;
        cudaMemset(w, 0, bytes * copies);
        for (const Variant& v : variants) {
            const int calls = 200;
            for (int i = 0; i < 20; ++i) v.launch(w + (i % copies) * (bytes / 2), sh.n, sh.k, x, y, s);
            cudaEventRecord(a, s);
            for (int i = 0; i < calls; ++i) v.launch(w + (i % copies) * (bytes / 2), sh.n, sh.k, x, y, s);
            cudaEventRecord(b, s);
            cudaEventSynchronize(b);
            float ms = 0;
            cudaEventElapsedTime(&ms, a, b);
            const double us = ms * 1e3 / calls;
            std::printf("%-20s %-16s %9.2f %7.2f\n", sh.name, v.name, us, bytes / us * 1e-6);
        }
        cudaFree(w);
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) std::printf("error: %s\n", cudaGetErrorString(e));
    return 0;
}
