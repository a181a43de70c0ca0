#include "cpu/dense/quantize_dense.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::cpu {

float quantizeRowInt8(const float* row, std::size_t cols, std::int8_t* out) {
    float absMax = 0.0f;
    bool finite = true;
    for (std::size_t c = 0; c < cols; ++c) {
        absMax = std::max(absMax, std::fabs(row[c]));
        finite = finite && std::isfinite(row[c]);
    }
    const float scale = absMax / 127.0f;
    const float inv = scale > 0.0f && finite ? 1.0f / scale : 0.0f;
    for (std::size_t c = 0; c < cols; ++c)
        out[c] = static_cast<std::int8_t>(std::clamp(std::nearbyint(row[c] * inv), -127.0f, 127.0f));
    // A damaged row (NaN or infinity) stays visible: its products come out NaN, which the session
    // reports as non-finite logits, as it would in bf16.
    return finite ? scale : std::numeric_limits<float>::quiet_NaN();
}

WeightMatrix quantizeRowsInt8(const WeightMatrix& m, std::vector<std::int8_t>& values, std::vector<float>& scales,
                              ThreadPool& pool) {
    const auto rows = static_cast<std::size_t>(m.rows), cols = static_cast<std::size_t>(m.cols);
    values.resize(rows * cols);
    scales.resize(rows);
    pool.parallelFor(rows, 16, [&](std::size_t r0, std::size_t r1) {
        std::vector<float> row(cols);
        for (std::size_t r = r0; r < r1; ++r) {
            m.dequantRow(static_cast<std::int64_t>(r), row.data());
            scales[r] = quantizeRowInt8(row.data(), cols, values.data() + r * cols);
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
