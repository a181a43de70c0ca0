#pragma once
// A 2-D weight as it lies in the checkpoint (row-major, [rows, cols] = [out, in]), read in place from
// the memory mapping. FP8 weights carry one float32 scale per block of blockRows x blockCols values
// (DeepSeek-V3's weight_scale_inv); blocks at the right and bottom edges may be partial. I8 weights
// (cpu/dense/quantize_dense.h) carry one float32 scale per row.
#include <cstddef>
#include <cstdint>

#include "io/dtype.h"

namespace tandem::cpu {

class PackedMatrix;

struct WeightMatrix {
    io::DType dtype = io::DType::F32;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    const std::byte* data = nullptr;  // row 0 of the whole tensor
    std::int64_t firstRow = 0;        // this view's row 0 inside the whole tensor

    const float* blockScales = nullptr;  // [ceil(totalRows / blockRows), scaleCols], FP8 only
    std::int64_t scaleCols = 0;
    int blockRows = 128;
    int blockCols = 128;

    const float* rowScales = nullptr;  // I8 only (dense weights quantized at load): one per row of the tensor
    // E2M1 only (an MXFP4 tensor, io/dtype.h): the E8M0 scale bytes, cols / 32 per row of the tensor, each
    // 2^(e - 127); and the tensor rows from one row of this view to the next (gpt-oss interleaves its
    // experts' gate and up rows: 2), `data` and `e8m0` then pointing at this view's first row.
    const std::uint8_t* e8m0 = nullptr;
    std::int64_t rowStride = 1;
    // I4 only (compressed-tensors int4, io/compressed_tensors.h): the bf16 scale of each group of
    // io::kPackedInt4Group inputs, cols / 32 per row of the tensor, as the checkpoint stores them.
    const std::uint16_t* int4Scales = nullptr;
    // Packed for the expert kernels (--dense int4, cpu/dense/packed_matrix.h): the whole matrix, which
    // then replaces `data` (a view with firstRow 0 and every row).
    const PackedMatrix* packed = nullptr;

    // Writes row r (of this view) as float32 into out[0, cols).
    void dequantRow(std::int64_t r, float* out) const;

    // Rows [first, first + count) of this view, sharing the data.
    WeightMatrix rowSlice(std::int64_t first, std::int64_t count) const;
};

}  // namespace tandem::cpu
