// Eight-bit weights on the GPU: FP8 (DeepSeek-V3's e4m3 with block scales), kept as FP8, and int8 with a
// scale per row (dense weights quantized at load, --dense int8: cpu/dense/quantize_dense.h). Every weight
// is widened and multiplied by its block's scale in float32, as the CPU path does, so the products are
// the checkpoint's own; rounding FP8 x scale to bf16 instead cost 1e-2 of the logits at real widths.
//
// Decode reads each weight once, so its GEMV reads the FP8 bytes (half of bf16's) 16 at a time and
// scales each 16-column piece's dot product (a piece never straddles a block: blocks are multiples of 16
// columns). Prefill multiplies many tokens by each weight, which the tensor cores must do: a chunk of
// rows is widened into bf16 hi and lo rows (hi + lo holds FP8 x scale to ~16 bits, as the split inputs
// do for activations, kernels.h), cuBLAS multiplies them by the split input, and the four products
// (hi and lo weights by hi and lo inputs) are summed. An int8 weight is an integer, exact in bf16: its
// rows are widened without their scales and the row scale multiplies the summed products.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/expert_kernels_common.cuh"
#include "cuda/kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ inline float fp8ToFloat(std::uint8_t b) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3)));
}

template <Weight8 F>
__device__ inline float weightToFloat(std::uint8_t b) {
    if constexpr (F == Weight8::E4M3) return fp8ToFloat(b);
    else return static_cast<float>(static_cast<std::int8_t>(b));
}

// Sixteen consecutive split inputs (hi + lo) as float32.
__device__ inline void loadInputs(const bf16* x, const bf16* lo, int c, float (&v)[16]) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const uint4 raw = *reinterpret_cast<const uint4*>(x + c + 8 * half);
        const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float2 f = __bfloat1622float2(pairs[j]);
            v[8 * half + 2 * j] = f.x;
            v[8 * half + 2 * j + 1] = f.y;
        }
        if (lo) {
            const uint4 rawLo = *reinterpret_cast<const uint4*>(lo + c + 8 * half);
            const auto* pairsLo = reinterpret_cast<const __nv_bfloat162*>(&rawLo);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 f = __bfloat1622float2(pairsLo[j]);
                v[8 * half + 2 * j] += f.x;
                v[8 * half + 2 * j + 1] += f.y;
            }
        }
    }
}

// Sixteen 8-bit weights (one 16-byte load) times sixteen inputs, in float32.
template <Weight8 F>
__device__ inline float dot16(uint4 w, const float (&v)[16]) {
    float sum = 0.0f;
    if constexpr (F == Weight8::E4M3) {
        const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&w);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[j], __NV_E4M3)));
            sum += f.x * v[2 * j] + f.y * v[2 * j + 1];
        }
    } else {
        // Signed bytes to the unsigned (q + 128) that int8Weight widens with a byte permute and a subtraction.
        const std::uint32_t words[4] = {w.x ^ 0x80808080u, w.y ^ 0x80808080u, w.z ^ 0x80808080u, w.w ^ 0x80808080u};
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int b = 0; b < 4; ++b) sum = fmaf(int8Weight(words[j], b), v[4 * j + b], sum);
    }
    return sum;
}

// SplitK warps per row, each over k / SplitK columns; lanes read 16 weights at a time, Unroll loads in
// flight. Without `vectorized` (k no multiple of 16, or unaligned rows) one warp a row reads byte by byte.
template <Weight8 F, int SplitK, int Unroll>
__global__ void gemv8Kernel(const std::uint8_t* w, const float* scales, int scaleCols, int blockCols, int n, int k,
                              const bf16* x, const bf16* lo, float* y, bool accumulate, bool vectorized,
                              const float* bias) {
    __shared__ float partial[kWarpsPerBlock];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = blockIdx.x * (kWarpsPerBlock / SplitK) + warp / SplitK, part = warp % SplitK;
    const bool valid = row < n;
    const int per = k / SplitK, offset = part * per;
    const std::uint8_t* wr = w + static_cast<long>(valid ? row : 0) * k + offset;
    const float* sr = scales + static_cast<long>(valid ? row : 0) * scaleCols;
    const int first = lane * 16;
    constexpr int kStride = 32 * 16;
    uint4 wv[Unroll];
#pragma unroll
    for (int u = 0; u < Unroll; ++u)
        if (vectorized && valid && first + u * kStride < per) wv[u] = *reinterpret_cast<const uint4*>(wr + first + u * kStride);
    waitForPrevious();
    startNext();
    float sum = 0.0f;
    if (valid && vectorized) {
        for (int c = first; c < per; c += kStride * Unroll) {
            if (c != first) {
#pragma unroll
                for (int u = 0; u < Unroll; ++u)
                    if (c + u * kStride < per) wv[u] = *reinterpret_cast<const uint4*>(wr + c + u * kStride);
            }
#pragma unroll
            for (int u = 0; u < Unroll; ++u) {
                const int col = offset + c + u * kStride;
                if (c + u * kStride >= per) continue;
                float v[16];
                loadInputs(x, lo, col, v);
                sum += dot16<F>(wv[u], v) * sr[col / blockCols];
            }
        }
    } else if (valid) {
        for (int c = lane; c < k; c += 32) {
            const float input = __bfloat162float(x[c]) + (lo ? __bfloat162float(lo[c]) : 0.0f);
            sum += weightToFloat<F>(wr[c]) * sr[c / blockCols] * input;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if constexpr (SplitK > 1) {
        if (lane == 0) partial[warp] = sum;
        __syncthreads();
        if (part != 0) return;
        for (int p = 1; p < SplitK; ++p) sum += partial[warp + p];
    }
    if (valid && lane == 0) y[row] = (accumulate ? y[row] : 0.0f) + sum + (bias ? bias[row] : 0.0f);
}

template <Weight8 F, int SplitK, int Unroll>
void launchVariant8(const std::uint8_t* w, const float* scales, int scaleCols, int blockCols, int n, int k, const bf16* x,
                      const bf16* lo, float* y, bool accumulate, bool vectorized, const float* bias, cudaStream_t s) {
    constexpr int rows = kWarpsPerBlock / SplitK;
    launchChained(gemv8Kernel<F, SplitK, Unroll>, (n + rows - 1) / rows, kWarpsPerBlock * 32, 0, s, w, scales, scaleCols,
                  blockCols, n, k, x, lo, y, accumulate, vectorized, bias);
}

// Int8 rows are widened as the integers they are (scales null: the row scale multiplies the products).
template <Weight8 F>
__global__ void dequant8Kernel(const std::uint8_t* w, const float* scales, int scaleCols, int blockCols, long count, int k,
                               bf16* hi, bf16* lo) {
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const long r = i / k;
        const int c = static_cast<int>(i - r * k);
        const float v = weightToFloat<F>(w[i]) * (scales ? scales[r * scaleCols + c / blockCols] : 1.0f);
        const bf16 h = __float2bfloat16(v);
        hi[i] = h;
        if (lo) lo[i] = __float2bfloat16(v - __bfloat162float(h));
    }
}

__global__ void sumQuadrantsKernel(const float* p, int ldp, int tokens, int n, int wHalves, int xHalves,
                                   const float* rowScales, float* y, int ldy, bool accumulate) {
    const long count = static_cast<long>(tokens) * n;
    for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < count;
         i += static_cast<long>(gridDim.x) * blockDim.x) {
        const int t = static_cast<int>(i / n), j = static_cast<int>(i % n);
        float sum = 0.0f;
        for (int b = 0; b < xHalves; ++b)
            for (int a = 0; a < wHalves; ++a) sum += p[static_cast<long>(b * tokens + t) * ldp + a * n + j];
        if (rowScales) sum *= rowScales[j];
        float& out = y[static_cast<long>(t) * ldy + j];
        out = (accumulate ? out : 0.0f) + sum;
    }
}

int gridFor(long count) { return static_cast<int>(std::min<long>((count + 255) / 256, 4096)); }

}  // namespace

void launchGemv8(Weight8 format, const std::uint8_t* w, const float* scales, int scaleCols, int blockCols, int n, int k,
                 const bf16* x, int ldx, bool split, float* y, bool accumulate, cudaStream_t s, const float* bias) {
    auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    const bool vectorized = k % 16 == 0 && blockCols % 16 == 0 && aligned(w) && aligned(x) && (!split || aligned(x + ldx));
    const bf16* lo = split ? x + ldx : nullptr;
    // As the bf16 GEMV (gemv.cu): a matrix of few rows gives two warps to each row, so that enough loads
    // are in flight.
    const auto launch = [&](auto f) {
        constexpr Weight8 F = decltype(f)::value;
        if (vectorized && n < 4096 && k % 32 == 0)
            launchVariant8<F, 2, 2>(w, scales, scaleCols, blockCols, n, k, x, lo, y, accumulate, true, bias, s);
        else if (vectorized && n >= 16384)
            launchVariant8<F, 1, 4>(w, scales, scaleCols, blockCols, n, k, x, lo, y, accumulate, true, bias, s);
        else
            launchVariant8<F, 1, 2>(w, scales, scaleCols, blockCols, n, k, x, lo, y, accumulate, vectorized, bias, s);
    };
    if (format == Weight8::E4M3) launch(std::integral_constant<Weight8, Weight8::E4M3>{});
    else launch(std::integral_constant<Weight8, Weight8::Int8>{});
}

void launchDequant8(Weight8 format, const std::uint8_t* w, const float* scales, int scaleCols, int blockCols, int rows, int k,
                    bf16* hi, bf16* lo, cudaStream_t s) {
    const long count = static_cast<long>(rows) * k;
    if (format == Weight8::E4M3)
        dequant8Kernel<Weight8::E4M3><<<gridFor(count), 256, 0, s>>>(w, scales, scaleCols, blockCols, count, k, hi, lo);
    else
        dequant8Kernel<Weight8::Int8><<<gridFor(count), 256, 0, s>>>(w, scales, scaleCols, blockCols, count, k, hi, lo);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchSumQuadrants(const float* p, int ldp, int tokens, int n, int wHalves, int xHalves, const float* rowScales, float* y,
                        int ldy, bool accumulate, cudaStream_t s) {
    const long count = static_cast<long>(tokens) * n;
    sumQuadrantsKernel<<<gridFor(count), 256, 0, s>>>(p, ldp, tokens, n, wHalves, xHalves, rowScales, y, ldy, accumulate);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tandem::cuda
