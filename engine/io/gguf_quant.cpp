#include "io/gguf_quant.h"

#include <cstring>

namespace tandem::io {

namespace {

// ggml's type ids (ggml.h) with the block sizes of the ones a file may hold. Types with a known size
// but no dequantization here can still be parsed and listed; importing them fails with their name.
constexpr GgmlType kTypes[] = {
    {0, "F32", 1, 4, DType::F32},         {1, "F16", 1, 2, DType::F16},
    {2, "Q4_0", 32, 18, DType::Q4_0},     {3, "Q4_1", 32, 20, std::nullopt},
    {6, "Q5_0", 32, 22, std::nullopt},    {7, "Q5_1", 32, 24, std::nullopt},
    {8, "Q8_0", 32, 34, DType::Q8_0},     {9, "Q8_1", 32, 40, std::nullopt},
    {10, "Q2_K", 256, 84, std::nullopt},  {11, "Q3_K", 256, 110, std::nullopt},
    {12, "Q4_K", 256, 144, DType::Q4_K},  {13, "Q5_K", 256, 176, DType::Q5_K},
    {14, "Q6_K", 256, 210, DType::Q6_K},  {15, "Q8_K", 256, 292, std::nullopt},
    {16, "IQ2_XXS", 256, 66, std::nullopt}, {17, "IQ2_XS", 256, 74, std::nullopt},
    {18, "IQ3_XXS", 256, 98, std::nullopt}, {19, "IQ1_S", 256, 50, std::nullopt},
    {20, "IQ4_NL", 32, 18, std::nullopt}, {21, "IQ3_S", 256, 110, std::nullopt},
    {22, "IQ2_S", 256, 82, std::nullopt},  {23, "IQ4_XS", 256, 136, DType::IQ4_XS},
    {24, "I8", 1, 1, std::nullopt},       {25, "I16", 1, 2, std::nullopt},
    {26, "I32", 1, 4, std::nullopt},      {27, "I64", 1, 8, std::nullopt},
    {28, "F64", 1, 8, std::nullopt},      {29, "IQ1_M", 256, 56, std::nullopt},
    {30, "BF16", 1, 2, DType::BF16},      {34, "TQ1_0", 256, 54, std::nullopt},
    {35, "TQ2_0", 256, 66, std::nullopt}, {39, "MXFP4", 32, 17, DType::MXFP4},
};

float half(const std::uint8_t* p) { return f16ToFloat(static_cast<std::uint16_t>(p[0] | p[1] << 8)); }

// Q8_0, 34 bytes: an f16 scale d, then 32 signed bytes q; value = d * q.
void q8_0(const std::uint8_t* b, float* y) {
    const float d = half(b);
    for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(static_cast<std::int8_t>(b[2 + i]));
}

// Q4_0, 18 bytes: an f16 scale d, then 16 bytes of 4-bit q: byte i holds value i in its low nibble
// and value i + 16 in its high one; value = d * (q - 8).
void q4_0(const std::uint8_t* b, float* y) {
    const float d = half(b);
    for (int i = 0; i < 16; ++i) {
        y[i] = d * static_cast<float>((b[2 + i] & 0xf) - 8);
        y[i + 16] = d * static_cast<float>((b[2 + i] >> 4) - 8);
    }
}

// The K-quants' 8 sub-block scales and mins, 6 bits each, packed into 12 bytes: sub-blocks 0-3 keep
// theirs in the low 6 bits of bytes 0-3 (scale) and 4-7 (min); sub-blocks 4-7 have their low 4 bits
// in bytes 8-11 (scale low nibble, min high nibble) and their top 2 bits in the top bits of bytes 0-7.
void scaleAndMin(const std::uint8_t* s, int j, float& scale, float& min) {
    if (j < 4) {
        scale = static_cast<float>(s[j] & 63);
        min = static_cast<float>(s[j + 4] & 63);
    } else {
        scale = static_cast<float>((s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4));
        min = static_cast<float>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// Q4_K, 144 bytes for 256 values: f16 d, f16 dmin, 12 bytes of sub-block scales/mins, 128 bytes of
// 4-bit q. Each 64 values use 32 bytes: the low nibbles are sub-block 2k, the high nibbles 2k + 1;
// value = d * scale * q - dmin * min.
void q4_K(const std::uint8_t* b, float* y) {
    const float d = half(b), dmin = half(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* q = b + 16;
    for (int k = 0; k < 4; ++k, q += 32, y += 64) {
        float s0, m0, s1, m1;
        scaleAndMin(scales, 2 * k, s0, m0);
        scaleAndMin(scales, 2 * k + 1, s1, m1);
        for (int i = 0; i < 32; ++i) {
            y[i] = d * s0 * static_cast<float>(q[i] & 0xf) - dmin * m0;
            y[i + 32] = d * s1 * static_cast<float>(q[i] >> 4) - dmin * m1;
        }
    }
}

// Q5_K, 176 bytes: as Q4_K with a fifth bit per value from 32 bytes qh (after the scales, before the
// nibbles): for the 64 values of step k, bit 2k of qh[i] tops the low nibble and bit 2k + 1 the high.
void q5_K(const std::uint8_t* b, float* y) {
    const float d = half(b), dmin = half(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* qh = b + 16;
    const std::uint8_t* q = b + 48;
    for (int k = 0; k < 4; ++k, q += 32, y += 64) {
        float s0, m0, s1, m1;
        scaleAndMin(scales, 2 * k, s0, m0);
        scaleAndMin(scales, 2 * k + 1, s1, m1);
        for (int i = 0; i < 32; ++i) {
            const int lo = (q[i] & 0xf) | (((qh[i] >> (2 * k)) & 1) << 4);
            const int hi = (q[i] >> 4) | (((qh[i] >> (2 * k + 1)) & 1) << 4);
            y[i] = d * s0 * static_cast<float>(lo) - dmin * m0;
            y[i + 32] = d * s1 * static_cast<float>(hi) - dmin * m1;
        }
    }
}

// Q6_K, 210 bytes: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 signed 8-bit scales (one
// per 16 values), f16 d. Each half of 128 values uses 64 ql and 32 qh bytes: value l + 32m (m = 0..3)
// takes the low or high nibble of ql[l + 32(m % 2)] and bits 2m..2m+1 of qh[l]; value = d * scale *
// (q - 32).
void q6_K(const std::uint8_t* b, float* y) {
    const std::uint8_t* ql = b;
    const std::uint8_t* qh = b + 128;
    const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
    const float d = half(b + 208);
    for (int half128 = 0; half128 < 2; ++half128, ql += 64, qh += 32, scales += 8, y += 128) {
        for (int l = 0; l < 32; ++l) {
            for (int m = 0; m < 4; ++m) {
                const std::uint8_t low = ql[l + 32 * (m % 2)];
                const int q = ((m < 2 ? low & 0xf : low >> 4) | (((qh[l] >> (2 * m)) & 3) << 4)) - 32;
                y[l + 32 * m] = d * static_cast<float>(scales[l / 16 + 2 * m]) * static_cast<float>(q);
            }
        }
    }
}

// IQ4_XS, 136 bytes: f16 d, a 16-bit word of the scales' top 2 bits, 4 bytes of their low 4 bits
// (sub-block j in nibble j % 2 of byte j / 2), 128 bytes of 4-bit indices into a fixed non-linear
// table, laid out per sub-block of 32 like Q4_0; value = d * (scale - 32) * table[index].
constexpr float kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void iq4_xs(const std::uint8_t* b, float* y) {
    const float d = half(b);
    const unsigned high = static_cast<unsigned>(b[2] | b[3] << 8);
    const std::uint8_t* low = b + 4;
    const std::uint8_t* q = b + 8;
    for (int j = 0; j < 8; ++j, q += 16, y += 32) {
        const int scale = static_cast<int>(((low[j / 2] >> (4 * (j % 2))) & 0xf) | (((high >> (2 * j)) & 3) << 4));
        const float dl = d * static_cast<float>(scale - 32);
        for (int i = 0; i < 16; ++i) {
            y[i] = dl * kIq4Values[q[i] & 0xf];
            y[i + 16] = dl * kIq4Values[q[i] >> 4];
        }
    }
}

// MXFP4, 17 bytes: an E8M0 scale byte e, then 16 bytes of FP4 e2m1 codes: byte i holds value i in its low
// nibble and value i + 16 in its high one; value = e2m1 * 2^(e - 127). (ggml's table holds twice the e2m1
// values and halves the scale instead: the same products.)
void mxfp4(const std::uint8_t* b, float* y) {
    const float s = e8m0ToFloat(b[0]);
    for (int i = 0; i < 16; ++i) {
        y[i] = kE2M1Values[b[1 + i] & 0xf] * s;
        y[i + 16] = kE2M1Values[b[1 + i] >> 4] * s;
    }
}

}  // namespace

const GgmlType* ggmlType(std::uint32_t id) {
    for (const auto& t : kTypes)
        if (t.id == id) return &t;
    return nullptr;
}

std::string_view supportedGgmlTypes() { return "F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_XS, MXFP4"; }

void dequantizeBlocks(DType type, const std::byte* src, std::int64_t count, float* out) {
    void (*block)(const std::uint8_t*, float*) = nullptr;
    switch (type) {
    case DType::Q8_0: block = q8_0; break;
    case DType::Q4_0: block = q4_0; break;
    case DType::Q4_K: block = q4_K; break;
    case DType::Q5_K: block = q5_K; break;
    case DType::Q6_K: block = q6_K; break;
    case DType::IQ4_XS: block = iq4_xs; break;
    case DType::MXFP4: block = mxfp4; break;
    default: return;
    }
    const std::size_t values = dtypeBlockValues(type), bytes = dtypeSize(type);
    const auto* p = reinterpret_cast<const std::uint8_t*>(src);
    for (std::int64_t i = 0; i < count; i += static_cast<std::int64_t>(values), p += bytes, out += values) block(p, out);
}

}  // namespace tandem::io
