#include "cpu/dense/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/dense/dense_avx512.h"
#include "cpu/dense/dense_int8_amx.h"
#include "cpu/dense/packed_matrix.h"
#include "cpu/dense/ops.h"
#include "cpu/kernels/activation_quant.h"

namespace tandem::cpu {
namespace {

// With several tokens, rows are dequantized in blocks: each token's activations then meet all of them
// while they are in cache, instead of every row streaming all tokens' activations again. With one or
// two (decode) a single row in L1 is faster: measured 6.1 against 4.6 tok/s for blocks of 16
// (deepseek-v2-lite on the CPU, TANDEM_CPU_ISA=avx2).
constexpr std::size_t kBlockRows = 8;
constexpr std::size_t kBlockFromTokens = 4;

}  // namespace

void matmul(const WeightMatrix& w, const float* x, std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy,
            ThreadPool& pool) {
    if (w.packed && w.firstRow == 0 && w.rows == w.packed->rows()) {  // a slice takes the general path below
        w.packed->multiply(x, ldx, tokens, y, ldy, pool);
        return;
    }
    const auto cols = static_cast<std::size_t>(w.cols);
    // Enough rows per chunk that a chunk's work (rows * cols * tokens) dwarfs the scheduling cost.
    const std::size_t grain = std::max<std::size_t>(4, 16384 / std::max<std::size_t>(1, cols * tokens));
    if (w.dtype == io::DType::BF16 && selectedIsa() >= Isa::Avx512) {
        const auto* rows = reinterpret_cast<const std::uint16_t*>(w.data) + static_cast<std::size_t>(w.firstRow) * cols;
        pool.parallelFor(static_cast<std::size_t>(w.rows), grain, [&](std::size_t begin, std::size_t end) {
            denseBf16Avx512(rows, cols, begin, end, x, ldx, tokens, y, ldy);
        });
        return;
    }
    if (w.dtype == io::DType::I8 && selectedIsa() >= Isa::Avx2) {
        // The activations in int8 too (as the int8 experts take them), for VNNI's (or AVX2's) integer products.
        const std::size_t padded = (cols + 63) / 64 * 64;
        thread_local std::vector<std::int8_t> q;
        thread_local std::vector<float> scales;
        thread_local std::vector<std::int32_t> sums, groupSums;
        q.resize(tokens * padded);
        scales.resize(tokens);
        sums.resize(tokens);
        groupSums.resize(padded / 32);
        for (std::size_t t = 0; t < tokens; ++t) {
            activationToInt8(x + t * ldx, static_cast<int>(cols), static_cast<int>(padded), q.data() + t * padded, &scales[t],
                             groupSums.data());
            std::int32_t total = 0;
            for (const std::int32_t g : groupSums) total += g;
            sums[t] = total;
        }
        const Int8Rows xq{q.data(), padded, scales.data(), sums.data()};
        const auto* rows = reinterpret_cast<const std::int8_t*>(w.data) + static_cast<std::size_t>(w.firstRow) * cols;
        const float* rowScales = w.rowScales + w.firstRow;
        if (selectedIsa() == Isa::Amx && denseInt8AmxServes(cols, tokens)) {
            // A prompt on AMX: the activations packed into B tiles once for every thread, each thread's rows
            // in blocks of 32 (two A tiles).
            struct Free {
                void operator()(std::int8_t* p) const { std::free(p); }
            };
            thread_local std::unique_ptr<std::int8_t, Free> packed;
            thread_local std::size_t capacity = 0;
            const std::size_t bytes = int8AmxPackedBytes(cols, tokens);
            if (capacity < bytes) {
                packed.reset(static_cast<std::int8_t*>(std::aligned_alloc(64, bytes)));
                if (!packed) throw std::bad_alloc();
                capacity = bytes;
            }
            packInt8ForAmx(xq, cols, tokens, packed.get());
            // Plain pointers for the workers: inside the lambda a thread_local names the worker's own.
            const std::int8_t* tiles = packed.get();
            const float* tokenScales = scales.data();
            pool.parallelFor(static_cast<std::size_t>(w.rows), 32, [&](std::size_t begin, std::size_t end) {
                denseInt8AmxPacked(rows, rowScales, cols, begin, end, tiles, tokenScales, tokens, y, ldy);
            });
            return;
        }
        pool.parallelFor(static_cast<std::size_t>(w.rows), grain, [&](std::size_t begin, std::size_t end) {
            if (selectedIsa() >= Isa::Avx512) denseInt8Avx512(rows, rowScales, cols, begin, end, xq, tokens, y, ldy);
            else denseInt8Avx2(rows, rowScales, cols, begin, end, xq, tokens, y, ldy);
        });
        return;
    }
    const std::size_t blockRows = tokens >= kBlockFromTokens ? kBlockRows : 1;
    pool.parallelFor(static_cast<std::size_t>(w.rows), grain, [&](std::size_t begin, std::size_t end) {
        thread_local std::vector<float> block;
        block.resize(blockRows * cols);
        for (std::size_t r0 = begin; r0 < end; r0 += blockRows) {
            const std::size_t n = std::min(blockRows, end - r0);
            for (std::size_t i = 0; i < n; ++i) w.dequantRow(static_cast<std::int64_t>(r0 + i), block.data() + i * cols);
            for (std::size_t t = 0; t < tokens; ++t)
                for (std::size_t i = 0; i < n; ++i) y[t * ldy + r0 + i] = dot(block.data() + i * cols, x + t * ldx, cols);
        }
    });
}

}  // namespace tandem::cpu
