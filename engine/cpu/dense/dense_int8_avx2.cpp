// Int8 dense weights x int8 activations on AVX2, for CPUs without AVX-512 (dense_avx512.h's denseInt8Avx2;
// compiled with the AVX2 flags). 32 products at a time: vpmaddubsw multiplies |w| (unsigned) by q carrying
// w's sign, pairs summed in 16 bits (at most 2 x 128 x 127 = 32512, no saturation: the activations are
// symmetric in [-127, 127]), then vpmaddwd widens the pairs to 32-bit sums.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/dense/dense_avx512.h"

namespace tandem::cpu {

namespace {

inline std::int32_t horizontalSum(__m256i v) {
    const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1)));
}

template <int NR, int NT>
void block(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, const Int8Rows& x,
           std::size_t t0, float* y, std::size_t ldy) {
    __m256i acc[NR][NT];
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    alignas(32) std::int8_t tail[NR][32];
    for (std::size_t c = 0; c < cols; c += 32) {
        __m256i xv[NT];
        for (int t = 0; t < NT; ++t)  // padded with zeros to a multiple of 64
            xv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + (t0 + t) * x.ld + c));
        for (int r = 0; r < NR; ++r) {
            const std::int8_t* row = w + (r0 + r) * cols + c;
            __m256i wv;
            if (c + 32 <= cols) {
                wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row));
            } else {  // the row's last columns, without reading past it
                std::memset(tail[r], 0, 32);
                std::memcpy(tail[r], row, cols - c);
                wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(tail[r]));
            }
            const __m256i magnitude = _mm256_sign_epi8(wv, wv);
            for (int t = 0; t < NT; ++t) {
                const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(xv[t], wv));
                acc[r][t] = _mm256_add_epi32(acc[r][t], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t)
            y[(t0 + t) * ldy + r0 + r] = static_cast<float>(horizontalSum(acc[r][t])) * rowScales[r0 + r] * x.scales[t0 + t];
}

template <int NT>
void rows(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1, const Int8Rows& x,
          std::size_t t0, float* y, std::size_t ldy) {
    // One token: each row whole, one after another (one sequential stream a thread, as dense_avx512.cpp's
    // rowsVnni): 22.5 -> 52 GB/s on the output head against four rows at a time.
    constexpr int NR = NT == 1 ? 1 : 2;  // 8 sums in registers at most
    std::size_t r = r0;
    for (; r + NR <= r1; r += NR) block<NR, NT>(w, rowScales, cols, r, x, t0, y, ldy);
    for (; r < r1; ++r) block<1, NT>(w, rowScales, cols, r, x, t0, y, ldy);
}

}  // namespace

void denseInt8Avx2(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                   const Int8Rows& x, std::size_t tokens, float* y, std::size_t ldy) {
    int8SlicesAndTokenBlocks(cols, r0, r1, tokens, [&]<int NT>(std::size_t s0, std::size_t s1, std::size_t t) {
        rows<NT>(w, rowScales, cols, s0, s1, x, t, y, ldy);
    });
}

}  // namespace tandem::cpu
