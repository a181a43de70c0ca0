#include "cuda/gemm.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "cuda/cuda_check.h"

namespace tandem::cuda {

// cuBLAS is column-major: a row-major [rows, cols] matrix is its column-major transpose. So
// y = W x (row-major) is yᵀ = Wᵀ-view... written below as C[n, tokens] = op(A) B with A the weight.

void gemmBf16(cublasHandle_t h, const bf16* w, int n, int k, const bf16* x, int ldx, int tokens, float* y, int ldy,
              float beta) {
    const float alpha = 1.0f;
    TANDEM_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, tokens, k, &alpha, w, CUDA_R_16BF, k, x, CUDA_R_16BF,
                                     ldx, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm8(cublasHandle_t h, cudaStream_t s, Weight8 format, const std::uint8_t* w, const float* scales, int scaleCols,
           int blockCols, int n, int k, const bf16* x, int ldx, int tokens, bool split, float* y, int ldy, bool accumulate,
           const Fp8Scratch& scratch) {
    // Weight rows widened to hi (and lo: FP8 x scale does not fit bf16; an int8 weight does, its row scale
    // multiplying the sums); inputs hi (and lo).
    const bool int8 = format == Weight8::Int8;
    const int xHalves = split ? 2 : 1, wHalves = split && !int8 ? 2 : 1;
    const std::size_t perRow = sizeof(bf16) * static_cast<std::size_t>(wHalves) * static_cast<std::size_t>(k);
    // The products hold 2 x maxChunkRows columns for FP8's two weight halves; int8's one half takes twice
    // the rows a chunk (a Qwen3 qkv of 5120 rows in one chunk instead of two).
    const int maxRows = wHalves == 1 ? 2 * scratch.maxChunkRows : scratch.maxChunkRows;
    const int chunk = static_cast<int>(std::min<std::size_t>(scratch.rowsBytes / perRow, maxRows));
    if (chunk < 1) throw GpuError("the 8-bit weights' scratch buffer cannot hold one row of " + std::to_string(k) + " columns");
    for (int r0 = 0; r0 < n; r0 += chunk) {
        const int rows = std::min(chunk, n - r0);
        const float* chunkScales = scales + static_cast<long>(r0) * scaleCols;
        launchDequant8(format, w + static_cast<long>(r0) * k, int8 ? nullptr : chunkScales, scaleCols, blockCols, rows, k,
                       scratch.rows, wHalves == 2 ? scratch.rows + static_cast<long>(rows) * k : nullptr, s);
        gemmBf16(h, scratch.rows, wHalves * rows, k, x, ldx, xHalves * tokens, scratch.products, wHalves * rows);
        launchSumQuadrants(scratch.products, wHalves * rows, tokens, rows, wHalves, xHalves, int8 ? chunkScales : nullptr,
                           y + r0, ldy, accumulate, s);
    }
}

void gemmF32(cublasHandle_t h, const float* w, int n, int k, const float* x, int ldx, int tokens, float* y, int ldy) {
    const float alpha = 1.0f, beta = 0.0f;
    TANDEM_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, tokens, k, &alpha, w, CUDA_R_32F, k, x, CUDA_R_32F,
                                     ldx, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template <class Out>
void gemmBatchedBf16(cublasHandle_t h, bool transposed, const bf16* w, int ldw, long wStride, int n, int k,
                     const bf16* x, int ldx, long xStride, int tokens, Out* y, int ldy, long yStride, int batch,
                     float beta) {
    const float alpha = 1.0f;
    constexpr cudaDataType outType = std::is_same_v<Out, float> ? CUDA_R_32F : CUDA_R_16BF;
    // Row-major W [n, k] is column-major [k, n]: op T gives n x k. Row-major [k, n] is column-major
    // [n, k]: op N.
    TANDEM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, transposed ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, n, tokens, k,
                                                   &alpha, w, CUDA_R_16BF, ldw, wStride, x, CUDA_R_16BF, ldx, xStride,
                                                   &beta, y, outType, ldy, yStride, batch, CUBLAS_COMPUTE_32F,
                                                   CUBLAS_GEMM_DEFAULT));
}

template void gemmBatchedBf16<float>(cublasHandle_t, bool, const bf16*, int, long, int, int, const bf16*, int, long, int,
                                     float*, int, long, int, float);
template void gemmBatchedBf16<bf16>(cublasHandle_t, bool, const bf16*, int, long, int, int, const bf16*, int, long, int,
                                    bf16*, int, long, int, float);

}  // namespace tandem::cuda
