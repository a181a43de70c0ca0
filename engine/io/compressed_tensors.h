#pragma once
// Weights quantized by compressed-tensors (the format of llm-compressor and vLLM) in its "pack-quantized"
// form, as Kimi-K2-Thinking ships its routed experts: config.json's quantization_config has quant_method
// "compressed-tensors", format "pack-quantized" and one config group whose weights are 4-bit symmetric
// integers with one scale per group of 32 inputs; its `ignore` list names what stays bf16.
//
// A quantized Linear X is stored as three tensors in place of X.weight:
//   X.weight_packed  I32 [out, in / 8]: 8 values per little-endian int32, value i in bits 4i..4i+3,
//                    each stored as q + 8 (q in [-8, 7]); so byte k / 2 of a row holds input k, in its low
//                    nibble when k is even;
//   X.weight_scale   BF16 [out, in / 32]: the scale of each group of 32 inputs;
//   X.weight_shape   I32 or I64 [2]: {out, in}.
// The weight is q * scale. Tandem's INT4 expert type (io/expert_layout.h) is the same arithmetic, w = (n - 8)
// * scale with an fp16 scale, so such experts are repacked nibble for nibble (cpu/int4_repack.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/tensor_lookup.h"

namespace tandem::io {

// The one group size read: Tandem's INT4 group (io::kInt4Group).
inline constexpr int kPackedInt4Group = 32;

// A quantization_config of quant_method "compressed-tensors", checked.
struct CompressedTensorsScheme {
    int groupSize = kPackedInt4Group;
    std::vector<std::string> ignore;  // the modules left unquantized (names or "re:" patterns), as written
};

// Reads quantization_config `q`; throws tandem::Error naming `where` and what is unsupported for any other
// scheme: another format, bit width, type, group size or strategy, asymmetric weights, quantized
// activations or several config groups.
CompressedTensorsScheme parseCompressedTensors(const nlohmann::json& q, const std::string& where);

// "X.weight" -> "X.weight_packed" (and _scale, _shape).
std::string packedInt4Name(const std::string& weightName, const char* part);
// Whether `weightName` ("X.weight") is stored as compressed-tensors int4: X.weight_packed in place of X.weight.
bool isPackedInt4(const TensorLookup& tensors, const std::string& weightName);

// One packed matrix, in place in the mapping.
struct PackedInt4View {
    const std::byte* packed = nullptr;     // rows x cols / 2 bytes
    const std::uint16_t* scales = nullptr;  // bf16, rows x cols / kPackedInt4Group
    std::int64_t rows = 0, cols = 0;
};

// The three tensors of `weightName`, checked against the expected [rows, cols]; throws tandem::Error naming
// the tensor and the problem (a part missing, a wrong type or shape, a width that is no multiple of 32).
PackedInt4View viewPackedInt4(const TensorLookup& tensors, const std::string& weightName, std::int64_t rows,
                              std::int64_t cols);

// Input k of a packed row as q in [-8, 7].
inline int packedInt4Value(const std::byte* row, std::int64_t k) {
    const auto b = static_cast<std::uint8_t>(row[k / 2]);
    return ((k & 1) ? b >> 4 : b & 0xf) - 8;
}

// A row of `cols` values (cols a multiple of 32) with its cols / 32 bf16 scales, as float32: q * scale.
void dequantizePackedInt4Row(const std::byte* row, const std::uint16_t* scales, std::int64_t cols, float* out);

}  // namespace tandem::io
