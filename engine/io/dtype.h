#pragma once
// Element types of checkpoint tensors and their conversion to float32. Besides the safetensors types
// there are the block-quantized types of GGUF files (io/gguf_quant.h): a row of such a type is a run
// of fixed-size blocks, each holding 32 or 256 values with their scales.
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace tandem::io {

enum class DType : std::uint8_t {
    F32, F16, BF16, F8_E4M3, I32, I64, U8, I8, BOOL, F64,
    Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_XS,  // GGUF only
    // GGUF's MXFP4 (ggml type 39, gpt-oss's experts in llama.cpp's files): 17-byte blocks of 32 values, the
    // E8M0 scale byte, then 16 bytes holding value j in the low nibble of byte j and j + 16 in its high one.
    MXFP4,
    // The FP4 (e2m1) values of an MXFP4 tensor as gpt-oss's release stores them (`*_blocks`): 32 values per
    // 16 bytes, value 2b in byte b's low nibble and 2b + 1 in its high one; the E8M0 scales lie in a
    // tensor of their own (`*_scales`), which cpu::WeightMatrix carries beside (e8m0).
    E2M1,
    // Signed 4-bit integers as compressed-tensors' pack-quantized format stores them (`*.weight_packed`,
    // Kimi-K2-Thinking's experts): 8 per little-endian int32, value i in bits 4i..4i+3 as q + 8 (q in
    // [-8, 7]); the group scales lie in a tensor of their own (`*.weight_scale`), which cpu::WeightMatrix
    // carries beside (int4Scales). io/compressed_tensors.h reads them.
    I4,
};

// The safetensors spelling ("BF16", "F8_E4M3", ...); nullopt for a type a safetensors file cannot hold.
std::optional<DType> dtypeFromName(std::string_view name);
std::string_view dtypeName(DType t);
// Bytes of one element, or of one block for the block-quantized types.
std::size_t dtypeSize(DType t);
// Values per block: 1 for the plain types, 32 or 256 for the block-quantized ones.
std::size_t dtypeBlockValues(DType t);
bool isBlockQuantized(DType t);
// Bytes of a row of `cols` values; cols must be a multiple of dtypeBlockValues(t).
inline std::uint64_t dtypeRowBytes(DType t, std::int64_t cols) {
    return static_cast<std::uint64_t>(cols) / dtypeBlockValues(t) * dtypeSize(t);
}

inline float bf16ToFloat(std::uint16_t bits) {
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// float32 -> bf16 with round-to-nearest-even, as the SIMD conversion (vcvtneps2bf16) does, so every
// path sees the same values; a NaN stays a (quiet) NaN of the same sign.
inline std::uint16_t floatToBf16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}

// IEEE binary16 -> binary32, subnormals, infinities and NaN included.
float f16ToFloat(std::uint16_t bits);

// OCP float8 e4m3fn (DeepSeek-V3's weight format): no infinities, 0x7f/0xff are NaN.
extern const std::array<float, 256> kF8E4M3ToFloat;
inline float f8e4m3ToFloat(std::uint8_t bits) { return kF8E4M3ToFloat[bits]; }

// MXFP4 (OCP microscaling, gpt-oss's experts): FP4 e2m1 by nibble (bit 3 the sign: 0, .5, 1, 1.5, 2, 3, 4,
// 6, then the same negative) and the E8M0 group scale 2^(e - 127) (255 is NaN).
extern const std::array<float, 16> kE2M1Values;
float e8m0ToFloat(std::uint8_t e);
// A row of `cols` E2M1 values (cols a multiple of 32) with one E8M0 scale per 32 of them, as float32.
void dequantizeMxfp4Row(const std::byte* nibbles, const std::uint8_t* scales, std::int64_t cols, float* out);

// Loads one value of a plain (unscaled) floating type from possibly unaligned bytes.
float loadAsFloat(DType t, const std::byte* p);

}  // namespace tandem::io
