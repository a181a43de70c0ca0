#pragma once
// Rounding float32 to the 16-bit formats the packed experts use, round-to-nearest-even, the same
// rounding the SIMD conversions (vcvtneps2bf16, vcvtps2ph) perform, so every kernel path sees
// identical inputs.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "io/dtype.h"

namespace tandem::cpu {

using io::floatToBf16;
inline float bf16Value(std::uint16_t b) { return io::bf16ToFloat(b); }

// float32 -> IEEE binary16, overflow to infinity, subnormals kept.
inline std::uint16_t floatToF16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
    const std::uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
    if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
    if (a < 0x38800000u) {
        // Subnormal or zero in binary16: the value in units of 2^-24, rounded to nearest even.
        const float scaled = std::ldexp(std::fabs(f), 24);
        return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(scaled)));
    }
    std::uint32_t r = a - 0x38000000u;  // rebias exponent 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (r >> 13));
}

}  // namespace tandem::cpu
