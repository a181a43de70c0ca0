#pragma once
// The tensor-core step the prefill kernels share (expert_prefill.cu, attention_prefill.cu):
// mma.sync m16n8k16, bf16 inputs, float32 sums.
#include <cuda_bf16.h>

#include <cstdint>

namespace tandem::cuda {

// c += A (16 x 16, row) * B (16 x 8, col), bf16 in, float32 sums.
// Fragments (lane = 4 g + q): A's registers hold rows g and g + 8 at k-slots (2q, 2q+1) and (2q+8, 2q+9)
// (a[0]: row g, a[1]: row g + 8, a[2]: row g at +8, a[3]: row g + 8 at +8); B's hold column g at k-slots
// (2q, 2q+1) (b0) and (2q+8, 2q+9) (b1); C's rows g (c[0], c[1]) and g + 8 (c[2], c[3]), columns 2q, 2q + 1.
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t bf16Pair(float a, float b) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const std::uint32_t*>(&v);
}

}  // namespace tandem::cuda
