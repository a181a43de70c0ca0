#pragma once
// Routed experts as a checkpoint holds them, into the packed layout (io/expert_layout.h). A checkpoint whose
// experts are compressed-tensors int4 (io/compressed_tensors.h: Kimi-K2-Thinking) holds exactly what the
// INT4 type holds, a 4-bit value q + 8 per weight and a scale per group of 32 inputs; for INT4 such an
// expert is repacked nibble for nibble, with each bf16 scale as the equal fp16, no float round trip. Every
// other case quantizes float32 rows (cpu/expert_pack.h).
#include <cstddef>
#include <cstdint>

#include "cpu/packed_format.h"
#include "cpu/weight_matrix.h"

namespace tandem::cpu {

// Whether packCheckpointExpert repacks this expert bit for bit: an INT4 layout and int4 matrices (io::DType::I4).
bool repacksInt4Exactly(const ExpertLayout& layout, const WeightMatrix& gate, const WeightMatrix& up,
                        const WeightMatrix& down);

// One expert from checkpoint matrices (gate/up [inter, hidden], down [hidden, inter]) into
// dst[0, layout.expertBytes), 64-byte aligned: repacked when repacksInt4Exactly, else packExpert's
// quantization of float32 rows (which also dequantizes int4 matrices for BF16 and INT8). Throws
// tandem::Error for wrong shapes, NaN or infinite values, and for an int4 scale INT4 cannot hold.
void packCheckpointExpert(const ExpertLayout& layout, const WeightMatrix& gate, const WeightMatrix& up,
                          const WeightMatrix& down, std::byte* dst);

// The fp16 scale INT4 stores for a checkpoint's bf16 group scale. Equal to it for every bf16 value of
// magnitude 2^-17 (7.6e-6) to 65280, zero and negative ones included: fp16's normal range and the top of its
// subnormals hold bf16's 8 significant bits. A smaller magnitude is rounded to the nearest fp16 (a
// change below 3e-8, where the group's weights are all below 6.1e-5 in magnitude). Throws tandem::Error for
// NaN, infinity and magnitudes above fp16's 65504 (bf16's next value past 65280 is 65536): such experts
// load as bf16 or int8, which dequantize them.
std::uint16_t int4ScaleAsF16(std::uint16_t bf16Scale);

}  // namespace tandem::cpu
