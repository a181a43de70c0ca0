#pragma once
// A dense product packed for the expert kernels (--dense int4 on the CPU path): the matrix [rows, cols]
// is laid out as the down projection of an expert whose hidden size is `rows` and intermediate size
// `cols` (io/expert_layout.h), and only that part is held. Its products then run on the same kernels as
// the routed experts (cpu/kernels/expert_kernels.h): AVX2, AVX-512 VNNI and AMX, GEMV for decode and
// GEMM for prompts, with int4 in groups of 32 inputs and an fp16 scale each.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cpu/packed_format.h"
#include "cpu/pool/thread_pool.h"
#include "cpu/weight_matrix.h"

namespace tandem::cpu {

class PackedMatrix {
public:
    // Packs `m` (any type dequantRow reads); INT8 or INT4. Throws tandem::Error for a weight that is NaN
    // or infinite.
    PackedMatrix(ExpertType type, const WeightMatrix& m, ThreadPool& pool);

    const ExpertLayout& layout() const { return layout_; }
    std::int64_t rows() const { return layout_.hidden; }
    std::int64_t cols() const { return layout_.inter; }
    std::size_t bytes() const { return bytes_; }
    // The first byte of chunk 0 (what DownCall::chunks takes for firstChunk 0), and INT8's row scales.
    const std::byte* chunks() const { return data_.get(); }
    const float* rowScales() const;

    // Row r as the kernels see it (quantized, then dequantized) into out[0, cols).
    void dequantRow(std::int64_t r, float* out) const;

    // y[t * ldy + r] = Σ_c W[r, c] · x[t * ldx + c] for every row, on the selected CPU's expert kernels.
    void multiply(const float* x, std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy, ThreadPool& pool) const;

private:
    struct Free {
        void operator()(std::byte* p) const { std::free(p); }
    };
    ExpertLayout layout_;
    std::size_t bytes_ = 0;  // of the down part: its chunks, then INT8's row scales
    std::unique_ptr<std::byte, Free> data_;
};

}  // namespace tandem::cpu
