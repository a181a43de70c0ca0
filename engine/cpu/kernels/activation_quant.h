#pragma once
// The activation formats the expert kernels read, made on the fly from float32 rows:
//   BF16 experts, split (AVX512-BF16, AMX): hi = bf16(x) in the row's first half and lo = bf16(x - hi)
//     in its second, which starts bf16LoOffset(nPad) bytes in; the kernels add W.hi + W.lo.
//   BF16 experts, float32 (scalar, AVX2): x itself.
//   INT8/INT4 experts: int8 with one scale per row (symmetric, x ~ q * scale) and the sum of q over
//     every 32 columns, which the kernels need because they multiply unsigned weights.
// Columns [n, nPad) are written as zeros; nPad is a multiple of 32.
#include <cstddef>
#include <cstdint>

namespace tandem::cpu {

// The hi half of a split row rounded up to whole cache lines, so both halves start 64-byte aligned.
inline std::size_t bf16LoOffset(int nPad) { return (static_cast<std::size_t>(nPad) * 2 + 63) / 64 * 64; }

// Writes hi at row and lo at row + bf16LoOffset(nPad). Where hi is infinite or NaN, lo is 0, so the
// value reaches the output as it would in float32.
void activationToBf16Split(const float* x, int n, int nPad, std::byte* row);

void activationToFloat(const float* x, int n, int nPad, float* out);

// groupSums receives nPad / 32 values.
void activationToInt8(const float* x, int n, int nPad, std::int8_t* q, float* scale, std::int32_t* groupSums);

// The conversions take AVX-512 forms (bit for bit the same results) when the selected kernels are
// AVX-512 or AMX; these are the portable ones, which the tests compare them with.
void activationToBf16SplitScalar(const float* x, int n, int nPad, std::byte* row);
void activationToInt8Scalar(const float* x, int n, int nPad, std::int8_t* q, float* scale, std::int32_t* groupSums);

namespace detail {
void activationToBf16SplitAvx512(const float* x, int n, int nPad, std::byte* row);
void activationToInt8Avx512(const float* x, int n, int nPad, std::int8_t* q, float* scale, std::int32_t* groupSums);
}  // namespace detail

}  // namespace tandem::cpu
