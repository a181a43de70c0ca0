#pragma once
// Element-wise and row-wise float32 operations of the forward pass. Rows are contiguous.
#include <cstddef>
#include <cstdint>

namespace tandem::cpu {

float dot(const float* a, const float* b, std::size_t n);
// y += a * x
void axpy(float a, const float* x, float* y, std::size_t n);
// out = x / sqrt(mean(x^2) + eps) * weight  (out may alias x)
void rmsNorm(const float* x, const float* weight, float eps, float* out, std::size_t n);
// In-place numerically stable softmax.
void softmax(float* x, std::size_t n);
// gate[i] = silu(gate[i]) * up[i]
void siluMul(float* gate, const float* up, std::size_t n);

}  // namespace tandem::cpu
