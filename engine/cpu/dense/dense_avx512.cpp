#include "cpu/dense/dense_avx512.h"

#include <immintrin.h>

#include <algorithm>

namespace tandem::cpu {
namespace {

// 16 bf16 weights of a row as float32: bf16 is the top half of a float32.
inline __m512 widenWeights(__m256i w) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w), 16)); }

// Up to 4 rows x 4 tokens in 16 accumulators: per 16 columns, one load of each row's weights and of
// each token's activations, then NR * NT fused multiply-adds.
template <int NR, int NT, class W>
void block(const W* w, std::size_t cols, std::size_t r0, const float* x, std::size_t ldx, std::size_t t0,
           float* y, std::size_t ldy) {
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    // Whole blocks of 16 columns by plain loads (masked loads on every block took more than half the time
    // on Zen 4: 42 -> 99 GMAC/s at 64 tokens, 30 -> 31-36 GB/s at one), then the rows' last columns masked.
    const auto step = [&](std::size_t c, auto loadX, auto loadW) {
        __m512 xv[NT];
        for (int t = 0; t < NT; ++t) xv[t] = loadX(x + (t0 + t) * ldx + c);
        for (int r = 0; r < NR; ++r) {
            const __m512 wv = widenWeights(loadW(w + (r0 + r) * cols + c));
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    };
    std::size_t c = 0;
    for (; c + 16 <= cols; c += 16)
        step(c, [](const float* p) { return _mm512_loadu_ps(p); },
             [](const W* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); });
    if (c < cols) {
        const auto m = static_cast<__mmask16>((1u << (cols - c)) - 1);
        step(c, [m](const float* p) { return _mm512_maskz_loadu_ps(m, p); }, [m](const W* p) { return _mm256_maskz_loadu_epi16(m, p); });
    }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t)
            y[(t0 + t) * ldy + r0 + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <int NT, class W>
void rowsFor(const W* w, std::size_t cols, std::size_t r0, std::size_t r1, const float* x, std::size_t ldx,
             std::size_t t0, float* y, std::size_t ldy) {
    std::size_t r = r0;
    for (; r + 4 <= r1; r += 4) block<4, NT>(w, cols, r, x, ldx, t0, y, ldy);
    for (; r < r1; ++r) block<1, NT>(w, cols, r, x, ldx, t0, y, ldy);
}

template <class W>
void dense(const W* w, std::size_t cols, std::size_t r0, std::size_t r1, const float* x,
           std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy) {
    // Rows in slices whose weights stay in L2 (256 KB) while every token block passes over them.
    const std::size_t slice = std::max<std::size_t>(4, (256 * 1024 / sizeof(W) / std::max<std::size_t>(cols, 1)) / 4 * 4);
    for (std::size_t s0 = r0; s0 < r1; s0 += slice) {
        const std::size_t s1 = std::min(r1, s0 + slice);
        std::size_t t = 0;
        for (; t + 4 <= tokens; t += 4) rowsFor<4>(w, cols, s0, s1, x, ldx, t, y, ldy);
        switch (tokens - t) {
        case 3: rowsFor<3>(w, cols, s0, s1, x, ldx, t, y, ldy); break;
        case 2: rowsFor<2>(w, cols, s0, s1, x, ldx, t, y, ldy); break;
        case 1: rowsFor<1>(w, cols, s0, s1, x, ldx, t, y, ldy); break;
        default: break;
        }
    }
}

}  // namespace

void denseBf16Avx512(const std::uint16_t* w, std::size_t cols, std::size_t r0, std::size_t r1, const float* x,
                     std::size_t ldx, std::size_t tokens, float* y, std::size_t ldy) {
    dense(w, cols, r0, r1, x, ldx, tokens, y, ldy);
}

namespace {

// Int8 weights x int8 activations with VNNI: 64 products a vpdpbusd per row and token. vpdpbusd takes
// unsigned bytes on one side, so the weights are shifted into 0..254 (w + 128, an XOR with 0x80) and
// 128 x the activations' sum is taken off again: Σ (w + 128) q = Σ w q + 128 Σ q.

template <int NR, int NT>
void blockVnni(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, const Int8Rows& x,
               std::size_t t0, float* y, std::size_t ldy) {
    __m512i acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_si512();
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    // Whole blocks of 64 columns by plain loads (a masked load on every block cost 30% of the time on Zen
    // 4: 148 -> 211 GMAC/s at 64 tokens), then the rows' last columns masked: past a row's end 0 ^ 0x80,
    // against the activations' zero padding.
    const auto step = [&](std::size_t c, auto load) {
        __m512i xv[NT];
        for (int t = 0; t < NT; ++t) xv[t] = _mm512_loadu_si512(x.q + (t0 + t) * x.ld + c);  // padded with zeros
        for (int r = 0; r < NR; ++r) {
            const __m512i wv = _mm512_xor_si512(load(w + (r0 + r) * cols + c), flip);
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_dpbusd_epi32(acc[r][t], wv, xv[t]);
        }
    };
    std::size_t c = 0;
    for (; c + 64 <= cols; c += 64) step(c, [](const std::int8_t* p) { return _mm512_loadu_si512(p); });
    if (c < cols) {
        const __mmask64 m = (__mmask64(1) << (cols - c)) - 1;
        step(c, [m](const std::int8_t* p) { return _mm512_maskz_loadu_epi8(m, p); });
    }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) {
            const std::int64_t sum = static_cast<std::int64_t>(_mm512_reduce_add_epi32(acc[r][t])) - 128 * static_cast<std::int64_t>(x.sums[t0 + t]);
            y[(t0 + t) * ldy + r0 + r] = static_cast<float>(sum) * rowScales[r0 + r] * x.scales[t0 + t];
        }
}

template <int NT>
void rowsVnni(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1, const Int8Rows& x,
              std::size_t t0, float* y, std::size_t ldy) {
    std::size_t r = r0;
    // One token: each row read from its start to its end, one after another, so a thread's weights are one
    // sequential stream that the hardware prefetcher follows. On the output head (151936 x 2048 int8, two
    // Zen 4 cores) 58.6 GB/s, against 26.0 for four rows at a time (four streams 2 KB apart) with masked
    // loads and software prefetch eight rows ahead, the machine's plain read 45-50 GB/s at the time. From
    // L3 it reads 112 GB/s (56 a core), above what a core gets from memory on any machine here.
    if constexpr (NT > 1)
        for (; r + 4 <= r1; r += 4) blockVnni<4, NT>(w, rowScales, cols, r, x, t0, y, ldy);
    for (; r < r1; ++r) blockVnni<1, NT>(w, rowScales, cols, r, x, t0, y, ldy);
}

}  // namespace

void denseInt8Avx512(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                     const Int8Rows& x, std::size_t tokens, float* y, std::size_t ldy) {
    int8SlicesAndTokenBlocks(cols, r0, r1, tokens, [&]<int NT>(std::size_t s0, std::size_t s1, std::size_t t) {
        rowsVnni<NT>(w, rowScales, cols, s0, s1, x, t, y, ldy);
    });
}

}  // namespace tandem::cpu
