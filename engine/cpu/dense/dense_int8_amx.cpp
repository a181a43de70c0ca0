// Int8 dense products on AMX (dense_int8_amx.h). Every step multiplies two A tiles (32 weight rows
// over 64 columns, loaded from the matrix with its row stride) by two B tiles (32 tokens over the same
// columns, packed) into four int32 result tiles:
//   tiles 0-3: C0 = A0*B0, C1 = A0*B1, C2 = A1*B0, C3 = A1*B1;  tiles 4-5: A0, A1;  tiles 6-7: B0, B1.
// tdpbssd multiplies signed by signed bytes, so unlike the VNNI kernel no +128 shift (and no
// correction by the activations' sums) is needed. C holds rows x tokens while y is tokens x rows, so the
// epilogue transposes 16 x 16 blocks in registers; the packing of the activations into VNNI order is
// the same transpose (16 tokens x 16 four-byte column groups). Built with AMX and AVX-512 flags; with
// TANDEM_AMX_EMULATE (tests) the tile operations are emulated (amx_tiles.h) and the public functions
// are named in tandem::cpu::amx_emulated, beside the real ones.
#include "cpu/dense/dense_int8_amx.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "cpu/kernels/amx/amx_tiles.h"

namespace tandem::cpu {

namespace {

constexpr std::size_t kTileBytes = 1024;

// Rows of weights in a slice whose bytes stay in L2 while every block of tokens passes over them, as
// the VNNI kernel does (int8SlicesAndTokenBlocks), in whole 32-row steps. The emulated build (tests)
// takes 16 KiB, so that the test shapes run several slices.
std::size_t sliceRows(std::size_t cols) {
#ifdef TANDEM_AMX_EMULATE
    constexpr std::size_t kSliceBytes = 16 * 1024;
#else
    constexpr std::size_t kSliceBytes = 256 * 1024;
#endif
    return std::max<std::size_t>(32, kSliceBytes / cols / 32 * 32);
}

// v[i] holds 16 four-byte elements of row i; afterwards v[j] holds element j of every row.
inline void transpose16(__m512i v[16]) {
    __m512i t[16];
    // Within each 128-bit lane: pairs of rows interleaved, then quads, so that u[4i + j] holds, in lane
    // L, element 4L + j of rows 4i .. 4i + 3.
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    // Then the lanes: element 4L + j of all rows is lane L of v[j], v[4 + j], v[8 + j], v[12 + j].
    for (int j = 0; j < 4; ++j) {
        const __m512i w0 = _mm512_shuffle_i32x4(v[j], v[4 + j], 0x44);  // lanes 0, 1 of each
        const __m512i w1 = _mm512_shuffle_i32x4(v[j], v[4 + j], 0xee);  // lanes 2, 3
        const __m512i w2 = _mm512_shuffle_i32x4(v[8 + j], v[12 + j], 0x44);
        const __m512i w3 = _mm512_shuffle_i32x4(v[8 + j], v[12 + j], 0xee);
        t[j] = _mm512_shuffle_i32x4(w0, w2, 0x88);       // lane 0 of the four
        t[4 + j] = _mm512_shuffle_i32x4(w0, w2, 0xdd);   // lane 1
        t[8 + j] = _mm512_shuffle_i32x4(w1, w3, 0x88);   // lane 2
        t[12 + j] = _mm512_shuffle_i32x4(w1, w3, 0xdd);  // lane 3
    }
    for (int i = 0; i < 16; ++i) v[i] = t[i];
}

// A0/C0/C1 with rows0 rows, A1/C2/C3 with rows1 (0: unused, for the last rows of a range), B0 and B1
// 16 rows of four-byte column groups; every tile 64 bytes wide.
void configureTiles(int rows0, int rows1) {
    TileConfig cfg;
    auto set = [&](int tile, int rows) {
        cfg.rows[tile] = static_cast<std::uint8_t>(rows);
        cfg.colsb[tile] = static_cast<std::uint16_t>(rows ? 64 : 0);
    };
    set(0, rows0);
    set(1, rows0);
    set(4, rows0);
    set(2, rows1);
    set(3, rows1);
    set(5, rows1);
    set(6, 16);
    set(7, 16);
    TANDEM_TILE_CONFIG(cfg);
}

struct Product {
    const std::int8_t* w;
    const float* rowScales;
    std::size_t cols;
    const std::int8_t* packed;
    const float* scales;
    std::size_t tokens;
    float* y;
    std::size_t ldy;
};

// The rows0 + rows1 rows from rb by token group g and, with Pair, g + 1, over all columns; then
// y = sum * rowScale * tokenScale (in the VNNI kernel's order, so both give the same floats) for the
// rows and tokens that exist.
template <bool Pair, bool Two>
void block(const Product& p, std::size_t rb, int rows0, int rows1, std::size_t g) {
    const std::size_t kBlocks = p.cols / 64;
    const std::int8_t* b = p.packed + g * kBlocks * kTileBytes;
    const std::int8_t* a = p.w + rb * p.cols;
    TANDEM_TILE_ZERO(0);
    if constexpr (Pair) TANDEM_TILE_ZERO(1);
    if constexpr (Two) TANDEM_TILE_ZERO(2);
    if constexpr (Two && Pair) TANDEM_TILE_ZERO(3);
    for (std::size_t kb = 0; kb < kBlocks; ++kb) {
        TANDEM_TILE_LOAD(6, b + kb * kTileBytes, 64);
        if constexpr (Pair) TANDEM_TILE_LOAD(7, b + (kBlocks + kb) * kTileBytes, 64);
        TANDEM_TILE_LOAD(4, a + kb * 64, p.cols);
        TANDEM_TILE_DPBSSD(0, 4, 6);
        if constexpr (Pair) TANDEM_TILE_DPBSSD(1, 4, 7);
        if constexpr (Two) {
            TANDEM_TILE_LOAD(5, a + 16 * p.cols + kb * 64, p.cols);
            TANDEM_TILE_DPBSSD(2, 5, 6);
            if constexpr (Pair) TANDEM_TILE_DPBSSD(3, 5, 7);
        }
    }
    // 32 rows of 32 tokens' sums, 128 bytes apart.
    alignas(64) std::int32_t c[32 * 32];
    TANDEM_TILE_STORE(0, c, 128);
    if constexpr (Pair) TANDEM_TILE_STORE(1, c + 16, 128);
    if constexpr (Two) TANDEM_TILE_STORE(2, c + 512, 128);
    if constexpr (Two && Pair) TANDEM_TILE_STORE(3, c + 528, 128);

    for (int h = 0; h < (Two ? 2 : 1); ++h) {
        const int rows = h ? rows1 : rows0;
        const std::size_t r = rb + 16 * h;
        const auto rowMask = static_cast<__mmask16>((1u << rows) - 1);
        for (int q = 0; q < (Pair ? 2 : 1); ++q) {
            const std::size_t t0 = (g + q) * 16;
            const int count = static_cast<int>(std::min<std::size_t>(16, p.tokens - t0));
            const __m512 xs = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), p.scales + t0);
            __m512i v[16];
            for (int i = 0; i < 16; ++i) {
                if (i >= rows) {
                    v[i] = _mm512_setzero_si512();
                    continue;
                }
                const __m512 sum = _mm512_cvtepi32_ps(_mm512_load_si512(c + (16 * h + i) * 32 + 16 * q));
                v[i] = _mm512_castps_si512(_mm512_mul_ps(_mm512_mul_ps(sum, _mm512_set1_ps(p.rowScales[r + i])), xs));
            }
            transpose16(v);
            for (int t = 0; t < count; ++t)
                _mm512_mask_storeu_ps(p.y + (t0 + t) * p.ldy + r, rowMask, _mm512_castsi512_ps(v[t]));
        }
    }
}

// Rows [s0, s1) in blocks of rows0 + rows1 (the tiles as configured) for every pair of token groups.
void rowsByTokenPairs(const Product& p, std::size_t s0, std::size_t s1, int rows0, int rows1) {
    const std::size_t groups = (p.tokens + 15) / 16;
    const std::size_t step = static_cast<std::size_t>(rows0 + rows1);
    for (std::size_t g = 0; g < groups; g += 2) {
        const bool pair = g + 1 < groups;
        for (std::size_t rb = s0; rb < s1; rb += step) {
            if (pair && rows1) block<true, true>(p, rb, rows0, rows1, g);
            else if (pair) block<true, false>(p, rb, rows0, rows1, g);
            else if (rows1) block<false, true>(p, rb, rows0, rows1, g);
            else block<false, false>(p, rb, rows0, rows1, g);
        }
    }
}

// The per-thread packed activations, grown on demand.
class PackBuffer {
public:
    ~PackBuffer() { std::free(data_); }
    std::int8_t* bytes(std::size_t n) {
        n = (n + 63) / 64 * 64;
        if (n > bytes_) {
            std::free(data_);
            data_ = std::aligned_alloc(64, n);
            if (!data_) throw std::bad_alloc();
            bytes_ = n;
        }
        return static_cast<std::int8_t*>(data_);
    }

private:
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
};

void pack(const Int8Rows& x, std::size_t cols, std::size_t tokens, std::int8_t* packed) {
    const std::size_t kBlocks = cols / 64;
    for (std::size_t g = 0; g * 16 < tokens; ++g)
        for (std::size_t kb = 0; kb < kBlocks; ++kb) {
            // Token n's 64 bytes are 16 four-byte groups; tile row j is group j of every token.
            __m512i v[16];
            for (std::size_t n = 0; n < 16; ++n) {
                const std::size_t t = g * 16 + n;
                v[n] = t < tokens ? _mm512_loadu_si512(x.q + t * x.ld + kb * 64) : _mm512_setzero_si512();
            }
            transpose16(v);
            std::int8_t* tile = packed + (g * kBlocks + kb) * kTileBytes;
            for (int j = 0; j < 16; ++j) _mm512_store_si512(tile + 64 * j, v[j]);
        }
}

void densePacked(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                 const std::int8_t* packed, const float* scales, std::size_t tokens, float* y, std::size_t ldy) {
    if (r1 <= r0 || tokens == 0 || cols == 0) return;
    const Product p{w, rowScales, cols, packed, scales, tokens, y, ldy};
    // Whole 32-row blocks in slices, then the rest (1-31 rows) with tiles of fewer rows, so no tile
    // reads a row outside [r0, r1).
    const std::size_t full = r0 + (r1 - r0) / 32 * 32;
    if (full > r0) {
        configureTiles(16, 16);
        const std::size_t slice = sliceRows(cols);
        for (std::size_t s0 = r0; s0 < full; s0 += slice) rowsByTokenPairs(p, s0, std::min(full, s0 + slice), 16, 16);
    }
    if (full < r1) {
        const int rest = static_cast<int>(r1 - full);
        const int rows0 = std::min(rest, 16);
        configureTiles(rows0, rest - rows0);
        rowsByTokenPairs(p, full, r1, rows0, rest - rows0);
    }
    // Hands the tile state back, as the expert kernels do: an idle thread then does not carry 8 KiB of
    // AMX state through context switches, and the next AMX call configures its own tiles.
    TANDEM_TILE_RELEASE();
}

}  // namespace

#ifdef TANDEM_AMX_EMULATE
namespace amx_emulated {
#endif

void packInt8ForAmx(const Int8Rows& x, std::size_t cols, std::size_t tokens, std::int8_t* packed) {
    pack(x, cols, tokens, packed);
}

void denseInt8AmxPacked(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                        const std::int8_t* packed, const float* scales, std::size_t tokens, float* y, std::size_t ldy) {
    densePacked(w, rowScales, cols, r0, r1, packed, scales, tokens, y, ldy);
}

void denseInt8Amx(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                  const Int8Rows& x, std::size_t tokens, float* y, std::size_t ldy) {
    if (r1 <= r0 || tokens == 0 || cols == 0) return;
    thread_local PackBuffer buffer;
    std::int8_t* packed = buffer.bytes(int8AmxPackedBytes(cols, tokens));
    pack(x, cols, tokens, packed);
    densePacked(w, rowScales, cols, r0, r1, packed, x.scales, tokens, y, ldy);
}

#ifdef TANDEM_AMX_EMULATE
}  // namespace amx_emulated
#endif

}  // namespace tandem::cpu
