#include "gguf_quantize.h"

#include <QtNumeric>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <qfloat16.h>

#include "io/dtype.h"

namespace tandem::test {

namespace {

using Bytes = std::uint8_t*;

// Stores f as f16 and returns the value a reader will see.
float putHalf(Bytes p, float f) {
    const qfloat16 h(f);
    std::uint16_t bits;
    std::memcpy(&bits, &h, 2);
    p[0] = static_cast<std::uint8_t>(bits & 0xff);
    p[1] = static_cast<std::uint8_t>(bits >> 8);
    return static_cast<float>(h);
}

int nearest(float x) { return static_cast<int>(std::lround(x)); }

float absMax(const float* x, int n) {
    float m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
}

void q8_0(const float* x, Bytes b) {
    const float d = putHalf(b, absMax(x, 32) / 127.0f);
    for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(d ? std::clamp(nearest(x[i] / d), -127, 127) : 0));
}

void q4_0(const float* x, Bytes b) {
    const float d = putHalf(b, absMax(x, 32) / 7.0f);
    auto q = [&](float v) { return static_cast<std::uint8_t>(d ? std::clamp(nearest(v / d) + 8, 0, 15) : 8); };
    for (int i = 0; i < 16; ++i) b[2 + i] = static_cast<std::uint8_t>(q(x[i]) | q(x[i + 16]) << 4);
}

// The K-quants' 6-bit scales and mins of 8 sub-blocks into 12 bytes (the inverse of the reader's
// unpacking).
void packScales(const int* scale, const int* min, Bytes s) {
    for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<std::uint8_t>((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
        s[j + 4] = static_cast<std::uint8_t>((min[j] & 63) | ((min[j + 4] >> 4) << 6));
        s[j + 8] = static_cast<std::uint8_t>((scale[j + 4] & 0xf) | ((min[j + 4] & 0xf) << 4));
    }
}

// Q4_K / Q5_K: per sub-block of 32 an affine map onto 0..levels with 6-bit scale and min.
void kQuant(const float* x, Bytes b, int levels, std::uint8_t* qh, std::uint8_t* qs) {
    float scale[8], min[8];
    for (int j = 0; j < 8; ++j) {
        const float* v = x + 32 * j;
        const float lo = std::min(0.0f, *std::min_element(v, v + 32)), hi = *std::max_element(v, v + 32);
        scale[j] = (hi - lo) / static_cast<float>(levels);
        min[j] = -lo;
    }
    const float d = putHalf(b, *std::max_element(scale, scale + 8) / 63.0f);
    const float dmin = putHalf(b + 2, *std::max_element(min, min + 8) / 63.0f);
    int ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        ls[j] = d ? std::clamp(nearest(scale[j] / d), 0, 63) : 0;
        lm[j] = dmin ? std::clamp(nearest(min[j] / dmin), 0, 63) : 0;
    }
    packScales(ls, lm, b + 4);
    for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 32; ++i) {
            int q[2];
            for (int half = 0; half < 2; ++half) {
                const int j = 2 * k + half;
                const float step = d * static_cast<float>(ls[j]);
                q[half] = step ? std::clamp(nearest((x[64 * k + 32 * half + i] + dmin * static_cast<float>(lm[j])) / step), 0, levels) : 0;
                if (qh) qh[i] = static_cast<std::uint8_t>(qh[i] | ((q[half] >> 4) & 1) << (2 * k + half));
            }
            qs[32 * k + i] = static_cast<std::uint8_t>((q[0] & 0xf) | (q[1] & 0xf) << 4);
        }
}

void q4_K(const float* x, Bytes b) { kQuant(x, b, 15, nullptr, b + 16); }

void q5_K(const float* x, Bytes b) {
    std::memset(b + 16, 0, 32);
    kQuant(x, b, 31, b + 16, b + 48);
}

void q6_K(const float* x, Bytes b) {
    Bytes ql = b, qh = b + 128;
    auto* scales = reinterpret_cast<std::int8_t*>(b + 192);
    float s[16];
    for (int j = 0; j < 16; ++j) s[j] = absMax(x + 16 * j, 16) / 31.0f;
    const float d = putHalf(b + 208, *std::max_element(s, s + 16) / 127.0f);
    for (int j = 0; j < 16; ++j) scales[j] = static_cast<std::int8_t>(d ? std::clamp(nearest(s[j] / d), -127, 127) : 0);
    std::memset(ql, 0, 128);
    std::memset(qh, 0, 64);
    for (int half = 0; half < 2; ++half)
        for (int l = 0; l < 32; ++l)
            for (int m = 0; m < 4; ++m) {
                const int index = 128 * half + l + 32 * m;
                const float step = d * static_cast<float>(scales[8 * half + l / 16 + 2 * m]);
                const int q = step ? std::clamp(nearest(x[index] / step) + 32, 0, 63) : 32;
                std::uint8_t& low = ql[64 * half + l + 32 * (m % 2)];
                low = static_cast<std::uint8_t>(low | (m < 2 ? (q & 0xf) : (q & 0xf) << 4));
                qh[32 * half + l] = static_cast<std::uint8_t>(qh[32 * half + l] | (q >> 4) << (2 * m));
            }
}

constexpr float kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

int nearestIq4(float v) {
    int best = 0;
    for (int i = 1; i < 16; ++i)
        if (std::fabs(kIq4Values[i] - v) < std::fabs(kIq4Values[best] - v)) best = i;
    return best;
}

void iq4_xs(const float* x, Bytes b) {
    float sub[8];
    for (int j = 0; j < 8; ++j) sub[j] = absMax(x + 32 * j, 32) / 113.0f;
    const float d = putHalf(b, *std::max_element(sub, sub + 8) / 31.0f);
    unsigned high = 0;
    std::memset(b + 4, 0, 4);
    for (int j = 0; j < 8; ++j) {
        const int ls = d ? std::clamp(nearest(sub[j] / d), -32, 31) + 32 : 32;
        b[4 + j / 2] = static_cast<std::uint8_t>(b[4 + j / 2] | (ls & 0xf) << (4 * (j % 2)));
        high |= static_cast<unsigned>(ls >> 4) << (2 * j);
        const float dl = d * static_cast<float>(ls - 32);
        for (int i = 0; i < 16; ++i) {
            const int lo = dl ? nearestIq4(x[32 * j + i] / dl) : 8, hi = dl ? nearestIq4(x[32 * j + i + 16] / dl) : 8;
            b[8 + 16 * j + i] = static_cast<std::uint8_t>(lo | hi << 4);
        }
    }
    b[2] = static_cast<std::uint8_t>(high & 0xff);
    b[3] = static_cast<std::uint8_t>(high >> 8);
}

struct Format {
    std::uint32_t id;
    const char* name;
    int values, bytes;
    void (*block)(const float*, Bytes);
};

constexpr Format kFormats[] = {
    {kQ8_0, "Q8_0", 32, 34, q8_0}, {kQ4_0, "Q4_0", 32, 18, q4_0}, {kQ4_K, "Q4_K", 256, 144, q4_K},
    {kQ5_K, "Q5_K", 256, 176, q5_K}, {kQ6_K, "Q6_K", 256, 210, q6_K}, {kIQ4_XS, "IQ4_XS", 256, 136, iq4_xs},
};

const Format* formatOf(std::uint32_t type) {
    for (const auto& f : kFormats)
        if (f.id == type) return &f;
    return nullptr;
}

}  // namespace

const char* ggmlTypeName(std::uint32_t type) {
    if (type == kF32) return "F32";
    if (type == kF16) return "F16";
    if (type == kBF16) return "BF16";
    const auto* f = formatOf(type);
    return f ? f->name : "?";
}

int ggmlBlockValues(std::uint32_t type) {
    const auto* f = formatOf(type);
    return f ? f->values : 1;
}

QByteArray quantize(std::uint32_t type, std::span<const float> values) {
    QByteArray out;
    if (type == kF32) return QByteArray(reinterpret_cast<const char*>(values.data()), static_cast<qsizetype>(values.size() * 4));
    if (type == kF16 || type == kBF16) {
        out.resize(static_cast<qsizetype>(values.size() * 2));
        for (std::size_t i = 0; i < values.size(); ++i) {
            std::uint16_t bits;
            if (type == kBF16) bits = io::floatToBf16(values[i]);
            else {
                const qfloat16 h(values[i]);
                std::memcpy(&bits, &h, 2);
            }
            std::memcpy(out.data() + 2 * i, &bits, 2);
        }
        return out;
    }
    const Format* f = formatOf(type);
    const std::size_t blocks = values.size() / static_cast<std::size_t>(f->values);
    out.fill('\0', static_cast<qsizetype>(blocks * static_cast<std::size_t>(f->bytes)));
    for (std::size_t i = 0; i < blocks; ++i)
        f->block(values.data() + i * static_cast<std::size_t>(f->values), reinterpret_cast<Bytes>(out.data()) + i * static_cast<std::size_t>(f->bytes));
    return out;
}

}  // namespace tandem::test
