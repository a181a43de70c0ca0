#pragma once
// The tensor-core step the prefill and decode kernels share (expert_prefill.cu, attention_prefill.cu,
// mla_prefill.cu, mla_decode.cu): mma.sync m16n8k16, bf16 inputs (fp16 for a long context's one-term P·V,
// ValueForm below), float32 sums, and the bf16 fragments the attention kernels load and make (a value split
// as hi = bf16(x) and lo = bf16(x - hi) when Split).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// The same with fp16 inputs (the same fragment layout and rate).
__device__ __forceinline__ void mmaHalf(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t bf16Pair(float a, float b) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const std::uint32_t*>(&v);
}

__device__ __forceinline__ std::uint32_t lds32(const __nv_bfloat16* p) { return *reinterpret_cast<const std::uint32_t*>(p); }

// Four consecutive values of a row, one 8-byte store a plane (hi and lo 8-byte aligned).
template <bool Split>
__device__ __forceinline__ void put4(float4 v, __nv_bfloat16* hi, __nv_bfloat16* lo) {
    const __nv_bfloat162 h01 = __floats2bfloat162_rn(v.x, v.y), h23 = __floats2bfloat162_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(hi) = make_uint2(*reinterpret_cast<const std::uint32_t*>(&h01), *reinterpret_cast<const std::uint32_t*>(&h23));
    if constexpr (Split)
        *reinterpret_cast<uint2*>(lo) = make_uint2(bf16Pair(v.x - __low2float(h01), v.y - __high2float(h01)),
                                                   bf16Pair(v.z - __low2float(h23), v.w - __high2float(h23)));
}

// The two bf16 pairs (hi, lo) of (x, y) as A-fragment registers.
template <bool Split>
__device__ __forceinline__ void pairs(float x, float y, std::uint32_t& hi, std::uint32_t& lo) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    hi = *reinterpret_cast<const std::uint32_t*>(&h);
    if constexpr (Split) lo = bf16Pair(x - __low2float(h), y - __high2float(h));
}

// The A fragment of rows r0 .. r0 + 15, columns k0 .. k0 + 15 of a row-major bf16 tile of row stride Stride.
template <int Stride>
__device__ __forceinline__ void loadA(const __nv_bfloat16* tile, int r0, int k0, int g, int q, std::uint32_t (&a)[4]) {
    const __nv_bfloat16* p = tile + (r0 + g) * Stride + k0 + 2 * q;
    a[0] = lds32(p);
    a[1] = lds32(p + 8 * Stride);
    a[2] = lds32(p + 8);
    a[3] = lds32(p + 8 * Stride + 8);
}

// ldmatrix: four 8x8 tiles of 16-bit elements from shared memory, each lane giving one tile row's address
// (lanes 8i .. 8i + 7 the rows of tile i, 16-byte aligned); lane 4g + q receives elements (g, 2q) and
// (g, 2q + 1) of each tile, or with .trans (2q, g) and (2q + 1, g).
__device__ __forceinline__ void ldmatrix4(std::uint32_t (&r)[4], const void* row) {
    const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
}
__device__ __forceinline__ void ldmatrix4Trans(std::uint32_t (&r)[4], const void* row) {
    const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
}

// The A fragment (loadA's) of rows r0 .. r0 + 15, columns k0 .. k0 + 15 of a row-major tile, by ldmatrix.
template <int Stride>
__device__ __forceinline__ void ldmatrixA(const __nv_bfloat16* tile, int r0, int k0, int lane, std::uint32_t (&a)[4]) {
    const int t = lane >> 3;
    ldmatrix4(a, tile + (r0 + (t & 1) * 8 + (lane & 7)) * Stride + k0 + (t >> 1) * 8);
}

// B fragments (b0, b1) of two blocks of 8 columns n0 .. n0 + 15, k-slots k0 .. k0 + 15, from a tile whose
// rows are B's columns (keys [key][dim], for S = Q Kᵀ): b[0], b[1] for columns n0 .. n0 + 7, b[2], b[3]
// for n0 + 8 .. n0 + 15.
template <int Stride>
__device__ __forceinline__ void ldmatrixB(const __nv_bfloat16* tile, int n0, int k0, int lane, std::uint32_t (&b)[4]) {
    const int t = lane >> 3;
    ldmatrix4(b, tile + (n0 + (t >> 1) * 8 + (lane & 7)) * Stride + k0 + (t & 1) * 8);
}

// The same from a tile whose rows are B's k-slots (values [key][dim], for O += P V): columns n0 .. n0 + 15
// of rows k0 .. k0 + 15, transposed as they load.
template <int Stride>
__device__ __forceinline__ void ldmatrixBTrans(const __nv_bfloat16* tile, int k0, int n0, int lane, std::uint32_t (&b)[4]) {
    const int t = lane >> 3;
    ldmatrix4Trans(b, tile + (k0 + (t & 1) * 8 + (lane & 7)) * Stride + n0 + (t >> 1) * 8);
}

// How the flash attention kernels carry the values and the weights of O += P V:
//   Split  bf16 hi + lo of each (three products: split precision);
//   Bf16   one bf16 term of each (split precision off);
//   Half   one fp16 term of each: a long context's chunk with split precision (Tuning::gpuSplitAttentionUntil),
//          three mantissa bits more than bf16 at the same tensor-core rate. P is in [0, 1]; a value beyond
//          fp16's range (65504) is clamped to it rather than made infinite.
enum class ValueForm { Split, Bf16, Half };

template <bool Split, bool SplitValues>
inline constexpr ValueForm kValueForm = SplitValues ? ValueForm::Split : Split ? ValueForm::Half : ValueForm::Bf16;

// Four consecutive values of a row into the values' planes (hi, and lo with Split); Half keeps its fp16
// bits in the hi plane.
template <ValueForm F>
__device__ __forceinline__ void putValues4(float4 v, __nv_bfloat16* hi, __nv_bfloat16* lo) {
    if constexpr (F == ValueForm::Half) {
        const auto clamp = [](float x) { return fminf(fmaxf(x, -65504.0f), 65504.0f); };
        const __half2 h01 = __floats2half2_rn(clamp(v.x), clamp(v.y)), h23 = __floats2half2_rn(clamp(v.z), clamp(v.w));
        *reinterpret_cast<uint2*>(hi) = make_uint2(*reinterpret_cast<const std::uint32_t*>(&h01), *reinterpret_cast<const std::uint32_t*>(&h23));
    } else {
        put4<F == ValueForm::Split>(v, hi, lo);
    }
}

// Two weights as an A-fragment register (and, with Split, the register of what rounding lost).
template <ValueForm F>
__device__ __forceinline__ void weightPair(float x, float y, std::uint32_t& hi, std::uint32_t& lo) {
    if constexpr (F == ValueForm::Half) {
        const __half2 h = __floats2half2_rn(x, y);
        hi = *reinterpret_cast<const std::uint32_t*>(&h);
    } else {
        pairs<F == ValueForm::Split>(x, y, hi, lo);
    }
}

// c += P V for one fragment (the hi terms; Split adds its two other products itself).
template <ValueForm F>
__device__ __forceinline__ void mmaValues(float (&c)[4], const std::uint32_t (&p)[4], std::uint32_t b0, std::uint32_t b1) {
    if constexpr (F == ValueForm::Half)
        mmaHalf(c, p, b0, b1);
    else
        mma(c, p, b0, b1);
}

}  // namespace tandem::cuda
