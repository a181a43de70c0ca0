#include "cpu/dense/quantize_dense.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
            bool finite = true;
            for (const float v : row) {
                absMax = std::max(absMax, std::fabs(v));
                finite = finite && std::isfinite(v);
            }
            const float scale = absMax / 127.0f;
            const float inv = scale > 0.0f && finite ? 1.0f / scale : 0.0f;
            std::int8_t* out = values.data() + r * cols;
            for (std::size_t c = 0; c < cols; ++c)
                out[c] = static_cast<std::int8_t>(std::clamp(std::nearbyint(row[c] * inv), -127.0f, 127.0f));
            // A damaged row (NaN or infinity) stays visible: its products come out NaN, which the session
            // reports as non-finite logits, as it would in bf16.
            scales[r] = finite ? scale : std::numeric_limits<float>::quiet_NaN();
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
