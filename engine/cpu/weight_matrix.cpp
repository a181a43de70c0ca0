#include "cpu/weight_matrix.h"

#include <cstring>

#include "cpu/dense/packed_matrix.h"
#include "io/compressed_tensors.h"
#include "io/gguf_quant.h"

namespace tandem::cpu {

void WeightMatrix::dequantRow(std::int64_t r, float* out) const {
    if (packed) {
        packed->dequantRow(firstRow + r, out);
        return;
    }
    const std::int64_t row = firstRow + r;
    if (dtype == io::DType::E2M1) {
        const std::int64_t tensorRow = row * rowStride;
        io::dequantizeMxfp4Row(data + static_cast<std::size_t>(tensorRow * (cols / 2)), e8m0 + tensorRow * (cols / 32), cols, out);
        return;
    }
    if (dtype == io::DType::I4) {
        io::dequantizePackedInt4Row(data + static_cast<std::size_t>(row) * io::dtypeRowBytes(dtype, cols),
                                    int4Scales + row * (cols / io::kPackedInt4Group), cols, out);
        return;
    }
    const std::byte* src = data + static_cast<std::size_t>(row) * io::dtypeRowBytes(dtype, cols);
    switch (dtype) {
    case io::DType::F32: std::memcpy(out, src, static_cast<std::size_t>(cols) * sizeof(float)); return;
    case io::DType::BF16:
        for (std::int64_t c = 0; c < cols; ++c) {
            std::uint16_t b;
            std::memcpy(&b, src + 2 * c, 2);
            out[c] = io::bf16ToFloat(b);
        }
        return;
    case io::DType::F16:
        for (std::int64_t c = 0; c < cols; ++c) {
            std::uint16_t b;
            std::memcpy(&b, src + 2 * c, 2);
            out[c] = io::f16ToFloat(b);
        }
        return;
    case io::DType::I8: {
        const auto* values = reinterpret_cast<const std::int8_t*>(src);
        const float s = rowScales[row];
        for (std::int64_t c = 0; c < cols; ++c) out[c] = static_cast<float>(values[c]) * s;
        return;
    }
    case io::DType::F8_E4M3: {
        const float* scales = blockScales + (row / blockRows) * scaleCols;
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(src);
        for (std::int64_t c0 = 0; c0 < cols; c0 += blockCols) {
            const float s = scales[c0 / blockCols];
            const std::int64_t c1 = c0 + blockCols < cols ? c0 + blockCols : cols;
            for (std::int64_t c = c0; c < c1; ++c) out[c] = io::kF8E4M3ToFloat[bytes[c]] * s;
        }
        return;
    }
    default: io::dequantizeBlocks(dtype, src, cols, out); return;
    }
}

WeightMatrix WeightMatrix::rowSlice(std::int64_t first, std::int64_t count) const {
    WeightMatrix m = *this;
    m.firstRow = firstRow + first;
    m.rows = count;
    return m;
}

}  // namespace tandem::cpu
