#include "cpu/kernels/activation_quant.h"

#include <algorithm>
#include <cmath>

#include "cpu/cpu_features.h"
#include "cpu/packed_format.h"
#include "cpu/half_float.h"

namespace tandem::cpu {

namespace {

bool avx512Conversions() {
    static const bool yes = selectedIsa() >= Isa::Avx512;
    return yes;
}

}  // namespace

void activationToBf16Split(const float* x, int n, int nPad, std::byte* row) {
    if (avx512Conversions())
        detail::activationToBf16SplitAvx512(x, n, nPad, row);
    else
        activationToBf16SplitScalar(x, n, nPad, row);
}

void activationToInt8(const float* x, int n, int nPad, std::int8_t* q, float* scale, std::int32_t* groupSums) {
    if (avx512Conversions())
        detail::activationToInt8Avx512(x, n, nPad, q, scale, groupSums);
    else
        activationToInt8Scalar(x, n, nPad, q, scale, groupSums);
}

void activationToBf16SplitScalar(const float* x, int n, int nPad, std::byte* row) {
    auto* hi = reinterpret_cast<std::uint16_t*>(row);
    auto* lo = reinterpret_cast<std::uint16_t*>(row + bf16LoOffset(nPad));
    for (int i = 0; i < n; ++i) {
        hi[i] = floatToBf16(x[i]);
        const float h = bf16Value(hi[i]);
        // x - h is exact in float32 (h is x rounded to fewer bits), so only lo's own rounding is lost.
        lo[i] = std::isfinite(h) ? floatToBf16(x[i] - h) : std::uint16_t{0};
    }
    std::fill(hi + n, hi + nPad, std::uint16_t{0});
    std::fill(lo + n, lo + nPad, std::uint16_t{0});
}

void activationToFloat(const float* x, int n, int nPad, float* out) {
    std::copy(x, x + n, out);
    std::fill(out + n, out + nPad, 0.0f);
}

void activationToInt8Scalar(const float* x, int n, int nPad, std::int8_t* q, float* scale, std::int32_t* groupSums) {
    float absMax = 0.0f;
    for (int i = 0; i < n; ++i) absMax = std::max(absMax, std::fabs(x[i]));
    const float inv = absMax > 0.0f ? 127.0f / absMax : 0.0f;
    *scale = absMax / 127.0f;
    for (int i = 0; i < n; ++i)
        q[i] = static_cast<std::int8_t>(std::clamp(static_cast<int>(std::nearbyint(x[i] * inv)), -127, 127));
    std::fill(q + n, q + nPad, std::int8_t{0});
    for (int g = 0; g < nPad / kActGroup; ++g) {
        std::int32_t s = 0;
        for (int i = 0; i < kActGroup; ++i) s += q[g * kActGroup + i];
        groupSums[g] = s;
    }
}

}  // namespace tandem::cpu
