// The 8-bit weight kernels (engine/cuda/fp8.cu and gemm8 in gemm.cu) against a float64 reference on the
// GPU machine: random e4m3 weights (no NaN codes) with random 128x128 block scales, and random int8
// weights with a scale per row (--dense int8), at awkward shapes (partial blocks, few and many rows,
// columns no multiple of 32 or of 16), random split inputs, the outputs poisoned with NaN before each run.
// Decode's GEMV and prefill's chunked GEMM (with a scratch small enough to need several chunks), with and
// without the split input's lo rows, = and +=.
// Prints one line per case and exits 1 when any relative L2 error is above its bound. Built and run by
// CHECKS=1 scripts/device-gpu-check.sh:
//   nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_fp8.cu -lcublas -o /tmp/check-fp8
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/fp8.cu"
#include "cuda/gemm.cu"

using tandem::cuda::bf16;

namespace {

// OCP e4m3fn, as the CPU path reads it (io/dtype.h), in float64.
double e4m3(std::uint8_t b) {
    const int sign = b >> 7, exponent = (b >> 3) & 15, mantissa = b & 7;
    const double v = exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
    return sign ? -v : v;
}

std::uint16_t toBf16(float f) {  // round to nearest even
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return static_cast<std::uint16_t>(u >> 16);
}

float fromBf16(std::uint16_t h) {
    const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

template <class T>
T* device(const std::vector<T>& host) {
    T* p = nullptr;
    TANDEM_CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(T) + 16));
    TANDEM_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

struct Case {
    int n, k, tokens;
};

double relativeError(const std::vector<float>& got, const std::vector<double>& want) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return std::sqrt(num / den);
}

}  // namespace

int main() {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> scaleDraw(1e-3f, 1e-2f);
    cublasHandle_t blas;
    TANDEM_CUBLAS_CHECK(cublasCreate(&blas));
    cudaStream_t s;
    TANDEM_CUDA_CHECK(cudaStreamCreate(&s));
    TANDEM_CUBLAS_CHECK(cublasSetStream(blas, s));
    // Scratch for 2 rows of 7168 columns only: the larger matrices take many chunks.
    const std::size_t scratchBytes = 2 * 2 * 7168 * sizeof(bf16) * 40;
    bf16* scratchRows = nullptr;
    float* products = nullptr;
    const int maxChunkRows = 64;
    TANDEM_CUDA_CHECK(cudaMalloc(&scratchRows, scratchBytes));
    TANDEM_CUDA_CHECK(cudaMalloc(&products, 2 * 64 * 2 * maxChunkRows * sizeof(float)));

    const Case cases[] = {{96, 192, 1},    {300, 272, 1},   {5000, 7168, 1}, {2112, 7168, 1}, {7168, 2048, 1},
                          {513, 1536, 1},  {40, 200, 1},    {16500, 1024, 1}, {96, 192, 7},   {300, 272, 33},
                          {2112, 7168, 64}, {513, 1536, 17}, {7168, 2048, 5}};
    using tandem::cuda::Weight8;
    bool failed = false;
    std::printf("%-30s %-6s %-10s %10s %8s\n", "case", "split", "op", "rel. L2", "bound");
    for (const Weight8 format : {Weight8::E4M3, Weight8::Int8})
    for (const Case& c : cases) {
        const bool int8 = format == Weight8::Int8;
        // Int8: one scale per row (a block of every column).
        const int blockCols = int8 ? c.k : 128, blockRows = int8 ? 1 : 128;
        const int scaleCols = (c.k + blockCols - 1) / blockCols, scaleRows = (c.n + blockRows - 1) / blockRows;
        std::vector<std::uint8_t> w(static_cast<std::size_t>(c.n) * c.k);
        for (auto& b : w) {
            do b = static_cast<std::uint8_t>(rng());
            while (int8 ? b == 0x80 : (b & 0x7f) == 0x7f);  // int8 weights lie in [-127, 127]
        }
        const auto weight = [&](std::uint8_t b) { return int8 ? static_cast<double>(static_cast<std::int8_t>(b)) : e4m3(b); };
        std::vector<float> blockScales(static_cast<std::size_t>(scaleRows) * scaleCols);
        for (auto& v : blockScales) v = scaleDraw(rng);
        std::vector<float> rowScales(static_cast<std::size_t>(c.n) * scaleCols);
        for (int r = 0; r < c.n; ++r)
            for (int b = 0; b < scaleCols; ++b) rowScales[static_cast<std::size_t>(r) * scaleCols + b] = blockScales[(r / blockRows) * scaleCols + b];
        // Split inputs: tokens hi rows, then tokens lo rows.
        std::vector<std::uint16_t> x(2 * static_cast<std::size_t>(c.tokens) * c.k);
        std::vector<double> exact(static_cast<std::size_t>(c.tokens) * c.k), hiOnly(exact.size());
        for (std::size_t i = 0; i < exact.size(); ++i) {
            const float v = normal(rng);
            x[i] = toBf16(v);
            x[exact.size() + i] = toBf16(v - fromBf16(x[i]));
            hiOnly[i] = fromBf16(x[i]);
            exact[i] = hiOnly[i] + fromBf16(x[exact.size() + i]);
        }
        std::vector<double> prior(static_cast<std::size_t>(c.tokens) * c.n);
        for (auto& v : prior) v = normal(rng);
        const std::uint8_t* dw = device(w);
        const float* dScales = device(rowScales);
        const bf16* dx = reinterpret_cast<const bf16*>(device(x));
        float* dy = nullptr;
        TANDEM_CUDA_CHECK(cudaMalloc(&dy, prior.size() * sizeof(float)));
        for (const bool split : {true, false}) {
            for (const bool accumulate : {false, true}) {
                std::vector<double> want(prior.size());
                const std::vector<double>& in = split ? exact : hiOnly;
                for (int t = 0; t < c.tokens; ++t)
                    for (int r = 0; r < c.n; ++r) {
                        double sum = accumulate ? prior[static_cast<std::size_t>(t) * c.n + r] : 0.0;
                        for (int k = 0; k < c.k; ++k)
                            sum += weight(w[static_cast<std::size_t>(r) * c.k + k]) *
                                   blockScales[(r / blockRows) * scaleCols + k / blockCols] * in[static_cast<std::size_t>(t) * c.k + k];
                        want[static_cast<std::size_t>(t) * c.n + r] = sum;
                    }
                std::vector<float> start(prior.size());
                for (std::size_t i = 0; i < start.size(); ++i) start[i] = accumulate ? static_cast<float>(prior[i]) : NAN;
                TANDEM_CUDA_CHECK(cudaMemcpy(dy, start.data(), start.size() * sizeof(float), cudaMemcpyHostToDevice));
                const char* op;
                if (c.tokens == 1) {
                    op = "gemv";
                    tandem::cuda::launchGemv8(format, dw, dScales, scaleCols, blockCols, c.n, c.k, dx, c.k, split, dy, accumulate,
                                              s);
                } else {
                    op = "gemm";
                    const tandem::cuda::Fp8Scratch scratch{scratchRows, scratchBytes, products, maxChunkRows};
                    tandem::cuda::gemm8(blas, s, format, dw, dScales, scaleCols, blockCols, c.n, c.k, dx, c.k, c.tokens, split,
                                        dy, c.n, accumulate, scratch);
                }
                TANDEM_CUDA_CHECK(cudaStreamSynchronize(s));
                std::vector<float> got(prior.size());
                TANDEM_CUDA_CHECK(cudaMemcpy(got.data(), dy, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
                const double error = relativeError(got, want);
                // float32 sums over k products: ~1e-6. The GEMM's widened FP8 weights hold ~16 bits with split
                // (hi + lo), ~8 without (bf16 alone, as before FP8 stayed FP8); int8 weights are exact in bf16.
                const double bound = c.tokens == 1 || int8 ? 1e-5 : (split ? 2e-5 : 1e-2);
                failed |= !(error <= bound);
                char name[64];
                std::snprintf(name, sizeof name, "%s %dx%d tokens %d%s", int8 ? "int8" : "e4m3", c.n, c.k, c.tokens,
                              accumulate ? " +=" : "");
                std::printf("%-30s %-6s %-10s %10.2e %8.0e%s\n", name, split ? "yes" : "no", op, error, bound,
                            error <= bound ? "" : "  FAILED");
            }
        }
        cudaFree(const_cast<std::uint8_t*>(dw));
        cudaFree(const_cast<float*>(dScales));
        cudaFree(const_cast<bf16*>(dx));
        cudaFree(dy);
    }
    std::printf(failed ? "check_fp8: FAILED\n" : "check_fp8: all within bounds (e4m3 and int8)\n");
    return failed ? 1 : 0;
}
