#pragma once
// The large matrix products, through cuBLAS with float32 accumulation. Weights are row-major
// [out, in] as in the checkpoint; activations are row-major [tokens, features].
#include <cublas_v2.h>

#include "cuda/kernels.h"

namespace tandem::cuda {

// y[t, :] = beta * y[t, :] + W x[t, :]   (W bf16 [n, k], x bf16 [tokens, k], y f32 [tokens, n])
void gemmBf16(cublasHandle_t h, const bf16* w, int n, int k, const bf16* x, int ldx, int tokens, float* y, int ldy,
              float beta = 0.0f);

// The same in float32 (the router, whose choice must not depend on bf16 rounding).
void gemmF32(cublasHandle_t h, const float* w, int n, int k, const float* x, int ldx, int tokens, float* y, int ldy);

// For each of `batch` heads b: y_b[t, :] = W_b x_b[t, :] or W_bᵀ x_b[t, :]. Heads' weights are `wStride`
// elements apart, their inputs `xStride`, their outputs `yStride`; row strides are ldw, ldx, ldy.
// W_b is row-major [n, k] (transposed: false) or [k, n] (transposed: true).
template <class Out>
void gemmBatchedBf16(cublasHandle_t h, bool transposed, const bf16* w, int ldw, long wStride, int n, int k,
                     const bf16* x, int ldx, long xStride, int tokens, Out* y, int ldy, long yStride, int batch);

}  // namespace tandem::cuda
