// AMX kernels for many rows per expert (prefill): tdpbf16ps for BF16 experts, tdpbsud (signed int8
// activations x unsigned int8 weights) for INT8. The packed blocks are B tiles as they lie; activation
// rows are A tiles loaded with their row stride. Every step multiplies two A tiles (32 rows) by two B
// tiles (gate and up of one panel, or two down panels) into four result tiles:
//   tiles 0-3: C0 = A0*B0, C1 = A0*B1, C2 = A1*B0, C3 = A1*B1;  tiles 4-5: A0, A1;  tiles 6-7: B0, B1.
// BF16 activations are split in hi and lo (activation_quant.h): a step loads A0 and A1 from the hi
// halves, multiplies, then reloads them from the lo halves and multiplies into the same C tiles, so
// the B tiles loaded once serve both and C holds W.hi + W.lo in float32. That doubles the tile
// products of BF16 (prefill compute), not the weight bytes.
// Gate/up and down keep their results in a float32 (int32) buffer between cache blocks of K, so that
// a block of weights is read from memory once and reused for every 32 rows, and the activations of a
// block stay in L2 for every panel (activationSliceBytes). INT4 and MXFP4, whose 32-column groups each
// carry their own scale, take tdpbssd one group at a time (tileGateUpGrouped4 below). Few-row calls use the
// AVX-512 kernels. Built with AMX and AVX-512 flags; with TANDEM_AMX_EMULATE (tests) the tile
// operations are emulated (amx_tiles.h).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string_view>
#include <vector>

#include "cpu/kernels/amx/amx_peak.h"
#include "cpu/kernels/amx/amx_tiles.h"
#include "cpu/kernels/kernel_rows.h"
#include "cpu/kernels/avx512/kernels_avx512.h"
#include "cpu/kernels/avx512/simd_avx512.h"
#include "tandem/tuning.h"

namespace tandem::cpu {

namespace {

// Rows of A0 and A1 and the bytes of K per A row in the loaded configuration; -1: none loaded in this
// thread.
struct TileShape {
    int rows0 = -1, rows1 = -1, aBytes = -1;
};
thread_local TileShape loadedShape;

// A tiles of aBytes per row (64: a whole tile's K; INT4 uses 32, one scale group), B tiles of aBytes / 4
// rows, C tiles of 16 int32 or float32 columns.
void configureTiles(int rows0, int rows1, int aBytes = 64) {
    if (loadedShape.rows0 == rows0 && loadedShape.rows1 == rows1 && loadedShape.aBytes == aBytes) return;
    TileConfig cfg;
    auto set = [&](int tile, int rows, int bytes) {
        cfg.rows[tile] = static_cast<std::uint8_t>(rows);
        cfg.colsb[tile] = static_cast<std::uint16_t>(rows ? bytes : 0);
    };
    set(0, rows0, 64);
    set(1, rows0, 64);
    set(4, rows0, aBytes);
    set(2, rows1, 64);
    set(3, rows1, 64);
    set(5, rows1, aBytes);
    set(6, aBytes / 4, 64);
    set(7, aBytes / 4, 64);
    TANDEM_TILE_CONFIG(cfg);
    loadedShape = {rows0, rows1, aBytes};
}

// Hands the tile state back after each call, so an idle thread does not carry 8 KiB of AMX state
// through context switches.
void releaseTiles() {
    TANDEM_TILE_RELEASE();
    loadedShape = {};
}

// Rows of the two A tiles for the 32 rows from tb.
inline void tileRows(int rows, int tb, int& r0, int& r1) {
    r0 = rows - tb < 16 ? rows - tb : 16;
    r1 = rows - tb - 16 <= 0 ? 0 : (rows - tb - 16 < 16 ? rows - tb - 16 : 16);
}

// The four C tiles (C1 and C3 only with `pair`, C2 and C3 only with `r1`) kept as 32 rows of 32
// four-byte sums at cb, 128 bytes apart: started from zero or from cb, and stored back.
inline void startC(const void* cb, bool zero, bool r1, bool pair) {
    const auto* f = static_cast<const float*>(cb);
    if (zero) {
        TANDEM_TILE_ZERO(0);
        if (pair) TANDEM_TILE_ZERO(1);
        if (r1) TANDEM_TILE_ZERO(2);
        if (r1 && pair) TANDEM_TILE_ZERO(3);
        return;
    }
    TANDEM_TILE_LOAD(0, f, 128);
    if (pair) TANDEM_TILE_LOAD(1, f + 16, 128);
    if (r1) TANDEM_TILE_LOAD(2, f + 512, 128);
    if (r1 && pair) TANDEM_TILE_LOAD(3, f + 528, 128);
}

inline void storeC(void* cb, bool r1, bool pair) {
    auto* f = static_cast<float*>(cb);
    TANDEM_TILE_STORE(0, f, 128);
    if (pair) TANDEM_TILE_STORE(1, f + 16, 128);
    if (r1) TANDEM_TILE_STORE(2, f + 512, 128);
    if (r1 && pair) TANDEM_TILE_STORE(3, f + 528, 128);
}

// Per-thread result buffer, grown on demand.
class Scratch {
public:
    ~Scratch() { std::free(data_); }
    float* floats(std::size_t n) {
        const std::size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
        if (bytes > bytes_) {
            std::free(data_);
            data_ = std::aligned_alloc(64, bytes);
            if (!data_) throw std::bad_alloc();
            bytes_ = bytes;
        }
        return static_cast<float*>(data_);
    }

private:
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
};
thread_local Scratch scratch;

// The expert type's tile product: bf16 pairs into float32, or int8 quads into int32. A macro because
// the intrinsics take tile numbers as literals.
#define TANDEM_TILE_DOT(c, a, b)                           \
    do {                                                   \
        if constexpr (Type == ExpertType::BF16)            \
            TANDEM_TILE_DPBF16PS(c, a, b);                 \
        else                                               \
            TANDEM_TILE_DPBSUD(c, a, b);                   \
    } while (0)

int rowSum(const KernelRows& k, int r, int firstGroup, int groups) {
    const std::int32_t* s = k.groupSums + static_cast<std::size_t>(r) * k.groupSumStride + firstGroup;
    int sum = 0;
    for (int g = 0; g < groups; ++g) sum += s[g];
    return sum;
}

// Blocking of the BF16/INT8 kernels (tandem::Tuning), read once, at the first call (this file is
// compiled for AMX and AVX-512, so nothing in it may run at program start on other CPUs).
// A size in KiB; the emulated build (tests) takes `emulatedKib` instead, so that the test shapes run
// several blocks and groups.
std::size_t kibSetting([[maybe_unused]] int settingKib, int emulatedKib) {
#ifdef TANDEM_AMX_EMULATE
    return static_cast<std::size_t>(emulatedKib) << 10;
#else
    return static_cast<std::size_t>(settingKib) << 10;
#endif
}
// Bytes of activations (every row of a call over one cache block of inputs) that gate/up keeps in L2
// while every panel passes over them: about half of a Sapphire Rapids core's 2 MiB
// (Tuning::amxSliceKib).
std::size_t activationSliceBytes() {
    static const std::size_t n = kibSetting(tuning().amxSliceKib, 16);
    return n;
}
// At most this many K blocks per cache block (0: only activationSliceBytes bounds it). Capping it so
// that a panel's blocks over one cache block stay in L1 (16: 32 KiB) was measured on the GPU machine
// and lost as often as it won (docs/BENCHMARKS.md), so by default the cache block is as long as the
// activation slice allows.
int cacheBlocksMax() {
    static const int n = tuning().amxCacheBlocksMax;
    return n;
}
// Sums of this many bytes at most wait between cache blocks (a group of panels at a time), so they
// stay in L2 next to the activations (Tuning::amxAccKib).
std::size_t accBytes() {
    static const std::size_t n = kibSetting(tuning().amxAccKib, 16);
    return n;
}

// Weights are streamed from memory by the first 32 rows of each panel (later rows find them in L2):
// those rows ask for the B tiles 2 K blocks ahead, which took 8-18% off a 512-token layer on the GPU
// machine's Xeon (docs/BENCHMARKS.md). Tuning::amxPrefetchBlocks is the distance (0: the hardware
// prefetchers alone).
int weightPrefetchBlocks() {
    static const int n = tuning().amxPrefetchBlocks;
    return n;
}

inline void prefetchBytes(const std::byte* p, std::size_t bytes) {
    for (std::size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

// Gate/up, for each group of panels, loops over cache blocks of the inputs, then panels, then rows:
// the rows' activations over one cache block stay in L2 while every panel of the group passes over
// them, and each panel's weights over the block are read from memory once and reused for every 32
// rows. The float32 (int32) sums of the group's panels wait in a scratch buffer between blocks.
// (With the panels outermost, as before, each panel re-read all the rows' activations: 3.7 MB per 16
// outputs for DeepSeek-V3 at 128 rows of split BF16, from L3.)
template <ExpertType Type>
void tileGateUp(const GateUpCall& c) {
    const ExpertLayout& l = *c.layout;
    const int rows = c.x.rows;
    if (rows <= 0) return;
    const int rowsPad = (rows + 31) / 32 * 32;
    const int kBlocks = l.hiddenKBlocks();
    const std::size_t xs = c.x.stride;
    // The activation parts each step multiplies: BF16 the hi then the lo half, INT8 the row.
    const int parts = Type == ExpertType::BF16 ? 2 : 1;
    const std::size_t partOffset[2] = {0, c.x.loOffset};
    const std::size_t sliceBytes = static_cast<std::size_t>(rows) * l.kBlock * l.activationBytes();
    int cacheBlocks = std::clamp(static_cast<int>(activationSliceBytes() / sliceBytes), 1, kBlocks);
    if (cacheBlocksMax() > 0) cacheBlocks = std::min(cacheBlocks, cacheBlocksMax());
    // acc: per panel of the group, per row, 16 gate then 16 up sums (float32 for BF16, int32 for INT8);
    // then for INT8 each row's activation sum, taken once per call rather than once per panel.
    const std::size_t panelFloats = static_cast<std::size_t>(rowsPad) * 32;
    const int group = std::clamp(static_cast<int>(accBytes() / (panelFloats * sizeof(float))), 1, std::max(1, c.panelCount));
    float* acc = scratch.floats(panelFloats * group + rowsPad);
    auto* rowSums = reinterpret_cast<int*>(acc + panelFloats * group);
    const int ahead = weightPrefetchBlocks();
    if constexpr (Type == ExpertType::INT8)
        for (int r = 0; r < rows; ++r) rowSums[r] = rowSum(c.x, r, 0, l.hiddenPad / kActGroup);
    for (int pg = 0; pg < c.panelCount; pg += group) {
        for (int kc = 0; kc < kBlocks; kc += cacheBlocks) {
            const int kcEnd = kc + cacheBlocks < kBlocks ? kc + cacheBlocks : kBlocks;
            for (int p = pg; p < std::min(c.panelCount, pg + group); ++p) {
                const std::byte* panel = c.panels + p * l.gateUpPanelBytes;
                float* pacc = acc + panelFloats * (p - pg);
                for (int tb = 0; tb < rows; tb += 32) {
                    int r0, r1;
                    tileRows(rows, tb, r0, r1);
                    configureTiles(r0, r1);
                    float* cb = pacc + static_cast<std::size_t>(tb) * 32;
                    startC(cb, kc == 0, r1 > 0, true);
                    const std::byte* a = c.x.data + tb * xs;
                    for (int kb = kc; kb < kcEnd; ++kb) {
                        const std::byte* blk = panel + kb * 2 * l.blockBytes;
                        if (tb == 0 && ahead > 0 && kb + ahead < kcEnd) prefetchBytes(blk + ahead * 2 * l.blockBytes, 2 * l.blockBytes);
                        TANDEM_TILE_LOAD(6, blk, 64);
                        TANDEM_TILE_LOAD(7, blk + 1024, 64);
                        for (int part = 0; part < parts; ++part) {
                            const std::byte* ak = a + partOffset[part] + kb * 64;
                            TANDEM_TILE_LOAD(4, ak, xs);
                            TANDEM_TILE_DOT(0, 4, 6);
                            TANDEM_TILE_DOT(1, 4, 7);
                            if (r1) {
                                TANDEM_TILE_LOAD(5, ak + 16 * xs, xs);
                                TANDEM_TILE_DOT(2, 5, 6);
                                TANDEM_TILE_DOT(3, 5, 7);
                            }
                        }
                    }
                    storeC(cb, r1 > 0, true);
                }
                if (kcEnd < kBlocks) continue;
                const int col = (c.firstPanel + p) * kPanelRows;
                for (int r = 0; r < rows; ++r) {
                    const float* cr = pacc + static_cast<std::size_t>(r) * 32;
                    __m512 g, u;
                    if constexpr (Type == ExpertType::BF16) {
                        g = _mm512_load_ps(cr);
                        u = _mm512_load_ps(cr + 16);
                    } else {
                        const auto* scales = reinterpret_cast<const float*>(panel + kBlocks * 2 * l.blockBytes);
                        const __m512i corr = _mm512_set1_epi32(128 * rowSums[r]);
                        const __m512 xsc = _mm512_set1_ps(c.x.scale[r]);
                        g = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(cr), corr)),
                                          _mm512_mul_ps(_mm512_load_ps(scales), xsc));
                        u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(cr + 16), corr)),
                                          _mm512_mul_ps(_mm512_load_ps(scales + 16), xsc));
                    }
                    _mm512_storeu_ps(c.act + static_cast<std::size_t>(r) * c.actStride + col, gatedAct512(g, u, c.epilogue, col));
                }
            }
        }
    }
    releaseTiles();
}

struct DownBlock {
    std::size_t offset, panelBytes;
};
thread_local std::vector<DownBlock> downBlocks;

// Down, blocked the same way: for each group of panel pairs, cache blocks of the call's K blocks
// (its chunks' columns) outermost, then pairs, then rows, with the sums of the group's pairs waiting
// in the scratch buffer between cache blocks. Every chunk but the last is whole, so K block i of the
// call is chunk firstChunk + i / (kChunkCols / kBlock), block i % (kChunkCols / kBlock), and its
// activation columns start at (firstChunk * kChunkCols + i * kBlock).
template <ExpertType Type>
void tileDown(const DownCall& c) {
    const ExpertLayout& l = *c.layout;
    const int rows = c.act.rows;
    if (rows <= 0) return;
    const int rowsPad = (rows + 31) / 32 * 32;
    const std::size_t as = c.act.stride;
    const std::size_t elementBytes = Type == ExpertType::BF16 ? 2 : 1;  // within one part
    const int parts = Type == ExpertType::BF16 ? 2 : 1;
    const std::size_t partOffset[2] = {0, c.act.loOffset};
    const std::size_t base = l.chunkOffset(c.firstChunk);
    const int perChunk = kChunkCols / l.kBlock;
    int kBlocks = 0, chunkCols = 0;
    for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch) {
        kBlocks += l.chunkKBlocks(ch);
        chunkCols += l.chunkCols(ch);
    }
    const std::size_t sliceBytes = static_cast<std::size_t>(rows) * l.kBlock * l.activationBytes();
    int cacheBlocks = std::clamp(static_cast<int>(activationSliceBytes() / sliceBytes), 1, std::max(1, kBlocks));
    if (cacheBlocksMax() > 0) cacheBlocks = std::min(cacheBlocks, cacheBlocksMax());
    const int pairs = (c.panelCount + 1) / 2;
    const std::size_t pairFloats = static_cast<std::size_t>(rowsPad) * 32;  // [row][panel q | q + 1]
    const int group = std::clamp(static_cast<int>(accBytes() / (pairFloats * sizeof(float))), 1, std::max(1, pairs));
    float* acc = scratch.floats(pairFloats * group + rowsPad);
    int* rowSums = reinterpret_cast<int*>(acc + pairFloats * group);  // INT8: each row's sum over the call's chunks
    const int ahead = weightPrefetchBlocks();
    if constexpr (Type == ExpertType::INT8)
        for (int r = 0; r < rows; ++r) rowSums[r] = rowSum(c.act, r, c.firstChunk * kChunkCols / kActGroup, chunkCols / kActGroup);
    // K block i of panel q lies at chunks + at[i].offset + q * at[i].panelBytes: worked out once a call,
    // so the tile loop does no division or layout lookup per block.
    downBlocks.resize(static_cast<std::size_t>(kBlocks));
    for (int i = 0; i < kBlocks; ++i) {
        const int ch = c.firstChunk + i / perChunk;
        downBlocks[i] = {l.chunkOffset(ch) - base + static_cast<std::size_t>(i % perChunk) * l.blockBytes, l.chunkPanelBytes(ch)};
    }
    const DownBlock* at = downBlocks.data();
    auto blockOf = [&](int i, int q) { return c.chunks + at[i].offset + static_cast<std::size_t>(q) * at[i].panelBytes; };
    const std::byte* a0 = c.act.data + static_cast<std::size_t>(c.firstChunk) * kChunkCols * elementBytes;
    for (int pg = 0; pg < pairs; pg += group) {
        for (int kc = 0; kc < kBlocks; kc += cacheBlocks) {
            const int kcEnd = kc + cacheBlocks < kBlocks ? kc + cacheBlocks : kBlocks;
            for (int pi = pg; pi < std::min(pairs, pg + group); ++pi) {
                const int q = c.firstPanel + 2 * pi;
                const bool pair = q + 1 < c.firstPanel + c.panelCount;
                float* pacc = acc + pairFloats * (pi - pg);
                for (int tb = 0; tb < rows; tb += 32) {
                    int r0, r1;
                    tileRows(rows, tb, r0, r1);
                    configureTiles(r0, r1);
                    float* cb = pacc + static_cast<std::size_t>(tb) * 32;
                    startC(cb, kc == 0, r1 > 0, pair);
                    const std::byte* a = a0 + tb * as;
                    for (int i = kc; i < kcEnd; ++i) {
                        if (tb == 0 && ahead > 0 && i + ahead < kcEnd) {
                            prefetchBytes(blockOf(i + ahead, q), l.blockBytes);
                            if (pair) prefetchBytes(blockOf(i + ahead, q + 1), l.blockBytes);
                        }
                        TANDEM_TILE_LOAD(6, blockOf(i, q), 64);
                        if (pair) TANDEM_TILE_LOAD(7, blockOf(i, q + 1), 64);
                        for (int part = 0; part < parts; ++part) {
                            const std::byte* ak = a + partOffset[part] + static_cast<std::size_t>(i) * l.kBlock * elementBytes;
                            TANDEM_TILE_LOAD(4, ak, as);
                            TANDEM_TILE_DOT(0, 4, 6);
                            if (pair) TANDEM_TILE_DOT(1, 4, 7);
                            if (r1) {
                                TANDEM_TILE_LOAD(5, ak + 16 * as, as);
                                TANDEM_TILE_DOT(2, 5, 6);
                                if (pair) TANDEM_TILE_DOT(3, 5, 7);
                            }
                        }
                    }
                    storeC(cb, r1 > 0, pair);
                }
                if (kcEnd < kBlocks) continue;
                for (int r = 0; r < rows; ++r) {
                    for (int half = 0; half < (pair ? 2 : 1); ++half) {
                        const int panel = q + half;
                        const float* cr = pacc + static_cast<std::size_t>(r) * 32 + 16 * half;
                        __m512 y;
                        if constexpr (Type == ExpertType::BF16) {
                            y = _mm512_load_ps(cr);
                        } else {
                            const __m512i d = _mm512_sub_epi32(_mm512_load_si512(cr), _mm512_set1_epi32(128 * rowSums[r]));
                            y = _mm512_mul_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(_mm512_loadu_ps(c.rowScales + panel * kPanelRows),
                                                                                  _mm512_set1_ps(c.act.scale[r])));
                        }
                        accumulateRow512(c.dest[r] + panel * kPanelRows, y, c.weight[r], validRows(l, panel));
                    }
                }
            }
        }
    }
    releaseTiles();
}

// INT4 experts on tdpbssd. A block's two 32-column groups each carry their own fp16 scale per output,
// so a tile product covers one group (K 32) and its int32 result is scaled into float32 sums before
// the next group: per group the C tiles are stored, converted and added with fmadd, in the same order
// as the AVX-512 kernels add their groups. The nibbles are unpacked once per panel (gate/up: gate and
// up; down: a pair of output panels) into signed B tiles, n - 8 in [-8, 7], so no activation-sum
// correction is needed, and reused for every 32 rows.

// One 32-column group of a panel pair, unpacked: the two B tiles (8 rows of 64 bytes: rows 0-3 the
// low nibbles of the group's four vectors, inputs 4v..4v+3 of each output, rows 4-7 the high nibbles,
// inputs 16 + 4v..) and their scales as float32.
struct alignas(64) Int4Group {
    std::int8_t b[2][512];
    float scale[2][16];
};

// Unpacks one INT4 block (two groups) into side `side` of groups g[0] and g[1]: n - 8; or one MXFP4
// block: 2v by a table (cpu/packed_format.h), with the scales 2^(e - 128) taking the factor 1/2.
template <ExpertType Type>
inline void unpackGrouped4Block(const std::byte* blk, Int4Group* g, int side) {
    const __m512i nibble = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
    [[maybe_unused]] const __m512i table =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
    for (int v = 0; v < 8; ++v) {
        const __m512i w = _mm512_load_si512(blk + 64 * v);
        std::int8_t* rows = g[v / 4].b[side] + 64 * (v % 4);
        const __m512i lo = _mm512_and_si512(w, nibble), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), nibble);
        if constexpr (Type == ExpertType::MXFP4) {
            _mm512_store_si512(rows, _mm512_shuffle_epi8(table, lo));
            _mm512_store_si512(rows + 256, _mm512_shuffle_epi8(table, hi));
        } else {
            _mm512_store_si512(rows, _mm512_sub_epi8(lo, eight));
            _mm512_store_si512(rows + 256, _mm512_sub_epi8(hi, eight));
        }
    }
    for (int grp = 0; grp < 2; ++grp) {
        if constexpr (Type == ExpertType::MXFP4)
            _mm512_store_ps(g[grp].scale[side], mxfp4Scales512(blk + 512 + 32 * grp));
        else
            _mm512_store_ps(g[grp].scale[side], _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 512 + 32 * grp))));
    }
}

// acc[m][0..15] += C(m, 0..15) * scale[0] and, with `pair`, acc[m][16..31] += C(m, 16..31) * scale[1]
// for the rows of the stored C tiles (cbuf: 32 rows of 32 int32).
inline void scaleGroup(float* acc, const std::int32_t* cbuf, int rows, const Int4Group& g, bool pair) {
    const __m512 s0 = _mm512_load_ps(g.scale[0]), s1 = _mm512_load_ps(g.scale[1]);
    for (int m = 0; m < rows; ++m) {
        float* a = acc + 32 * m;
        const std::int32_t* c = cbuf + 32 * m;
        _mm512_store_ps(a, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c)), s0, _mm512_load_ps(a)));
        if (pair) _mm512_store_ps(a + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16)), s1, _mm512_load_ps(a + 16)));
    }
}

// One group's tile products, C0/C1 = A0 x B0/B1 and C2/C3 = A1 x B0/B1 with A (32 columns of int8) at
// `a`, stored to cbuf.
inline void int4GroupTiles(const std::byte* a, std::size_t stride, const Int4Group& g, bool r1, bool pair, std::int32_t* cbuf) {
    startC(nullptr, true, r1, pair);
    TANDEM_TILE_LOAD(6, g.b[0], 64);
    TANDEM_TILE_LOAD(4, a, stride);
    TANDEM_TILE_DPBSSD(0, 4, 6);
    if (pair) {
        TANDEM_TILE_LOAD(7, g.b[1], 64);
        TANDEM_TILE_DPBSSD(1, 4, 7);
    }
    if (r1) {
        TANDEM_TILE_LOAD(5, a + 16 * stride, stride);
        TANDEM_TILE_DPBSSD(2, 5, 6);
        if (pair) TANDEM_TILE_DPBSSD(3, 5, 7);
    }
    storeC(cbuf, r1, pair);
}

// How many groups behind its tile products a group is scaled: by default 1, so the scaling of group
// g - 1 follows the tile products of group g, the two overlap and the loads of the C tiles do not wait
// on the tile stores just issued. Tuning::amxInt4Lag (at most kMaxInt4Lag; 0: each group right after
// its tiles are stored) for A/B runs on AMX hardware.
constexpr int kMaxInt4Lag = 3;
int int4Lag() {
    static const int lag = std::min(kMaxInt4Lag, tuning().amxInt4Lag);
    return lag;
}

// INT4: while a panel's groups are used by every row block, the packed bytes of the panel unpacked
// next are asked for in L2 a few cache lines per group step, so that unpacking it (AVX-512 loads in a
// tight loop, which otherwise wait on memory at one core's read rate) finds them there. A list of
// contiguous runs, paced over the steps the current panel takes; runs past kMaxRuns are left to the
// hardware. Measured on the GPU machine (two A/B calls): INT4 layers of 512 tokens 3-17% faster on
// all three shapes in both, 4096 tokens between 5% faster and 7% slower (noise); tried for BF16/INT8 too (the panel after the current one, over the same cache block), where it was
// 9-15% better or worse by row, inside the machine's noise, so they keep the tb == 0 prefetch alone
// (docs/BENCHMARKS.md). Tuning::amxStream false turns it off (A/B runs).
class WeightStream {
public:
    static bool enabled() {
        static const bool on = tuning().amxStream;
        return on;
    }
    void clear() { runs_ = run_ = line_ = lines_ = 0; }
    void add(const std::byte* p, std::size_t bytes) {
        if (runs_ == kMaxRuns || bytes == 0) return;
        list_[runs_++] = {p, (bytes + 63) / 64};
        lines_ += (bytes + 63) / 64;
    }
    // Spreads the runs' lines over `steps` calls of step().
    void pace(long steps) { perStep_ = static_cast<int>(std::max<long>(1, (static_cast<long>(lines_) + steps - 1) / std::max(1L, steps))); }
    void step() {
        for (int n = 0; n < perStep_ && run_ < runs_; ++n) {
            _mm_prefetch(reinterpret_cast<const char*>(list_[run_].p + 64 * line_), _MM_HINT_T1);
            if (++line_ == list_[run_].lines) line_ = 0, ++run_;
        }
    }

private:
    static constexpr int kMaxRuns = 256;
    struct Run {
        const std::byte* p;
        std::size_t lines;
    };
    Run list_[kMaxRuns];
    int runs_ = 0, run_ = 0, perStep_ = 1;
    std::size_t line_ = 0, lines_ = 0;
};
thread_local WeightStream weightStream;

// acc (32 rows of 32 float32) = sum over `groups` of the scaled tile products with activation rows
// [0, r0 + r1) at `a` (group g's 32 columns at a + 32 g). cbuf: lag + 1 sets of stored C tiles, used
// in turn. Each output adds its groups in order whatever the lag, so every lag gives the same bits.
void int4Rows(const std::byte* a, std::size_t stride, const Int4Group* groups, int count, int r0, int r1, bool pair, float* acc,
              std::int32_t* cbuf, WeightStream* stream) {
    configureTiles(r0, r1, 32);
    for (int j = 0; j < 1024; j += 16) _mm512_store_ps(acc + j, _mm512_setzero_ps());
    const int rows = r0 + r1;
    const int lag = int4Lag(), sets = lag + 1;
    int set = 0;  // g % sets
    for (int g = 0; g < count; ++g) {
        if (stream) stream->step();
        int4GroupTiles(a + 32 * g, stride, groups[g], r1 > 0, pair, cbuf + 1024 * set);
        if (g >= lag) {
            const int old = set - lag < 0 ? set - lag + sets : set - lag;
            scaleGroup(acc, cbuf + 1024 * old, rows, groups[g - lag], pair);
        }
        set = set + 1 == sets ? 0 : set + 1;
    }
    for (int g = std::max(0, count - lag); g < count; ++g) scaleGroup(acc, cbuf + 1024 * (g % sets), rows, groups[g], pair);
}

// Per-thread INT4 scratch: sums for 32 rows, kMaxInt4Lag + 1 sets of C tiles, then `groups` unpacked
// groups.
struct Int4Scratch {
    float* acc;
    std::int32_t* cbuf;
    Int4Group* groups;
};
Int4Scratch int4Scratch(int groups) {
    constexpr std::size_t kGroupsAt = 1024 * (kMaxInt4Lag + 2);
    float* f = scratch.floats(kGroupsAt + static_cast<std::size_t>(groups) * (sizeof(Int4Group) / sizeof(float)));
    return {f, reinterpret_cast<std::int32_t*>(f + 1024), reinterpret_cast<Int4Group*>(f + kGroupsAt)};
}

template <ExpertType Type>
void tileGateUpGrouped4(const GateUpCall& c) {
    const ExpertLayout& l = *c.layout;
    const int rows = c.x.rows;
    const int kBlocks = l.hiddenKBlocks();
    const Int4Scratch s = int4Scratch(2 * kBlocks);
    WeightStream* stream = WeightStream::enabled() ? &weightStream : nullptr;
    for (int p = 0; p < c.panelCount; ++p) {
        const std::byte* panel = c.panels + p * l.gateUpPanelBytes;
        for (int kb = 0; kb < kBlocks; ++kb) {
            unpackGrouped4Block<Type>(panel + kb * 2 * 576, s.groups + 2 * kb, 0);        // gate
            unpackGrouped4Block<Type>(panel + kb * 2 * 576 + 576, s.groups + 2 * kb, 1);  // up
        }
        if (stream) {  // the next panel, unpacked next
            stream->clear();
            if (p + 1 < c.panelCount) stream->add(panel + l.gateUpPanelBytes, l.gateUpPanelBytes);
            stream->pace(static_cast<long>((rows + 31) / 32) * 2 * kBlocks);
        }
        const int col = (c.firstPanel + p) * kPanelRows;
        for (int tb = 0; tb < rows; tb += 32) {
            int r0, r1;
            tileRows(rows, tb, r0, r1);
            int4Rows(c.x.data + tb * c.x.stride, c.x.stride, s.groups, 2 * kBlocks, r0, r1, true, s.acc, s.cbuf, stream);
            for (int m = 0; m < r0 + r1; ++m) {
                const __m512 xsc = _mm512_set1_ps(c.x.scale[tb + m]);
                const __m512 g = _mm512_mul_ps(_mm512_load_ps(s.acc + 32 * m), xsc);
                const __m512 u = _mm512_mul_ps(_mm512_load_ps(s.acc + 32 * m + 16), xsc);
                _mm512_storeu_ps(c.act + static_cast<std::size_t>(tb + m) * c.actStride + col, gatedAct512(g, u, c.epilogue, col));
            }
        }
    }
    releaseTiles();
}

template <ExpertType Type>
void tileDownGrouped4(const DownCall& c) {
    const ExpertLayout& l = *c.layout;
    const int rows = c.act.rows;
    const std::size_t base = l.chunkOffset(c.firstChunk);
    const int end = c.firstPanel + c.panelCount;
    int kbs = 0;
    for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch) kbs += l.chunkKBlocks(ch);
    const Int4Scratch s = int4Scratch(2 * kbs);
    // Every chunk but the last is whole, so the call's groups are consecutive columns from here.
    const std::byte* a0 = c.act.data + static_cast<std::size_t>(c.firstChunk) * kChunkCols;
    auto panelOf = [&](int ch, int q) { return c.chunks + (l.chunkOffset(ch) - base) + q * l.chunkPanelBytes(ch); };
    WeightStream* stream = WeightStream::enabled() ? &weightStream : nullptr;
    for (int q = c.firstPanel; q < end; q += 2) {
        const bool pair = q + 1 < end;
        int i = 0;
        for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch)
            for (int kb = 0; kb < l.chunkKBlocks(ch); ++kb, i += 2) {
                unpackGrouped4Block<Type>(panelOf(ch, q) + kb * 576, s.groups + i, 0);
                if (pair) unpackGrouped4Block<Type>(panelOf(ch, q + 1) + kb * 576, s.groups + i, 1);
            }
        if (stream) {  // the next pair: its two panels lie side by side in every chunk
            stream->clear();
            if (q + 2 < end)
                for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch)
                    stream->add(panelOf(ch, q + 2), (q + 3 < end ? 2 : 1) * l.chunkPanelBytes(ch));
            stream->pace(static_cast<long>((rows + 31) / 32) * 2 * kbs);
        }
        for (int tb = 0; tb < rows; tb += 32) {
            int r0, r1;
            tileRows(rows, tb, r0, r1);
            int4Rows(a0 + tb * c.act.stride, c.act.stride, s.groups, 2 * kbs, r0, r1, pair, s.acc, s.cbuf, stream);
            for (int m = 0; m < r0 + r1; ++m) {
                const int r = tb + m;
                const __m512 xsc = _mm512_set1_ps(c.act.scale[r]);
                for (int half = 0; half < (pair ? 2 : 1); ++half) {
                    const int panel = q + half;
                    const __m512 y = _mm512_mul_ps(_mm512_load_ps(s.acc + 32 * m + 16 * half), xsc);
                    accumulateRow512(c.dest[r] + panel * kPanelRows, y, c.weight[r], validRows(l, panel));
                }
            }
        }
    }
    releaseTiles();
}

ExpertKernels makeAmx() {
    ExpertKernels e;
    e.isa = Isa::Amx;
    e.bf16Activations = Bf16Activations::Split;
    for (const ExpertType t : kAllExpertTypes) {
        e.gemv[static_cast<int>(t)] = avx512Gemv(t);
        e.gemm[static_cast<int>(t)] = avx512Gemm(t);
        e.gemmMinRows[static_cast<int>(t)] = 5;
    }
    // `bench-moe --sweep` on the GPU machine's Xeon (deepseek-v2-lite shape): AMX overtakes the
    // AVX-512 GEMV at 4 rows per expert for BF16 and INT8 (docs/BENCHMARKS.md).
    e.gemmMinRows[static_cast<int>(ExpertType::BF16)] = 4;
    e.gemmMinRows[static_cast<int>(ExpertType::INT8)] = 4;
    e.gemm[static_cast<int>(ExpertType::BF16)] = {tileGateUp<ExpertType::BF16>, tileDown<ExpertType::BF16>};
    e.gemm[static_cast<int>(ExpertType::INT8)] = {tileGateUp<ExpertType::INT8>, tileDown<ExpertType::INT8>};
    e.gemm[static_cast<int>(ExpertType::INT4)] = {tileGateUpGrouped4<ExpertType::INT4>, tileDownGrouped4<ExpertType::INT4>};
    e.gemm[static_cast<int>(ExpertType::MXFP4)] = {tileGateUpGrouped4<ExpertType::MXFP4>, tileDownGrouped4<ExpertType::MXFP4>};
    // INT4 on AMX: faster than the AVX-512 GEMV from about 10-12 rows per expert (the sweep in
    // docs/BENCHMARKS.md; it unpacks every panel and scales every group whatever the rows).
    e.gemmMinRows[static_cast<int>(ExpertType::INT4)] = 12;
    e.gemmMinRows[static_cast<int>(ExpertType::MXFP4)] = 12;  // the same tile path as INT4; not measured on its own yet
    return e;
}

}  // namespace

#ifndef TANDEM_AMX_EMULATE
// The tile unit's throughput on this thread for one kind of step (amx_peak.h): four tile products per
// step into C0-C3 from A0, A1, B0, B1, with the A and B tiles resident, reloaded from L1, or A rows
// read the way the kernels read activation rows (a row stride apart, from a buffer the size of L2).
double amxTileOpsPerSecond(TileTest test, long steps) {
    constexpr std::size_t kStride = 7232;  // a DeepSeek-V3 int8 activation row (hidden 7168, odd lines)
    constexpr std::size_t kRegion = 1u << 20;
    const bool l2 = test == TileTest::Int8StridedA || test == TileTest::Int8BFromL2;
    const std::size_t bytes = l2 ? kRegion + 16 * kStride : 4096;
    auto* buf = static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (!buf) throw std::bad_alloc();
    for (std::size_t i = 0; i < bytes; ++i) buf[i] = static_cast<std::byte>((i * 7) & 0x3f);
    const int aBytes = test == TileTest::Int8K32Resident ? 32 : 64;
    loadedShape = {};
    configureTiles(16, 16, aBytes);
    TANDEM_TILE_ZERO(0);
    TANDEM_TILE_ZERO(1);
    TANDEM_TILE_ZERO(2);
    TANDEM_TILE_ZERO(3);
    TANDEM_TILE_LOAD(4, buf, 64);
    TANDEM_TILE_LOAD(5, buf + 1024, 64);
    TANDEM_TILE_LOAD(6, buf + 2048, 64);
    TANDEM_TILE_LOAD(7, buf + 3072, 64);
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t at = 0;
    for (long i = 0; i < steps; ++i) {
        switch (test) {
        case TileTest::Bf16Resident:
            TANDEM_TILE_DPBF16PS(0, 4, 6);
            TANDEM_TILE_DPBF16PS(1, 4, 7);
            TANDEM_TILE_DPBF16PS(2, 5, 6);
            TANDEM_TILE_DPBF16PS(3, 5, 7);
            break;
        case TileTest::Int8Resident:
        case TileTest::Int8K32Resident:
            TANDEM_TILE_DPBSSD(0, 4, 6);
            TANDEM_TILE_DPBSSD(1, 4, 7);
            TANDEM_TILE_DPBSSD(2, 5, 6);
            TANDEM_TILE_DPBSSD(3, 5, 7);
            break;
        case TileTest::Int8FromL1:
            TANDEM_TILE_LOAD(6, buf + 2048, 64);
            TANDEM_TILE_LOAD(7, buf + 3072, 64);
            TANDEM_TILE_LOAD(4, buf, 64);
            TANDEM_TILE_DPBSSD(0, 4, 6);
            TANDEM_TILE_DPBSSD(1, 4, 7);
            TANDEM_TILE_LOAD(5, buf + 1024, 64);
            TANDEM_TILE_DPBSSD(2, 5, 6);
            TANDEM_TILE_DPBSSD(3, 5, 7);
            break;
        case TileTest::Int8StridedA:
            TANDEM_TILE_LOAD(4, buf + at, kStride);
            TANDEM_TILE_DPBSSD(0, 4, 6);
            TANDEM_TILE_DPBSSD(1, 4, 7);
            TANDEM_TILE_LOAD(5, buf + at + 64, kStride);
            TANDEM_TILE_DPBSSD(2, 5, 6);
            TANDEM_TILE_DPBSSD(3, 5, 7);
            at = at + 128 < kRegion ? at + 128 : 0;
            break;
        case TileTest::Int8BFromL2:
            TANDEM_TILE_LOAD(6, buf + at, 64);
            TANDEM_TILE_LOAD(7, buf + at + 1024, 64);
            TANDEM_TILE_DPBSSD(0, 4, 6);
            TANDEM_TILE_DPBSSD(1, 4, 7);
            TANDEM_TILE_DPBSSD(2, 5, 6);
            TANDEM_TILE_DPBSSD(3, 5, 7);
            at = at + 2048 < kRegion ? at + 2048 : 0;
            break;
        }
    }
    alignas(64) std::int32_t sink[16 * 16];
    TANDEM_TILE_STORE(0, sink, 64);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    releaseTiles();
    std::free(buf);
    const double k = aBytes / (test == TileTest::Bf16Resident ? 2.0 : 1.0);  // products per output per tile step
    return 4.0 * 2.0 * 16 * 16 * k * static_cast<double>(steps) / s + 0 * sink[0];
}
#endif

#ifdef TANDEM_AMX_EMULATE
const ExpertKernels& amxEmulatedKernels() {
#else
const ExpertKernels& amxKernels() {
#endif
    static const ExpertKernels k = makeAmx();
    return k;
}

}  // namespace tandem::cpu

#undef TANDEM_TILE_DOT
