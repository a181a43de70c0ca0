#include "cpu/dense/ops.h"

#include <cmath>

namespace tandem::cpu {

float dot(const float* a, const float* b, std::size_t n) {
    // Sixteen independent partial sums let the compiler vectorize without reassociating floats.
    float acc[16] = {};
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
    float tail = 0.0f;
    for (; i < n; ++i) tail += a[i] * b[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    return acc[0] + tail;
}

void axpy(float a, const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void rmsNorm(const float* x, const float* weight, float eps, float* out, std::size_t n) {
    const float meanSquare = dot(x, x, n) / static_cast<float>(n);
    const float inv = 1.0f / std::sqrt(meanSquare + eps);
    for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void softmax(float* x, std::size_t n) {
    float maxValue = -INFINITY;
    for (std::size_t i = 0; i < n; ++i) maxValue = x[i] > maxValue ? x[i] : maxValue;
    float sum = 0.0f;
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - maxValue);
        sum += x[i];
    }
    const float inv = 1.0f / sum;
    for (std::size_t i = 0; i < n; ++i) x[i] *= inv;
}

void siluMul(float* gate, const float* up, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace tandem::cpu
