#pragma once
// The AVX-512 expert kernels' templates (see kernels_avx512.cpp), shared by the translation units that
// instantiate them: kernels_avx512.cpp (GEMV, INT8/INT4 GEMM) and kernels_avx512_bf16_gemm.cpp. Header-
// only with internal linkage, like kernel_rows.h; include only from files compiled with AVX-512 flags.
#include <algorithm>
#include <cstdlib>

#include "cpu/kernels/kernel_rows.h"
#include "cpu/kernels/avx512/kernels_avx512.h"
#include "cpu/kernels/avx512/simd_avx512.h"
#include "tandem/error.h"
#include "tandem/tuning.h"

namespace tandem::cpu {
namespace {

// Prefetch distance of the gate/up weight stream: two K blocks (2-4 KiB) ahead keeps the next page's
// lines on their way while the hardware prefetcher restarts at each 4 KiB boundary.
// Tuning::avx512PrefetchBytes (TANDEM_CPU_PF_AHEAD; 0: no software prefetch in these kernels) changes it
// for measurements. Read at program start: a malformed variable leaves the default here, and loading a
// model reports it (tandem::tuning()).
inline std::ptrdiff_t prefetchAheadSetting() {
    try {
        return tuning().avx512PrefetchBytes;
    } catch (const Error&) {
        return Tuning{}.avx512PrefetchBytes;
    }
}
static const std::ptrdiff_t kPrefetchAhead = prefetchAheadSetting();

inline void prefetchLine(const std::byte* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// From this many rows per pass (the GEMM kernels) the block loops are not unrolled fully (BF16 and
// INT8 by 2, INT4 not at all): fully unrolled, GCC spills the broadcast activations and orders
// each row's dot products one after the other, so they wait on each other's latency (the INT8 GEMM
// ran at 53% of vpdpbusd's peak on Zen 4; 20-30% less time per prefill layer without, see
// docs/BENCHMARKS.md). The GEMV kernels (decode) keep their full unrolling, instruction for instruction
// the code measured on both machines; hence the loop bodies as macros under `if constexpr` (a lambda
// changed GCC's scheduling of the GEMV instantiations too).
constexpr int kGemmUnrollFrom = 8;

template <int NT>
constexpr int splitsFor() {
    return NT <= 2 ? 2 : 1;  // few rows: split each sum in two so the dot-product latency overlaps
}

// BF16 issues two dot products (hi, lo) per row and weight load: more partial sums for the same rows,
// as many as the registers hold beside gate's and up's (2 * NT * S of 32).
template <int NT>
constexpr int bf16SplitsFor() {
    return NT == 1 ? 4 : NT <= 4 ? 2 : 1;
}

// The hi products go to the even partial sums and the lo products to the odd ones (both to the one
// sum when S is 1).
template <int NT, int S>
inline void bf16Block(__m512 (&acc)[NT][S], const std::byte* blk, const Rows<NT>& in, int k0, std::ptrdiff_t prefetch) {
// One weight vector (16 outputs x 2 inputs) against the hi and lo halves of every row.
#define TANDEM_BF16_VECTOR(j)                                                                                       \
    do {                                                                                                            \
        if (prefetch) prefetchLine(blk + prefetch + 64 * (j));                                                      \
        const __m512bh w = (__m512bh)_mm512_load_si512(blk + 64 * (j));                                            \
        const std::size_t at = 2 * static_cast<std::size_t>(k0 + 2 * (j));                                         \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t) {                                                      \
            const __m512bh hi = (__m512bh)_mm512_set1_epi32(load32(in.x[t] + at));                                  \
            const __m512bh lo = (__m512bh)_mm512_set1_epi32(load32(in.lo[t] + at));                                 \
            acc[t][(2 * (j)) % S] = _mm512_dpbf16_ps(acc[t][(2 * (j)) % S], w, hi);                                 \
            acc[t][(2 * (j) + 1) % S] = _mm512_dpbf16_ps(acc[t][(2 * (j) + 1) % S], w, lo);                         \
        }                                                                                                           \
    } while (0)
    if constexpr (NT >= kGemmUnrollFrom) {
#pragma GCC unroll 2
        for (int j = 0; j < 16; ++j) TANDEM_BF16_VECTOR(j);
    } else {
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) TANDEM_BF16_VECTOR(j);
    }
#undef TANDEM_BF16_VECTOR
}

template <int NT, int S>
inline void int8Block(__m512i (&acc)[NT][S], const std::byte* blk, const Rows<NT>& in, int k0, std::ptrdiff_t prefetch) {
// One weight vector (16 outputs x 4 inputs) against every row.
#define TANDEM_INT8_VECTOR(j)                                                                                       \
    do {                                                                                                            \
        if (prefetch) prefetchLine(blk + prefetch + 64 * (j));                                                      \
        const __m512i w = _mm512_load_si512(blk + 64 * (j));                                                        \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t) acc[t][(j) % S] =                                      \
            _mm512_dpbusd_epi32(acc[t][(j) % S], w, _mm512_set1_epi32(load32(in.x[t] + k0 + 4 * (j))));             \
    } while (0)
    if constexpr (NT >= kGemmUnrollFrom) {
#pragma GCC unroll 2
        for (int j = 0; j < 16; ++j) TANDEM_INT8_VECTOR(j);
    } else {
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) TANDEM_INT8_VECTOR(j);
    }
#undef TANDEM_INT8_VECTOR
}

// Both 32-column groups of an INT4 or MXFP4 block: integer dot products per group, then the group's
// scales. INT4's unsigned nibbles carry +8, removed through the activations' group sums; with separate
// low and high nibble sums its high nibbles are taken in place (w & 0xf0, 16 times the nibble) and their
// sum shifted back once per group: one instruction less per weight vector. MXFP4's nibbles go through a
// table (vpshufb) to 2v + 12, whose +12 is removed the same way, and the group's bf16 scale 2^(e - 128)
// takes the table's factor 2; both of its nibbles are looked up, so the high ones are shifted down first.
template <ExpertType Type, int NT>
inline void grouped4Block(__m512 (&acc)[NT], const std::byte* blk, const Rows<NT>& in, int k0, std::ptrdiff_t prefetch) {
    constexpr bool kFp4 = Type == ExpertType::MXFP4;
    constexpr bool kSplit = NT <= 4;  // separate low/high nibble sums halve the dependency chains
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    const __m512i highNibble = _mm512_set1_epi8(static_cast<char>(0xf0));
    [[maybe_unused]] const __m512i table = mxfp4Table512();
    if (prefetch)
        for (int v = 0; v < 9; ++v) prefetchLine(blk + prefetch + 64 * v);
#pragma GCC unroll 2
    for (int grp = 0; grp < 2; ++grp) {
        __m512i lo[NT], hi[NT];
        for (int t = 0; t < NT; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
// One 64-byte vector of nibbles (16 outputs x 4 inputs, and the same + 16) against every row.
#define TANDEM_INT4_VECTOR(v)                                                                                       \
    do {                                                                                                            \
        const __m512i w = _mm512_load_si512(blk + 64 * (4 * grp + (v)));                                            \
        __m512i wl = _mm512_and_si512(w, nibble);                                                                   \
        __m512i wh = kSplit && !kFp4 ? _mm512_and_si512(w, highNibble) : _mm512_and_si512(_mm512_srli_epi16(w, 4), nibble); \
        if constexpr (kFp4) {                                                                                       \
            wl = _mm512_shuffle_epi8(table, wl);                                                                    \
            wh = _mm512_shuffle_epi8(table, wh);                                                                    \
        }                                                                                                           \
        _Pragma("GCC unroll 8") for (int t = 0; t < NT; ++t) {                                                      \
            const std::byte* x = in.x[t] + k0 + 32 * grp + 4 * (v);                                                 \
            lo[t] = _mm512_dpbusd_epi32(lo[t], wl, _mm512_set1_epi32(load32(x)));                                   \
            if constexpr (kSplit)                                                                                   \
                hi[t] = _mm512_dpbusd_epi32(hi[t], wh, _mm512_set1_epi32(load32(x + 16)));                          \
            else                                                                                                    \
                lo[t] = _mm512_dpbusd_epi32(lo[t], wh, _mm512_set1_epi32(load32(x + 16)));                          \
        }                                                                                                           \
    } while (0)
        if constexpr (NT >= kGemmUnrollFrom) {
#pragma GCC unroll 1
            for (int v = 0; v < 4; ++v) TANDEM_INT4_VECTOR(v);
        } else {
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) TANDEM_INT4_VECTOR(v);
        }
#undef TANDEM_INT4_VECTOR
        const __m512 scale = kFp4 ? mxfp4Scales512(blk + 512 + 32 * grp)
                                  : _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 512 + 32 * grp)));
        for (int t = 0; t < NT; ++t) {
            __m512i d = !kSplit ? lo[t] : kFp4 ? _mm512_add_epi32(lo[t], hi[t]) : _mm512_add_epi32(lo[t], _mm512_srai_epi32(hi[t], 4));
            d = _mm512_sub_epi32(d, _mm512_set1_epi32((kFp4 ? 12 : 8) * in.groupSums[t][k0 / kActGroup + grp]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), scale, acc[t]);
        }
    }
}

template <int NT, int S>
inline __m512 sumOf(const __m512 (&a)[S]) {
    __m512 s = a[0];
    for (int i = 1; i < S; ++i) s = _mm512_add_ps(s, a[i]);
    return s;
}

template <int NT, int S>
inline __m512i sumOf(const __m512i (&a)[S]) {
    __m512i s = a[0];
    for (int i = 1; i < S; ++i) s = _mm512_add_epi32(s, a[i]);
    return s;
}

// One gate/up panel for NT rows; writes act columns [col, col + 16).
// Prefetches run kPrefetchAhead bytes ahead up to prefetchLimit (the end of the call's panels, from this
// panel), then on into `next` (the caller's next panels) when it is given. The kernel asks for them on
// a panel's first pass only (prefetchLimit 0 and no `next` on later ones), as down does.
// Epi: with the call's epilogue (biases, clamped SwiGLU), instantiated in kernels_avx512_epilogue.cpp;
// without, the code of the plain SiLU kernels as measured.
template <ExpertType Type, int NT, bool Epi>
void gateUpPanel(const ExpertLayout& l, const std::byte* panel, const Rows<NT>& in, int col, std::ptrdiff_t prefetchLimit,
                 const std::byte* next, const GateUpEpilogue* epilogue) {
    constexpr int S = Type == ExpertType::BF16 ? bf16SplitsFor<NT>() : splitsFor<NT>();
    const int kBlocks = l.hiddenKBlocks();
    const auto pairBytes = static_cast<std::ptrdiff_t>(2 * l.blockBytes);
    auto prefetchFor = [&](int kb) -> std::ptrdiff_t {
        if (kPrefetchAhead <= 0) return 0;
        const std::ptrdiff_t at = kb * pairBytes + kPrefetchAhead;
        if (at + pairBytes <= prefetchLimit) return kPrefetchAhead;
        if (!next) return 0;
        return reinterpret_cast<std::intptr_t>(next) + (at - prefetchLimit) - reinterpret_cast<std::intptr_t>(panel + kb * pairBytes);
    };
    if constexpr (Type == ExpertType::BF16) {
        __m512 g[NT][S], u[NT][S];
        for (int t = 0; t < NT; ++t)
            for (int s = 0; s < S; ++s) g[t][s] = u[t][s] = _mm512_setzero_ps();
        for (int kb = 0; kb < kBlocks; ++kb) {
            const std::byte* blk = panel + kb * pairBytes;
            const std::ptrdiff_t pf = prefetchFor(kb);
            bf16Block<NT, S>(g, blk, in, 32 * kb, pf);
            bf16Block<NT, S>(u, blk + 1024, in, 32 * kb, pf);
        }
        for (int t = 0; t < NT; ++t) {
            if constexpr (Epi)
                _mm512_storeu_ps(in.out[t] + col, gatedAct512(sumOf<NT, S>(g[t]), sumOf<NT, S>(u[t]), epilogue, col));
            else
                _mm512_storeu_ps(in.out[t] + col, siluMul512(sumOf<NT, S>(g[t]), sumOf<NT, S>(u[t])));
        }
    } else if constexpr (Type == ExpertType::INT8) {
        __m512i g[NT][S], u[NT][S];
        for (int t = 0; t < NT; ++t)
            for (int s = 0; s < S; ++s) g[t][s] = u[t][s] = _mm512_setzero_si512();
        for (int kb = 0; kb < kBlocks; ++kb) {
            const std::byte* blk = panel + kb * pairBytes;
            const std::ptrdiff_t pf = prefetchFor(kb);
            int8Block<NT, S>(g, blk, in, 64 * kb, pf);
            int8Block<NT, S>(u, blk + 1024, in, 64 * kb, pf);
        }
        const auto* scales = reinterpret_cast<const float*>(panel + kBlocks * pairBytes);
        const __m512 gs = _mm512_load_ps(scales), us = _mm512_load_ps(scales + 16);
        for (int t = 0; t < NT; ++t) {
            const __m512i corr = _mm512_set1_epi32(128 * in.sum[t]);
            const __m512 xs = _mm512_set1_ps(in.scale[t]);
            const __m512 gv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sumOf<NT, S>(g[t]), corr)), _mm512_mul_ps(gs, xs));
            const __m512 uv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sumOf<NT, S>(u[t]), corr)), _mm512_mul_ps(us, xs));
            if constexpr (Epi)
                _mm512_storeu_ps(in.out[t] + col, gatedAct512(gv, uv, epilogue, col));
            else
                _mm512_storeu_ps(in.out[t] + col, siluMul512(gv, uv));
        }
    } else {
        __m512 g[NT], u[NT];
        for (int t = 0; t < NT; ++t) g[t] = u[t] = _mm512_setzero_ps();
        for (int kb = 0; kb < kBlocks; ++kb) {
            const std::byte* blk = panel + kb * pairBytes;
            const std::ptrdiff_t pf = prefetchFor(kb);
            grouped4Block<Type, NT>(g, blk, in, 64 * kb, pf);
            grouped4Block<Type, NT>(u, blk + 576, in, 64 * kb, pf);
        }
        for (int t = 0; t < NT; ++t) {
            const __m512 xs = _mm512_set1_ps(in.scale[t]);
            if constexpr (Epi)
                _mm512_storeu_ps(in.out[t] + col, gatedAct512(_mm512_mul_ps(g[t], xs), _mm512_mul_ps(u[t], xs), epilogue, col));
            else
                _mm512_storeu_ps(in.out[t] + col, siluMul512(_mm512_mul_ps(g[t], xs), _mm512_mul_ps(u[t], xs)));
        }
    }
}

// K blocks of one panel's piece of a full chunk, and its bytes, for a type.
template <ExpertType Type>
constexpr int kChunkKBlocks = kChunkCols / blockColumns(Type);
template <ExpertType Type>
constexpr auto kPieceBytes = static_cast<std::ptrdiff_t>(kChunkKBlocks<Type> * blockBytesOf(Type));

// Down's prefetch targets for panel q's piece of each chunk, worked out once a call: the same piece
// `ahead` chunks on (at least kPrefetchAhead bytes of reading later), carrying on past the call's last
// chunk into the next expert's chunks (c.nextChunks, nextPanelOffset panels further). Both are fixed
// offsets while the chunks are full; an expert's narrower last chunk gets none. The call operator
// gives the offset from chunk ch's piece, 0 for none.
template <ExpertType Type>
class DownPrefetch {
public:
    DownPrefetch() = default;  // none
    DownPrefetch(const DownCall& c, int q) : last_(c.firstChunk + c.chunkCount - 1), count_(c.chunkCount) {
        const ExpertLayout& l = *c.layout;
        if (kPrefetchAhead <= 0) return;
        constexpr std::ptrdiff_t pieceBytes = kPieceBytes<Type>;
        ahead_ = 1;  // chunks ahead: the fewest whose reading covers kPrefetchAhead (a loop: no division per call)
        for (std::ptrdiff_t covered = pieceBytes; covered < kPrefetchAhead; covered += pieceBytes) ++ahead_;
        const auto full = static_cast<std::ptrdiff_t>(l.fullChunkBytes());
        within_ = ahead_ * full;
        narrow_ = l.narrowChunk();
        if (c.nextChunks && q + c.nextPanelOffset < l.downPanels) {
            across_ = reinterpret_cast<std::intptr_t>(c.nextChunks) - reinterpret_cast<std::intptr_t>(c.chunks) +
                      (ahead_ - c.chunkCount) * full + c.nextPanelOffset * pieceBytes;
            hasAcross_ = true;
        }
    }
    std::ptrdiff_t operator()(int ch) const {
        if (ahead_ == 0 || ch == narrow_) return 0;
        int to = ch + ahead_;
        if (to <= last_) return to == narrow_ ? 0 : within_;
        to -= count_;
        return hasAcross_ && to <= last_ && to != narrow_ ? across_ : 0;
    }

private:
    int last_ = 0, count_ = 0;
    int ahead_ = 0, narrow_ = -1;
    std::ptrdiff_t within_ = 0, across_ = 0;
    bool hasAcross_ = false;
};

// Panel q's piece of each of a call's chunks: address and K blocks, worked out once a call (full
// chunks lie a fixed stride apart; only an expert's last chunk may be narrower), so the chunk loop
// does no division or layout lookup per chunk.
template <ExpertType Type>
class DownChunks {
public:
    DownChunks(const DownCall& c, int q) : first_(c.firstChunk) {
        const ExpertLayout& l = *c.layout;
        stride_ = static_cast<std::ptrdiff_t>(l.fullChunkBytes());
        start_ = c.chunks + q * pieceBytes_;
        if (l.narrowChunk() >= 0 && l.narrowChunk() < c.firstChunk + c.chunkCount) {
            narrow_ = l.narrowChunk();
            narrowKBlocks_ = l.chunkKBlocks(narrow_);
            narrowStart_ = c.chunks + (l.chunkOffset(narrow_) - l.chunkOffset(c.firstChunk)) + q * l.chunkPanelBytes(narrow_);
        }
    }
    const std::byte* pieces(int ch) const { return ch == narrow_ ? narrowStart_ : start_ + (ch - first_) * stride_; }
    int kBlocks(int ch) const { return ch == narrow_ ? narrowKBlocks_ : kBlocks_; }

private:
    static constexpr std::size_t pieceBytes_ = kPieceBytes<Type>;
    static constexpr int kBlocks_ = kChunkKBlocks<Type>;
    int first_;
    std::ptrdiff_t stride_ = 0;
    int narrowKBlocks_ = 0, narrow_ = -1;
    const std::byte* start_ = nullptr;
    const std::byte* narrowStart_ = nullptr;
};

// One down row panel q for NT rows over the call's chunks; accumulates into the destination rows.
// A panel's piece of one chunk is only 1-4 KiB, and the next piece lies a whole chunk away (or in the
// next expert), where the hardware prefetchers do not follow: DownPrefetch picks what to prefetch.
// The GEMM's passes after a panel's first (LaterPass) find its pieces in cache and prefetch nothing:
// prefetching there cost a quarter of down's rate on Zen 4 (docs/BENCHMARKS.md). INT8's GEMM takes
// P = 2 panels at once (q and q + 1, whose pieces of a chunk lie side by side), so the rows' broadcast
// activations serve two dot products each, as gate and up share them in gate/up. The GEMV kernels
// (decode) instantiate the defaults, compiled exactly as measured before these two changes.
template <ExpertType Type, int NT, int P = 1, bool LaterPass = false>
void downPanel(const DownCall& c, int q, const Rows<NT>& in) {
    const ExpertLayout& l = *c.layout;
    constexpr int S = Type == ExpertType::BF16 ? bf16SplitsFor<NT>() : splitsFor<NT>();
    const int lastChunk = c.firstChunk + c.chunkCount - 1;
    const DownChunks<Type> chunks(c, q);
    const DownPrefetch<Type> prefetchFor = LaterPass ? DownPrefetch<Type>() : DownPrefetch<Type>(c, q);
    static_assert(P == 1 || (P == 2 && Type == ExpertType::INT8));
    __m512 y[P][NT];
    if constexpr (Type == ExpertType::BF16) {
        __m512 acc[NT][S];
        for (int t = 0; t < NT; ++t)
            for (int s = 0; s < S; ++s) acc[t][s] = _mm512_setzero_ps();
        for (int ch = c.firstChunk; ch <= lastChunk; ++ch) {
            const std::byte* p = chunks.pieces(ch);
            const std::ptrdiff_t pf = prefetchFor(ch);
            for (int kb = 0; kb < chunks.kBlocks(ch); ++kb) bf16Block<NT, S>(acc, p + kb * 1024, in, ch * kChunkCols + 32 * kb, pf);
        }
        for (int t = 0; t < NT; ++t) y[0][t] = sumOf<NT, S>(acc[t]);
    } else if constexpr (Type == ExpertType::INT8) {
        __m512i acc[P][NT][S];
        for (int p = 0; p < P; ++p)
            for (int t = 0; t < NT; ++t)
                for (int s = 0; s < S; ++s) acc[p][t][s] = _mm512_setzero_si512();
        for (int ch = c.firstChunk; ch <= lastChunk; ++ch) {
            const std::byte* p = chunks.pieces(ch);
            const std::ptrdiff_t pf = prefetchFor(ch);
            for (int kb = 0; kb < chunks.kBlocks(ch); ++kb) {
                int8Block<NT, S>(acc[0], p + kb * 1024, in, ch * kChunkCols + 64 * kb, pf);
                if constexpr (P == 2) {
                    // Panel q + 1's piece lies right after q's, in an expert's narrower last chunk too.
                    const std::ptrdiff_t next = ch == l.narrowChunk() ? static_cast<std::ptrdiff_t>(l.chunkPanelBytes(ch)) : kPieceBytes<Type>;
                    int8Block<NT, S>(acc[1], p + next + kb * 1024, in, ch * kChunkCols + 64 * kb, pf);
                }
            }
        }
        for (int p = 0; p < P; ++p) {
            // Padded rows read scales past hidden: masked when accumulated.
            const __m512 rs = _mm512_loadu_ps(c.rowScales + (q + p) * kPanelRows);
            for (int t = 0; t < NT; ++t) {
                const __m512i d = _mm512_sub_epi32(sumOf<NT, S>(acc[p][t]), _mm512_set1_epi32(128 * in.sum[t]));
                y[p][t] = _mm512_mul_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(rs, _mm512_set1_ps(in.scale[t])));
            }
        }
    } else {
        __m512 acc[NT];
        for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
        for (int ch = c.firstChunk; ch <= lastChunk; ++ch) {
            const std::byte* p = chunks.pieces(ch);
            const std::ptrdiff_t pf = prefetchFor(ch);
            for (int kb = 0; kb < chunks.kBlocks(ch); ++kb) grouped4Block<Type, NT>(acc, p + kb * 576, in, ch * kChunkCols + 64 * kb, pf);
        }
        for (int t = 0; t < NT; ++t) y[0][t] = _mm512_mul_ps(acc[t], _mm512_set1_ps(in.scale[t]));
    }
    for (int p = 0; p < P; ++p) {
        const int valid = validRows(l, q + p);
        for (int t = 0; t < NT; ++t) accumulateRow512(in.out[t] + (q + p) * kPanelRows, y[p][t], in.weight[t], valid);
    }
}

// Decode's down (GEMV), chunk by chunk: for each chunk, the pieces of up to kRunPanels consecutive
// panels, which lie side by side there, so the weights are read in runs of kRunPanels pieces (one
// stream the hardware prefetchers follow) instead of one 1-4 KiB piece per chunk and panel as
// downPanel reads them. The panels' sums wait on the stack between chunks; each panel's sums take the
// same steps in the same order as in downPanel, so the results are the same bits. Software prefetch
// asks for the same run of the next chunk, and in the last chunk for `after`, the run read next (the
// call's next run, or the next call's first: c.nextChunks), where the hardware does not follow.
// A down panel's sums: int32 for INT8, float32 otherwise.
template <ExpertType Type>
struct DownSum {
    using type = __m512;
    static __m512 zero() { return _mm512_setzero_ps(); }
};
template <>
struct DownSum<ExpertType::INT8> {
    using type = __m512i;
    static __m512i zero() { return _mm512_setzero_si512(); }
};

template <ExpertType Type, int NT>
void downRuns(const DownCall& c, int q0, int count, const Rows<NT>& in, const std::byte* after) {
    const ExpertLayout& l = *c.layout;
    constexpr int S = Type == ExpertType::BF16 ? bf16SplitsFor<NT>() : Type == ExpertType::INT8 ? splitsFor<NT>() : 1;
    alignas(64) typename DownSum<Type>::type sums[kRunPanels][NT][S];
    for (int i = 0; i < count; ++i)
        for (int t = 0; t < NT; ++t)
            for (int s = 0; s < S; ++s) sums[i][t][s] = DownSum<Type>::zero();
    static_assert(sizeof(sums) <= 16384);
    const DownChunks<Type> chunks(c, q0);
    const int lastChunk = c.firstChunk + c.chunkCount - 1;
    for (int ch = c.firstChunk; ch <= lastChunk; ++ch) {
        const std::byte* run = chunks.pieces(ch);
        const auto piece = static_cast<std::ptrdiff_t>(l.chunkPanelBytes(ch));
        const int kbs = chunks.kBlocks(ch);
        // Panel i's piece in the run read next lies at next + i * nextPiece (a narrower chunk's pieces
        // are shorter).
        const std::byte* next = nullptr;
        std::ptrdiff_t nextPiece = kPieceBytes<Type>;
        if (kPrefetchAhead > 0) {
            if (ch < lastChunk) {
                next = chunks.pieces(ch + 1);
                nextPiece = static_cast<std::ptrdiff_t>(l.chunkPanelBytes(ch + 1));
            } else {
                next = after;
            }
        }
        for (int i = 0; i < count; ++i) {
            const std::byte* p = run + i * piece;
            const std::ptrdiff_t pf = next ? (next + i * nextPiece) - p : 0;
            if constexpr (Type == ExpertType::BF16) {
                for (int kb = 0; kb < kbs; ++kb) bf16Block<NT, S>(sums[i], p + kb * 1024, in, ch * kChunkCols + 32 * kb, pf);
            } else if constexpr (Type == ExpertType::INT8) {
                for (int kb = 0; kb < kbs; ++kb) int8Block<NT, S>(sums[i], p + kb * 1024, in, ch * kChunkCols + 64 * kb, pf);
            } else {
                __m512(&acc)[NT] = reinterpret_cast<__m512(&)[NT]>(sums[i]);  // S is 1
                for (int kb = 0; kb < kbs; ++kb) grouped4Block<Type, NT>(acc, p + kb * 576, in, ch * kChunkCols + 64 * kb, pf);
            }
        }
    }
    for (int i = 0; i < count; ++i) {
        const int q = q0 + i;
        for (int t = 0; t < NT; ++t) {
            __m512 y;
            if constexpr (Type == ExpertType::BF16) {
                y = sumOf<NT, S>(sums[i][t]);
            } else if constexpr (Type == ExpertType::INT8) {
                const __m512i d = _mm512_sub_epi32(sumOf<NT, S>(sums[i][t]), _mm512_set1_epi32(128 * in.sum[t]));
                y = _mm512_mul_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(_mm512_loadu_ps(c.rowScales + q * kPanelRows), _mm512_set1_ps(in.scale[t])));
            } else {
                y = _mm512_mul_ps(sums[i][t][0], _mm512_set1_ps(in.scale[t]));
            }
            accumulateRow512(in.out[t] + q * kPanelRows, y, in.weight[t], validRows(l, q));
        }
    }
}

// A call with an epilogue goes to the kernels instantiated with it (kernels_avx512_epilogue.cpp), so
// that the plain kernels here compile as they did before epilogues existed.
template <ExpertType Type, int MaxRows, bool Epi = false>
void gateUpKernel(const GateUpCall& c) {
    if constexpr (!Epi) {
        if (c.epilogue) {
            avx512GateUpWithEpilogue(c, MaxRows >= kGemmUnrollFrom);
            return;
        }
    }
    const ExpertLayout& l = *c.layout;
    const auto limit = static_cast<std::ptrdiff_t>(c.panelCount * l.gateUpPanelBytes);
    for (int p = 0; p < c.panelCount; ++p) {
        const std::byte* panel = c.panels + p * l.gateUpPanelBytes;
        const std::ptrdiff_t left = limit - static_cast<std::ptrdiff_t>(p * l.gateUpPanelBytes);
        forRowChunks<MaxRows>(c.x.rows, [&]<int NT>(int r0) {
            if constexpr (MaxRows >= kGemmUnrollFrom)  // GEMM: only a panel's first pass prefetches
                gateUpPanel<Type, NT, Epi>(l, panel, gateUpRows<NT>(c, r0), (c.firstPanel + p) * kPanelRows, r0 == 0 ? left : 0,
                                           r0 == 0 ? c.nextPanels : nullptr, c.epilogue);
            else
                gateUpPanel<Type, NT, Epi>(l, panel, gateUpRows<NT>(c, r0), (c.firstPanel + p) * kPanelRows, left, c.nextPanels, c.epilogue);
        });
    }
}

// Panels [q, q + P) for every row, a pass of at most MaxRows rows at a time (GEMM).
template <ExpertType Type, int MaxRows, int P>
void downGemmPanels(const DownCall& c, int q) {
    forRowChunks<MaxRows>(c.act.rows, [&]<int NT>(int r0) {
        if (r0 == 0)
            downPanel<Type, NT, P>(c, q, downRows<NT>(c, r0));
        else
            downPanel<Type, NT, P, true>(c, q, downRows<NT>(c, r0));
    });
}

template <ExpertType Type, int MaxRows>
void downKernel(const DownCall& c) {
    const int end = c.firstPanel + c.panelCount;
    if constexpr (MaxRows >= kGemmUnrollFrom) {
        int q = c.firstPanel;
        if constexpr (Type == ExpertType::INT8)  // two panels at a time (downPanel)
            for (; q + 1 < end; q += 2) downGemmPanels<Type, MaxRows, 2>(c, q);
        for (; q < end; ++q) downGemmPanels<Type, MaxRows, 1>(c, q);
    } else {
        // What each run reads after its last chunk: the next run's first piece, then the next call's.
        const std::byte* nextCall =
            c.nextChunks ? c.nextChunks + static_cast<std::ptrdiff_t>(c.firstPanel + c.nextPanelOffset) * kPieceBytes<Type> : nullptr;
        forRowChunks<MaxRows>(c.act.rows, [&]<int NT>(int r0) {
            const Rows<NT> in = downRows<NT>(c, r0);
            for (int q = c.firstPanel; q < end; q += kRunPanels) {
                const std::byte* after = q + kRunPanels < end ? c.chunks + static_cast<std::ptrdiff_t>(q + kRunPanels) * kPieceBytes<Type> : nextCall;
                downRuns<Type, NT>(c, q, std::min(kRunPanels, end - q), in, after);
            }
        });
    }
}

}  // namespace
}  // namespace tandem::cpu
