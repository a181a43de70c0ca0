#include "io/dtype.h"

#include <array>
#include <cmath>
#include <limits>

namespace tandem::io {

namespace {

struct NamedType {
    std::string_view name;
    DType type;
    std::size_t size;                // of an element, or of a block
    std::size_t blockValues = 1;
    bool safetensors = true;         // a type safetensors files may hold
};

// The block layouts of the GGUF types are described in io/gguf_quant.cpp.
constexpr NamedType kTypes[] = {
    {"F32", DType::F32, 4},          {"F16", DType::F16, 2},          {"BF16", DType::BF16, 2},
    {"F8_E4M3", DType::F8_E4M3, 1},  {"I32", DType::I32, 4},          {"I64", DType::I64, 8},
    {"U8", DType::U8, 1},            {"I8", DType::I8, 1},            {"BOOL", DType::BOOL, 1},
    {"F64", DType::F64, 8},          {"Q8_0", DType::Q8_0, 34, 32, false},
    {"Q4_0", DType::Q4_0, 18, 32, false},     {"Q4_K", DType::Q4_K, 144, 256, false},
    {"Q5_K", DType::Q5_K, 176, 256, false},   {"Q6_K", DType::Q6_K, 210, 256, false},
    {"IQ4_XS", DType::IQ4_XS, 136, 256, false}, {"MXFP4", DType::MXFP4, 17, 32, false},
    {"E2M1", DType::E2M1, 16, 32, false},
    {"I4", DType::I4, 4, 8, false},
};

float decodeF8E4M3(std::uint8_t bits) {
    const bool negative = bits & 0x80;
    const int exponent = (bits >> 3) & 0xf;
    const int mantissa = bits & 0x7;
    float value;
    if (exponent == 0xf && mantissa == 0x7)
        value = std::numeric_limits<float>::quiet_NaN();
    else if (exponent == 0)
        value = std::ldexp(static_cast<float>(mantissa) / 8.0f, -6);
    else
        value = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
    return negative ? -value : value;
}

}  // namespace

const std::array<float, 16> kE2M1Values = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                           -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float e8m0ToFloat(std::uint8_t e) {
    return e == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, static_cast<int>(e) - 127);
}

void dequantizeMxfp4Row(const std::byte* nibbles, const std::uint8_t* scales, std::int64_t cols, float* out) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(nibbles);
    for (std::int64_t g = 0; g < cols / 32; ++g) {
        const float s = e8m0ToFloat(scales[g]);
        for (int b = 0; b < 16; ++b) {
            const std::uint8_t v = bytes[g * 16 + b];
            out[g * 32 + 2 * b] = kE2M1Values[v & 15] * s;
            out[g * 32 + 2 * b + 1] = kE2M1Values[v >> 4] * s;
        }
    }
}

namespace {

std::array<float, 256> makeF8Table() {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = decodeF8E4M3(static_cast<std::uint8_t>(i));
    return t;
}

}  // namespace

const std::array<float, 256> kF8E4M3ToFloat = makeF8Table();

std::optional<DType> dtypeFromName(std::string_view name) {
    for (const auto& t : kTypes)
        if (t.name == name && t.safetensors) return t.type;
    return std::nullopt;
}

std::string_view dtypeName(DType type) {
    for (const auto& t : kTypes)
        if (t.type == type) return t.name;
    return "?";
}

std::size_t dtypeSize(DType type) {
    for (const auto& t : kTypes)
        if (t.type == type) return t.size;
    return 0;
}

std::size_t dtypeBlockValues(DType type) {
    for (const auto& t : kTypes)
        if (t.type == type) return t.blockValues;
    return 1;
}

bool isBlockQuantized(DType type) { return dtypeBlockValues(type) > 1; }

float f16ToFloat(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1f;
    const std::uint32_t mantissa = h & 0x3ff;
    float f;
    if (exponent == 0) {
        f = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
        return sign ? -f : f;
    }
    std::uint32_t u;
    if (exponent == 0x1f)
        u = sign | 0x7f800000u | (mantissa << 13);  // inf or NaN
    else
        u = sign | ((exponent + 112) << 23) | (mantissa << 13);
    std::memcpy(&f, &u, sizeof f);
    return f;
}

float loadAsFloat(DType t, const std::byte* p) {
    switch (t) {
    case DType::F32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    case DType::F16: {
        std::uint16_t b;
        std::memcpy(&b, p, 2);
        return f16ToFloat(b);
    }
    case DType::BF16: {
        std::uint16_t b;
        std::memcpy(&b, p, 2);
        return bf16ToFloat(b);
    }
    case DType::F8_E4M3: return kF8E4M3ToFloat[static_cast<std::uint8_t>(*p)];
    default: return std::numeric_limits<float>::quiet_NaN();
    }
}

}  // namespace tandem::io
