#pragma once
// The large matrix products, through cuBLAS with float32 accumulation. Weights are row-major
// [out, in] as in the checkpoint; activations are row-major [tokens, features].
#include <cublas_v2.h>

#include "cuda/kernels.h"

namespace tandem::cuda {

// y[t, :] = beta * y[t, :] + W x[t, :]   (W bf16 [n, k], x bf16 [tokens, k], y f32 [tokens, n])
void gemmBf16(cublasHandle_t h, const bf16* w, int n, int k, const bf16* x, int ldx, int tokens, float* y, int ldy,
              float beta = 0.0f);

// The same for 8-bit weights W [n, k] (kernels.h's launchGemv8: FP8 e4m3 with scales [n, scaleCols] per
// row and block of blockCols columns, or int8 with a scale per row) and a split input of `tokens` rows
// (hi rows, then with split the lo rows ldx * tokens further): a chunk of W's rows at a time is widened to
// bf16 hi (and, for FP8 with split, lo) rows in scratch.rows, multiplied by cuBLAS into
// scratch.products and the products summed into y (fp8.cu). y = W x, or += with accumulate.
struct Fp8Scratch {
    bf16* rows = nullptr;
    std::size_t rowsBytes = 0;
    float* products = nullptr;  // [2 * tokens, 2 * maxChunkRows]
    int maxChunkRows = 0;
};
void gemm8(cublasHandle_t h, cudaStream_t s, Weight8 format, const std::uint8_t* w, const float* scales, int scaleCols,
           int blockCols, int n, int k, const bf16* x, int ldx, int tokens, bool split, float* y, int ldy, bool accumulate,
           const Fp8Scratch& scratch);

// The same in float32 (the router, whose choice must not depend on bf16 rounding): float32 products and
// sums (CUBLAS_COMPUTE_32F, no TF32), not the pedantic mode, whose kernels took ~0.9 ms a layer for the
// router of a 2048-token chunk on the H200.
void gemmF32(cublasHandle_t h, const float* w, int n, int k, const float* x, int ldx, int tokens, float* y, int ldy);

// For each of `batch` heads b: y_b[t, :] = W_b x_b[t, :] or W_bᵀ x_b[t, :]. Heads' weights are `wStride`
// elements apart, their inputs `xStride`, their outputs `yStride`; row strides are ldw, ldx, ldy.
// W_b is row-major [n, k] (transposed: false) or [k, n] (transposed: true).
// beta = 1 adds to y.
template <class Out>
void gemmBatchedBf16(cublasHandle_t h, bool transposed, const bf16* w, int ldw, long wStride, int n, int k,
                     const bf16* x, int ldx, long xStride, int tokens, Out* y, int ldy, long yStride, int batch,
                     float beta = 0.0f);

}  // namespace tandem::cuda
