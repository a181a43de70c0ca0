#pragma once
// Packing one expert's float32 rows into the layout of io/expert_layout.h, and reading packed weights
// back (dequantized) for tests and inspection. This is what a converter calls once per expert.
#include <cstddef>
#include <cstdint>
#include <functional>

#include "cpu/packed_format.h"
#include "cpu/weight_matrix.h"

namespace tandem::cpu {

// Writes row `row` of a matrix as float32 into out[0, cols).
using RowReader = std::function<void(std::int64_t row, float* out)>;

// gate and up: [inter, hidden]; down: [hidden, inter] (rows are outputs, as in Hugging Face checkpoints).
struct ExpertRows {
    RowReader gate, up, down;
};

// Writes one expert into dst[0, layout.expertBytes), padding included (zeroed), so equal inputs give
// equal bytes. dst must be 64-byte aligned. Safe to call from several threads for different dst.
// Throws tandem::Error if a weight is NaN or infinite.
void packExpert(const ExpertLayout& layout, const ExpertRows& rows, std::byte* dst);

// The same from checkpoint matrices of any type (bf16, f16, f32, FP8 with block scales); their shapes
// must be gate/up [inter, hidden] and down [hidden, inter].
void packExpert(const ExpertLayout& layout, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                std::byte* dst);

enum class ExpertMatrix { Gate, Up, Down };

// Row `row` of one matrix as the kernels see it (quantized, then dequantized to float32) into
// out[0, cols): cols is hidden for gate/up and inter for down.
void unpackExpertRow(const ExpertLayout& layout, const std::byte* expert, ExpertMatrix matrix, int row, float* out);

}  // namespace tandem::cpu
