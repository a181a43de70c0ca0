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

// Down's row panels [q0, q1) alone, into `down` (the expert's byte layout.downOffset: its chunks, then
// INT8's row scales, which end at layout.dataBytes). Panels are independent, so threads may pack
// different ranges at once; `down` must be zeroed first (the padding is not written).
void packDownPanels(const ExpertLayout& layout, const RowReader& down, std::byte* dst, int q0, int q1);

enum class ExpertMatrix { Gate, Up, Down };

// Row `row` of one matrix as the kernels see it (quantized, then dequantized to float32) into
// out[0, cols): cols is hidden for gate/up and inter for down.
void unpackExpertRow(const ExpertLayout& layout, const std::byte* expert, ExpertMatrix matrix, int row, float* out);
// Down's row `row` from its part alone (packDownPanels' dst).
void unpackDownRow(const ExpertLayout& layout, const std::byte* down, int row, float* out);

}  // namespace tandem::cpu
