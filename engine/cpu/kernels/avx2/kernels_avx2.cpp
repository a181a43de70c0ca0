// AVX2 expert kernels for CPUs without AVX-512 (Haswell..Alder Lake, Zen 1-3). A 64-byte block row is
// two ymm halves of 8 outputs. BF16 weights are widened to float32 by shifts and multiplied with FMA
// by the float32 activations (no bf16 dot product here, so rounding them would only lose accuracy);
// INT8 uses vpmaddubsw on |w| and sign-adjusted activations (so no product saturates int16); INT4
// nibbles, and MXFP4's through a vpshufb table, are small enough for vpmaddubsw directly. Compiled with -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <algorithm>

#include "cpu/kernels/kernel_rows.h"

namespace tandem::cpu {

namespace {

typedef std::int32_t UnalignedInt32 __attribute__((may_alias, aligned(1)));
inline std::int32_t load32(const std::byte* p) { return *reinterpret_cast<const UnalignedInt32*>(p); }
inline __m256i load256(const std::byte* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }

inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    // 2^n built in the exponent field; n is within [-126, 127] after the clamp.
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline __m256 siluMul256(__m256 g, __m256 u) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

// The epilogue's activation (expert_kernels.h) for outputs [col, col + 8): biases, then SiLU(g) * u or
// the clamped SwiGLU. Null: SiLU(g) * u as ever.
inline __m256 gatedAct256(__m256 g, __m256 u, const GateUpEpilogue* e, int col) {
    if (!e) return siluMul256(g, u);
    if (e->gateBias) g = _mm256_add_ps(g, _mm256_loadu_ps(e->gateBias + col));
    if (e->upBias) u = _mm256_add_ps(u, _mm256_loadu_ps(e->upBias + col));
    if (e->activation == GatedActivation::SiluMul) return siluMul256(g, u);
    const __m256 limit = _mm256_set1_ps(e->limit);
    g = _mm256_min_ps(g, limit);
    u = _mm256_max_ps(_mm256_min_ps(u, limit), _mm256_sub_ps(_mm256_setzero_ps(), limit));
    const __m256 ex = exp256(_mm256_mul_ps(g, _mm256_set1_ps(-e->alpha)));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), ex)), _mm256_add_ps(u, _mm256_set1_ps(1.0f)));
}

inline void accumulateHalf(float* dest, __m256 y, float w, int valid) {
    if (valid >= 8) {
        _mm256_storeu_ps(dest, _mm256_fmadd_ps(y, _mm256_set1_ps(w), _mm256_loadu_ps(dest)));
    } else if (valid > 0) {
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const __m256 d = _mm256_maskload_ps(dest, mask);
        _mm256_maskstore_ps(dest, mask, _mm256_fmadd_ps(y, _mm256_set1_ps(w), d));
    }
}

// Accumulators: [row][half] of 8 outputs.
template <int NT>
inline void bf16Block(__m256 (&acc)[NT][2], const std::byte* blk, const Rows<NT>& in, int k0) {
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    for (int j = 0; j < 16; ++j) {
        __m256 even[2], odd[2];
        for (int h = 0; h < 2; ++h) {
            const __m256i w = load256(blk + 64 * j + 32 * h);
            even[h] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
            odd[h] = _mm256_castsi256_ps(_mm256_and_si256(w, high));
        }
        for (int t = 0; t < NT; ++t) {
            const float* x = reinterpret_cast<const float*>(in.x[t]) + k0 + 2 * j;
            const __m256 xe = _mm256_broadcast_ss(x), xo = _mm256_broadcast_ss(x + 1);
            for (int h = 0; h < 2; ++h) acc[t][h] = _mm256_fmadd_ps(odd[h], xo, _mm256_fmadd_ps(even[h], xe, acc[t][h]));
        }
    }
}

template <int NT>
inline void int8Block(__m256i (&acc)[NT][2], const std::byte* blk, const Rows<NT>& in, int k0) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int j = 0; j < 16; ++j) {
        __m256i sw[2], aw[2];
        for (int h = 0; h < 2; ++h) {
            sw[h] = _mm256_xor_si256(load256(blk + 64 * j + 32 * h), flip);  // u - 128: the signed weight
            aw[h] = _mm256_abs_epi8(sw[h]);
        }
        for (int t = 0; t < NT; ++t) {
            const __m256i x = _mm256_set1_epi32(load32(in.x[t] + k0 + 4 * j));
            for (int h = 0; h < 2; ++h) {
                const __m256i p = _mm256_maddubs_epi16(aw[h], _mm256_sign_epi8(x, sw[h]));
                acc[t][h] = _mm256_add_epi32(acc[t][h], _mm256_madd_epi16(p, ones));
            }
        }
    }
}

// INT4 and MXFP4 blocks: both 32-column groups, integer dot products per group, then the group's
// scales. INT4's nibbles n are taken as they are (their +8 removed through the activations' group
// sums); MXFP4's go through a table to 2v + 12 (v the e2m1 value, +12 removed the same way), and the
// group's bf16 scale 2^(e - 128) takes the factor 1/2.
template <ExpertType Type, int NT>
inline void grouped4Block(__m256 (&acc)[NT][2], const std::byte* blk, const Rows<NT>& in, int k0) {
    constexpr bool kFp4 = Type == ExpertType::MXFP4;
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i table = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,  //
                                           12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    for (int grp = 0; grp < 2; ++grp) {
        __m256i d[NT][2];
        for (int t = 0; t < NT; ++t) d[t][0] = d[t][1] = _mm256_setzero_si256();
        for (int v = 0; v < 4; ++v) {
            __m256i wl[2], wh[2];
            for (int h = 0; h < 2; ++h) {
                const __m256i w = load256(blk + 64 * (4 * grp + v) + 32 * h);
                wl[h] = _mm256_and_si256(w, nibble);
                wh[h] = _mm256_and_si256(_mm256_srli_epi16(w, 4), nibble);
                if constexpr (kFp4) {
                    wl[h] = _mm256_shuffle_epi8(table, wl[h]);
                    wh[h] = _mm256_shuffle_epi8(table, wh[h]);
                }
            }
            for (int t = 0; t < NT; ++t) {
                const std::byte* x = in.x[t] + k0 + 32 * grp + 4 * v;
                const __m256i xl = _mm256_set1_epi32(load32(x)), xh = _mm256_set1_epi32(load32(x + 16));
                for (int h = 0; h < 2; ++h) {
                    // Weights <= 24 and |x| <= 127: the four products of a pair of int16 sums reach at
                    // most 12192, no saturation.
                    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(wl[h], xl), _mm256_maddubs_epi16(wh[h], xh));
                    d[t][h] = _mm256_add_epi32(d[t][h], _mm256_madd_epi16(p, ones));
                }
            }
        }
        for (int h = 0; h < 2; ++h) {
            const __m128i bits = _mm_load_si128(reinterpret_cast<const __m128i*>(blk + 512 + 32 * grp + 16 * h));
            const __m256 scale = kFp4 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16)) : _mm256_cvtph_ps(bits);
            for (int t = 0; t < NT; ++t) {
                const __m256i corr = _mm256_set1_epi32((kFp4 ? 12 : 8) * in.groupSums[t][k0 / kActGroup + grp]);
                acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(d[t][h], corr)), scale, acc[t][h]);
            }
        }
    }
}

template <ExpertType Type, int NT>
void gateUpPanel(const ExpertLayout& l, const std::byte* panel, const Rows<NT>& in, int col, const GateUpEpilogue* epilogue) {
    const int kBlocks = l.hiddenKBlocks();
    const std::size_t pairBytes = 2 * l.blockBytes;
    __m256 gv[NT][2], uv[NT][2];
    if constexpr (Type == ExpertType::INT8) {
        __m256i g[NT][2], u[NT][2];
        for (int t = 0; t < NT; ++t) g[t][0] = g[t][1] = u[t][0] = u[t][1] = _mm256_setzero_si256();
        for (int kb = 0; kb < kBlocks; ++kb) {
            int8Block<NT>(g, panel + kb * pairBytes, in, 64 * kb);
            int8Block<NT>(u, panel + kb * pairBytes + 1024, in, 64 * kb);
        }
        const auto* scales = reinterpret_cast<const float*>(panel + kBlocks * pairBytes);
        for (int t = 0; t < NT; ++t)
            for (int h = 0; h < 2; ++h) {
                const __m256 xs = _mm256_set1_ps(in.scale[t]);
                gv[t][h] = _mm256_mul_ps(_mm256_cvtepi32_ps(g[t][h]), _mm256_mul_ps(_mm256_load_ps(scales + 8 * h), xs));
                uv[t][h] = _mm256_mul_ps(_mm256_cvtepi32_ps(u[t][h]), _mm256_mul_ps(_mm256_load_ps(scales + 16 + 8 * h), xs));
            }
    } else {
        for (int t = 0; t < NT; ++t) gv[t][0] = gv[t][1] = uv[t][0] = uv[t][1] = _mm256_setzero_ps();
        for (int kb = 0; kb < kBlocks; ++kb) {
            const std::byte* blk = panel + kb * pairBytes;
            if constexpr (Type == ExpertType::BF16) {
                bf16Block<NT>(gv, blk, in, 32 * kb);
                bf16Block<NT>(uv, blk + 1024, in, 32 * kb);
            } else {
                grouped4Block<Type, NT>(gv, blk, in, 64 * kb);
                grouped4Block<Type, NT>(uv, blk + 576, in, 64 * kb);
            }
        }
        if constexpr (isGrouped4Bit(Type))
            for (int t = 0; t < NT; ++t)
                for (int h = 0; h < 2; ++h) {
                    gv[t][h] = _mm256_mul_ps(gv[t][h], _mm256_set1_ps(in.scale[t]));
                    uv[t][h] = _mm256_mul_ps(uv[t][h], _mm256_set1_ps(in.scale[t]));
                }
    }
    for (int t = 0; t < NT; ++t)
        for (int h = 0; h < 2; ++h) _mm256_storeu_ps(in.out[t] + col + 8 * h, gatedAct256(gv[t][h], uv[t][h], epilogue, col + 8 * h));
}

// A down panel's sums in ymm halves: int32 for INT8, float32 otherwise.
template <ExpertType Type>
struct DownSum {
    using type = __m256;
    static __m256 zero() { return _mm256_setzero_ps(); }
};
template <>
struct DownSum<ExpertType::INT8> {
    using type = __m256i;
    static __m256i zero() { return _mm256_setzero_si256(); }
};

// Down row panels [q0, q0 + count) for NT rows over the call's chunks; accumulates into the destination
// rows. A chunk at a time, and in it the pieces of the count panels, which lie side by side: with
// count > 1 (decode) the weights are read in one run per chunk instead of one 1-4 KiB piece a whole
// chunk apart per panel and chunk, which the hardware prefetchers do not follow (as the AVX-512
// kernels' downRuns). Each panel's sums take the same steps in the same order whatever count is. Run
// (count's most) is 1 for the GEMM, so its sums are known to be one panel's and stay in registers.
template <ExpertType Type, int NT, int Run>
void downRuns(const DownCall& c, int q0, int runCount, const Rows<NT>& in) {
    const ExpertLayout& l = *c.layout;
    const std::size_t base = l.chunkOffset(c.firstChunk);
    const int count = Run == 1 ? 1 : runCount;
    typename DownSum<Type>::type sums[Run][NT][2];
    for (int i = 0; i < count; ++i)
        for (int t = 0; t < NT; ++t) sums[i][t][0] = sums[i][t][1] = DownSum<Type>::zero();
    for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch) {
        const std::size_t piece = l.chunkPanelBytes(ch);
        const std::byte* run = c.chunks + (l.chunkOffset(ch) - base) + q0 * piece;
        const int kbs = l.chunkKBlocks(ch);
        for (int i = 0; i < count; ++i) {
            const std::byte* p = run + i * piece;
            for (int kb = 0; kb < kbs; ++kb) {
                if constexpr (Type == ExpertType::INT8)
                    int8Block<NT>(sums[i], p + kb * 1024, in, ch * kChunkCols + 64 * kb);
                else if constexpr (Type == ExpertType::BF16)
                    bf16Block<NT>(sums[i], p + kb * 1024, in, ch * kChunkCols + 32 * kb);
                else
                    grouped4Block<Type, NT>(sums[i], p + kb * 576, in, ch * kChunkCols + 64 * kb);
            }
        }
    }
    for (int i = 0; i < count; ++i) {
        const int q = q0 + i;
        __m256 y[NT][2];
        for (int t = 0; t < NT; ++t)
            for (int h = 0; h < 2; ++h) {
                if constexpr (Type == ExpertType::INT8)
                    y[t][h] = _mm256_mul_ps(_mm256_cvtepi32_ps(sums[i][t][h]),
                                            _mm256_mul_ps(_mm256_loadu_ps(c.rowScales + q * kPanelRows + 8 * h), _mm256_set1_ps(in.scale[t])));
                else if constexpr (isGrouped4Bit(Type))
                    y[t][h] = _mm256_mul_ps(sums[i][t][h], _mm256_set1_ps(in.scale[t]));
                else
                    y[t][h] = sums[i][t][h];
            }
        const int valid = validRows(l, q);
        for (int t = 0; t < NT; ++t)
            for (int h = 0; h < 2; ++h) accumulateHalf(in.out[t] + q * kPanelRows + 8 * h, y[t][h], in.weight[t], valid - 8 * h);
    }
}

template <ExpertType Type, int MaxRows>
void gateUpKernel(const GateUpCall& c) {
    const ExpertLayout& l = *c.layout;
    for (int p = 0; p < c.panelCount; ++p)
        forRowChunks<MaxRows>(c.x.rows, [&]<int NT>(int r0) {
            gateUpPanel<Type, NT>(l, c.panels + p * l.gateUpPanelBytes, gateUpRows<NT>(c, r0), (c.firstPanel + p) * kPanelRows, c.epilogue);
        });
}

// sixteen ymm registers hold the gate and up sums of two rows (GEMV) or four (GEMM, some spilling).
constexpr int kGemvRows = 2;
constexpr int kGemmRows = 4;

// Decode (GEMV) takes runs of panels; the GEMM, which passes over the panels once per group of rows,
// takes one panel at a time, so each pass finds the panel's pieces in L1.
template <ExpertType Type, int MaxRows>
void downKernel(const DownCall& c) {
    const int end = c.firstPanel + c.panelCount;
    if constexpr (MaxRows == kGemvRows) {
        for (int q = c.firstPanel; q < end; q += kRunPanels)
            forRowChunks<MaxRows>(c.act.rows, [&]<int NT>(int r0) {
                downRuns<Type, NT, kRunPanels>(c, q, std::min(kRunPanels, end - q), downRows<NT>(c, r0));
            });
        return;
    }
    for (int q = c.firstPanel; q < end; ++q)
        forRowChunks<MaxRows>(c.act.rows, [&]<int NT>(int r0) { downRuns<Type, NT, 1>(c, q, 1, downRows<NT>(c, r0)); });
}

template <ExpertType Type>
void fill(ExpertKernels& e) {
    const int t = static_cast<int>(Type);
    e.gemv[t] = {gateUpKernel<Type, kGemvRows>, downKernel<Type, kGemvRows>};
    e.gemm[t] = {gateUpKernel<Type, kGemmRows>, downKernel<Type, kGemmRows>};
    e.gemmMinRows[t] = kGemvRows + 1;
}

}  // namespace

const ExpertKernels& avx2Kernels() {
    static const ExpertKernels k = [] {
        ExpertKernels e;
        e.isa = Isa::Avx2;
        e.bf16Activations = Bf16Activations::Float32;
        fill<ExpertType::BF16>(e);
        fill<ExpertType::INT8>(e);
        fill<ExpertType::INT4>(e);
        fill<ExpertType::MXFP4>(e);
        return e;
    }();
    return k;
}

}  // namespace tandem::cpu
