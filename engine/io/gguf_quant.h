#pragma once
// The tensor types of GGUF files (ggml's type ids), their block sizes, and dequantization of the
// block-quantized ones Tandem reads: Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_XS and MXFP4. A block holds 32 or
// 256 consecutive values of one row with the scales they share; io/gguf_quant.cpp describes each.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "io/dtype.h"

namespace tandem::io {

struct GgmlType {
    std::uint32_t id;
    std::string_view name;
    std::uint32_t blockValues;
    std::uint32_t blockBytes;
    std::optional<DType> dtype;  // nullopt: a type whose layout is known but that Tandem cannot dequantize
};

// nullptr for an id this build does not know at all (its size is unknown, so the file cannot be read).
const GgmlType* ggmlType(std::uint32_t id);

// The type names Tandem dequantizes, for messages ("F32, F16, BF16, Q8_0, ...").
std::string_view supportedGgmlTypes();

// Writes `count` values of a block-quantized `type` (count a multiple of its block) from src to out.
void dequantizeBlocks(DType type, const std::byte* src, std::int64_t count, float* out);

}  // namespace tandem::io
