// Decode GEMV variants on the GPU, alone: y = W x for one token (bf16 W, split bf16 x), W rotating
// through copies larger than L2 so each call reads HBM as in a real step. Prints us per call and TB/s
// of weights for each shape and for the engine's kernel (gemv.cu) with SplitK warps a row and Unroll
// loads in flight; "engine" is launchGemv's own choice. It includes gemv.cu, so the variants are the
// engine's template. Build and run on the GPU machine (or GEMV=1 scripts/device-gpu-check.sh):
//   nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/bench_gemv.cu -o /tmp/bench-gemv
#include <cstdio>

#include "cuda/gemv.cu"

using tandem::cuda::bf16;

namespace {

struct Shape {
    const char* name;
    int n, k;
};

template <int SplitK, int Unroll>
void variant(const bf16* w, int n, int k, const bf16* x, float* y, cudaStream_t s) {
    tandem::cuda::launchVariant<SplitK, Unroll>(w, n, k, x, x + k, y, false, true, s);
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
        {"split1 unroll1", variant<1, 1>}, {"split1 unroll4", variant<1, 4>}, {"split2 unroll2", variant<2, 2>},
        {"split2 unroll4", variant<2, 4>}, {"split4 unroll2", variant<4, 2>}, {"split4 unroll4", variant<4, 4>},
        {"split8 unroll2", variant<8, 2>},
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
