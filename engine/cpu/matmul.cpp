#include "cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "cpu/ops.h"

namespace tandem::cpu {

void matmul(const WeightMatrix& w, const float* x, std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy,
            ThreadPool& pool) {
    const auto cols = static_cast<std::size_t>(w.cols);
    // Enough rows per chunk that a chunk's work (rows * cols * tokens) dwarfs the scheduling cost.
    const std::size_t grain = std::max<std::size_t>(1, 16384 / std::max<std::size_t>(1, cols * tokens));
    pool.parallelFor(static_cast<std::size_t>(w.rows), grain, [&](std::size_t begin, std::size_t end) {
        thread_local std::vector<float> row;
        row.resize(cols);
        for (std::size_t r = begin; r < end; ++r) {
            w.dequantRow(static_cast<std::int64_t>(r), row.data());
            for (std::size_t t = 0; t < tokens; ++t) y[t * ldy + r] = dot(row.data(), x + t * ldx, cols);
        }
    });
}

}  // namespace tandem::cpu
