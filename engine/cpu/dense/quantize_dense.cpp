#include "cpu/dense/quantize_dense.h"

#include <algorithm>
#include <cmath>

namespace tandem::cpu {

WeightMatrix quantizeRowsInt8(const WeightMatrix& m, std::vector<std::int8_t>& values, std::vector<float>& scales,
                              ThreadPool& pool) {
    const auto rows = static_cast<std::size_t>(m.rows), cols = static_cast<std::size_t>(m.cols);
    values.resize(rows * cols);
    scales.resize(rows);
    pool.parallelFor(rows, 16, [&](std::size_t r0, std::size_t r1) {
        std::vector<float> row(cols);
        for (std::size_t r = r0; r < r1; ++r) {
            m.dequantRow(static_cast<std::int64_t>(r), row.data());
            float absMax = 0.0f;
            for (const float v : row) absMax = std::max(absMax, std::fabs(v));
            const float scale = absMax / 127.0f;
            const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
            std::int8_t* out = values.data() + r * cols;
            for (std::size_t c = 0; c < cols; ++c)
                out[c] = static_cast<std::int8_t>(std::clamp(std::lround(row[c] * inv), -127L, 127L));
            scales[r] = scale;
        }
    });
    WeightMatrix q;
    q.dtype = io::DType::I8;
    q.rows = m.rows;
    q.cols = m.cols;
    q.data = reinterpret_cast<const std::byte*>(values.data());
    q.rowScales = scales.data();
    return q;
}

}  // namespace tandem::cpu
