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
// equal bytes. MXFP4 rounds each group to nearest: the smallest power-of-two scale that takes the
// group's largest magnitude to at most 6, then each value to the nearest e2m1 (ties to even). dst must be 64-byte aligned. Safe to call from several threads for different dst.
// Throws tandem::Error if a weight is NaN or infinite.
void packExpert(const ExpertLayout& layout, const ExpertRows& rows, std::byte* dst);

// The same from checkpoint matrices of any type (bf16, f16, f32, FP8 with block scales); their shapes
// must be gate/up [inter, hidden] and down [hidden, inter].
void packExpert(const ExpertLayout& layout, const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                std::byte* dst);

// One matrix of an expert in the checkpoint's MXFP4 form (gpt-oss's `*_blocks` and `*_scales`, see
// io/expert_layout.h): row r's group g (inputs 32g..32g+31) is the 16 bytes at
// blocks + r * blockRowStride + 16 * g, input 32g + 2b in the low nibble of byte b and 32g + 2b + 1 in
// its high nibble, and its E8M0 scale is the byte scales[r * scaleRowStride + g]. Strides are in bytes,
// so gpt-oss's interleaved gate_up_proj (row 2i gate row i, row 2i + 1 up row i) is two matrices:
// for expert e of gate_up_proj_blocks [E, 2I, H/32, 16] and gate_up_proj_scales [E, 2I, H/32],
//   gate = {blocks + e*2I*H/2,       H,  scales + e*2I*H/32,        2*H/32, I, H}
//   up   = {blocks + e*2I*H/2 + H/2, H,  scales + e*2I*H/32 + H/32, 2*H/32, I, H}
// and down_proj_blocks [E, H, I/32, 16], down_proj_scales [E, H, I/32]:
//   down = {blocks + e*H*I/2, I/2, scales + e*H*I/32, I/32, H, I}
struct Mxfp4Matrix {
    const std::uint8_t* blocks = nullptr;
    std::size_t blockRowStride = 0;
    const std::uint8_t* scales = nullptr;
    std::size_t scaleRowStride = 0;
    int rows = 0, cols = 0;  // cols: a multiple of 32
};

// Packs one expert straight from MXFP4 into an ExpertType::MXFP4 layout, bit-exact: unpackExpertRow
// gives back the checkpoint's values exactly. Same contract as packExpert (dst 64-byte aligned,
// expertBytes written, padding zeroed). Throws tandem::Error if the layout is not MXFP4, a shape
// differs from gate/up [inter, hidden] and down [hidden, inter], a dimension is not a multiple of 32,
// or a scale byte is 255 (E8M0's NaN).
void packExpertMxfp4(const ExpertLayout& layout, const Mxfp4Matrix& gate, const Mxfp4Matrix& up, const Mxfp4Matrix& down,
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
