#pragma once
// Simple quantizers for the tests, one per GGUF type Tandem reads: each writes rows of floats in the
// type's block layout (io/gguf_quant.cpp describes them) with plain round-to-nearest scales -- enough
// to make quantized files of the fixtures, not llama.cpp's error-minimizing search.
#include <QByteArray>
#include <cstdint>
#include <span>

namespace tandem::test {

// ggml type ids.
enum GgmlTypeId : std::uint32_t {
    kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kIQ4_XS = 23, kBF16 = 30,
    kMXFP4 = 39,  // no quantizer here: the fixture writer re-blocks gpt-oss's MXFP4 experts as they are
};

const char* ggmlTypeName(std::uint32_t type);
// Values per block of the type (1 for the float types).
int ggmlBlockValues(std::uint32_t type);
// `values` (a whole number of rows, each a multiple of the block) in the type's layout.
QByteArray quantize(std::uint32_t type, std::span<const float> values);

}  // namespace tandem::test
