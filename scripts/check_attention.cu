// The prompt's attention kernels (engine/cuda/attention_prefill.cu on tensor cores, attention.cu's scalar
// kernel) against a float64 reference on the GPU machine, at real shapes (Qwen3-30B-A3B's 32 query and 4
// key heads of 128, gpt-oss's 64/8 of 64 with a sliding window, the fixtures' 4/2 of 32, plain multi-head),
// chunks that start at 0 and after earlier context, with and without split precision; the outputs
// poisoned with NaN before each run. Sampled rows (the first and last tokens of the chunk and random
// ones, every query head) are compared as relative L2 over the sampled outputs. Prints one line per case
// with both kernels' errors and times, and exits 1 when an error is above its bound. Built and run by
// CHECKS=1 scripts/device-gpu-check.sh:
//   nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_attention.cu -o /tmp/check-attention
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/attention.cu"
#include "cuda/attention_prefill.cu"

using tandem::cuda::bf16;

namespace {

float fromBf16(bf16 h) { return __bfloat162float(h); }

struct Case {
    const char* name;
    int headDim, heads, kvHeads, tokens, start, window;
    bool split;
};

template <class T>
T* upload(const std::vector<T>& host) {
    T* device = nullptr;
    cudaMalloc(&device, host.size() * sizeof(T));
    cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return device;
}

struct Result {
    double error;
    float ms;
};

}  // namespace

int main() {
    const Case cases[] = {
        {"qwen3 512 from 0", 128, 32, 4, 512, 0, 0, true},
        {"qwen3 512 after 1536", 128, 32, 4, 512, 1536, 0, true},
        {"qwen3 2048 from 0", 128, 32, 4, 2048, 0, 0, true},
        {"qwen3 512 bf16", 128, 32, 4, 512, 0, 0, false},
        {"gpt-oss 300 after 50, window 128", 64, 64, 8, 300, 50, 128, true},
        {"fixture 7 after 3", 32, 4, 2, 7, 3, 0, true},
        {"fixture 5 bf16", 32, 4, 2, 5, 0, 0, false},
        {"multi-head 100 after 3", 128, 8, 8, 100, 3, 0, true},
        {"two tokens", 64, 16, 2, 2, 0, 0, true},
    };
    int failed = 0;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::printf("%-34s %12s %12s %9s %9s\n", "case", "flash error", "scalar error", "flash ms", "scalar ms");
    for (const Case& c : cases) {
        const int hd = c.headDim, context = c.start + c.tokens;
        const int ldq = (c.heads + 2 * c.kvHeads) * hd, ldk = c.kvHeads * hd, ldOut = c.heads * hd;
        std::vector<float> q(static_cast<std::size_t>(c.tokens) * ldq), k(static_cast<std::size_t>(context) * ldk),
            v(k.size());
        // Keys with a per-key offset so that the softmax is far from uniform.
        for (auto& x : q) x = normal(rng);
        for (auto& x : k) x = normal(rng) * 1.5f;
        for (auto& x : v) x = normal(rng);
        float* dq = upload(q);
        float* dk = upload(k);
        float* dv = upload(v);
        int* dStart = upload(std::vector<int>{c.start});
        bf16* dOut = nullptr;
        const std::size_t outCount = 2 * static_cast<std::size_t>(c.tokens) * ldOut;
        cudaMalloc(&dOut, outCount * sizeof(bf16));
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

        tandem::cuda::AttentionArgs a{};
        a.qA = dq;
        a.ldqA = ldq;
        a.qAHeadStride = hd;
        a.dimA = hd;
        a.keyA = dk;
        a.ldKeyA = ldk;
        a.value = dv;
        a.ldValue = ldk;
        a.dimV = hd;
        a.keyHeadStride = hd;
        a.group = c.heads / c.kvHeads;
        a.heads = c.heads;
        a.tokens = c.tokens;
        a.start = dStart;
        a.window = c.window;
        a.scale = scale;
        a.out = dOut;
        a.ldOut = ldOut;
        a.outHeadStride = hd;
        a.split = c.split;
        a.splits = 1;

        // Sampled tokens: the first two, the last two and random ones.
        std::vector<int> tokens = {0, std::min(1, c.tokens - 1), c.tokens - 2 < 0 ? 0 : c.tokens - 2, c.tokens - 1};
        for (int i = 0; i < 12; ++i) tokens.push_back(static_cast<int>(rng() % static_cast<unsigned>(c.tokens)));
        std::vector<double> reference;
        for (int t : tokens)
            for (int h = 0; h < c.heads; ++h) {
                const int position = c.start + t, g = h / a.group;
                const int first = c.window > 0 ? std::max(0, position - c.window + 1) : 0;
                std::vector<double> p;
                double m = -1e300;
                for (int j = first; j <= position; ++j) {
                    double s = 0;
                    for (int d = 0; d < hd; ++d)
                        s += static_cast<double>(q[static_cast<std::size_t>(t) * ldq + h * hd + d]) *
                             k[static_cast<std::size_t>(j) * ldk + g * hd + d];
                    p.push_back(s * scale);
                    m = std::max(m, p.back());
                }
                double l = 0;
                for (double& x : p) l += (x = std::exp(x - m));
                for (int d = 0; d < hd; ++d) {
                    double o = 0;
                    for (int j = first; j <= position; ++j) o += p[static_cast<std::size_t>(j - first)] * v[static_cast<std::size_t>(j) * ldk + g * hd + d];
                    reference.push_back(o / l);
                }
            }

        auto run = [&](bool flash) {
            a.noFlash = !flash;
            std::vector<bf16> poison(outCount);
            const float nan = std::nanf("");
            for (auto& x : poison) x = __float2bfloat16(nan);
            cudaMemcpy(dOut, poison.data(), outCount * sizeof(bf16), cudaMemcpyHostToDevice);
            tandem::cuda::launchAttention(a, nullptr);
            cudaDeviceSynchronize();
            std::vector<bf16> out(outCount);
            cudaMemcpy(out.data(), dOut, outCount * sizeof(bf16), cudaMemcpyDeviceToHost);
            double num = 0, den = 0;
            std::size_t i = 0;
            for (int t : tokens)
                for (int h = 0; h < c.heads; ++h)
                    for (int d = 0; d < hd; ++d, ++i) {
                        const std::size_t at = static_cast<std::size_t>(t) * ldOut + h * hd + d;
                        double got = fromBf16(out[at]);
                        if (c.split) got += fromBf16(out[at + static_cast<std::size_t>(c.tokens) * ldOut]);
                        const double diff = std::isfinite(got) ? got - reference[i] : 1e30;
                        num += diff * diff;
                        den += reference[i] * reference[i];
                    }
            cudaEvent_t e0, e1;
            cudaEventCreate(&e0);
            cudaEventCreate(&e1);
            cudaEventRecord(e0);
            constexpr int kReps = 5;
            for (int r = 0; r < kReps; ++r) tandem::cuda::launchAttention(a, nullptr);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            cudaEventDestroy(e0);
            cudaEventDestroy(e1);
            return Result{std::sqrt(num / den), ms / kReps};
        };
        const Result flash = run(true), scalar = run(false);
        const cudaError_t e = cudaGetLastError();
        // Split: float32-like (the scalar kernel measures ~1e-6); bf16 products: the GPU path's 2e-2.
        const double bound = c.split ? 1e-4 : 2e-2;
        const bool ok = e == cudaSuccess && flash.error <= bound && scalar.error <= bound;
        if (!ok) ++failed;
        std::printf("%-34s %12.3g %12.3g %9.3f %9.3f%s%s\n", c.name, flash.error, scalar.error, flash.ms, scalar.ms,
                    ok ? "" : "  FAILED", e == cudaSuccess ? "" : cudaGetErrorString(e));
        cudaFree(dq);
        cudaFree(dk);
        cudaFree(dv);
        cudaFree(dStart);
        cudaFree(dOut);
    }
    std::printf("%s\n", failed ? "attention check FAILED" : "attention check: all within bounds");
    return failed ? 1 : 0;
}
