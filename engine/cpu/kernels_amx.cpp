// AMX kernels for many rows per expert (prefill): tdpbf16ps for BF16 experts, tdpbsud (signed int8
// activations x unsigned int8 weights) for INT8. The packed blocks are B tiles as they lie; activation
// rows are A tiles loaded with their row stride. Every step multiplies two A tiles (32 rows) by two B
// tiles (gate and up of one panel, or two down panels) into four result tiles:
//   tiles 0-3: C0 = A0*B0, C1 = A0*B1, C2 = A1*B0, C3 = A1*B1;  tiles 4-5: A0, A1;  tiles 6-7: B0, B1.
// BF16 activations are split in hi and lo (activation_quant.h): a step loads A0 and A1 from the hi
// halves, multiplies, then reloads them from the lo halves and multiplies into the same C tiles, so
// the B tiles loaded once serve both and C holds W.hi + W.lo in float32. That doubles the tile
// products of BF16 (prefill compute), not the weight bytes.
// Results are kept in a float32 (int32) buffer between cache blocks of 1024 inputs so that a block of
// weights is read from memory once and reused for every 32 rows from L2. INT4, whose 32-column groups
// each carry their own scale, and few-row calls use the AVX-512 kernels. Built with AMX and AVX-512
// flags; with TANDEM_AMX_EMULATE (tests) the tile operations are emulated (amx_tiles.h).
#include <cstdlib>
#include <new>

#include "cpu/amx_tiles.h"
#include "cpu/kernel_rows.h"
#include "cpu/kernels_avx512.h"
#include "cpu/simd_avx512.h"

namespace tandem::cpu {

namespace {

// Rows of A0 and A1 in the loaded configuration; -1: none loaded in this thread.
struct TileShape {
    int rows0 = -1, rows1 = -1;
};
thread_local TileShape loadedShape;

void configureTiles(int rows0, int rows1) {
    if (loadedShape.rows0 == rows0 && loadedShape.rows1 == rows1) return;
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
    loadedShape = {rows0, rows1};
}

// Hands the tile state back after each call, so an idle thread does not carry 8 KiB of AMX state
// through context switches.
void releaseTiles() {
    TANDEM_TILE_RELEASE();
    loadedShape = {};
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

constexpr int kCacheBlockInputs = 1024;

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

template <ExpertType Type>
void tileGateUp(const GateUpCall& c) {
    const ExpertLayout& l = *c.layout;
    const int rows = c.x.rows;
    const int kBlocks = l.hiddenKBlocks();
    const int cacheBlocks = kCacheBlockInputs / l.kBlock;
    const std::size_t xs = c.x.stride;
    // The activation parts each step multiplies: BF16 the hi then the lo half, INT8 the row.
    const int parts = Type == ExpertType::BF16 ? 2 : 1;
    const std::size_t partOffset[2] = {0, c.x.loOffset};
    // acc[row][0..15] = gate sums, acc[row][16..31] = up sums (float32 for BF16, int32 for INT8); then
    // for INT8 each row's activation sum, taken once per call rather than once per panel.
    float* acc = scratch.floats(static_cast<std::size_t>(rows + 32) * 33);
    auto* rowSums = reinterpret_cast<int*>(acc + static_cast<std::size_t>(rows + 32) * 32);
    if constexpr (Type == ExpertType::INT8)
        for (int r = 0; r < rows; ++r) rowSums[r] = rowSum(c.x, r, 0, l.hiddenPad / kActGroup);
    for (int p = 0; p < c.panelCount; ++p) {
        const std::byte* panel = c.panels + p * l.gateUpPanelBytes;
        for (int kc = 0; kc < kBlocks; kc += cacheBlocks) {
            const int kcEnd = kc + cacheBlocks < kBlocks ? kc + cacheBlocks : kBlocks;
            for (int tb = 0; tb < rows; tb += 32) {
                const int r0 = rows - tb < 16 ? rows - tb : 16;
                const int r1 = rows - tb - 16 <= 0 ? 0 : (rows - tb - 16 < 16 ? rows - tb - 16 : 16);
                configureTiles(r0, r1);
                float* cb = acc + static_cast<std::size_t>(tb) * 32;
                if (kc == 0) {
                    TANDEM_TILE_ZERO(0);
                    TANDEM_TILE_ZERO(1);
                    if (r1) {
                        TANDEM_TILE_ZERO(2);
                        TANDEM_TILE_ZERO(3);
                    }
                } else {
                    TANDEM_TILE_LOAD(0, cb, 128);
                    TANDEM_TILE_LOAD(1, cb + 16, 128);
                    if (r1) {
                        TANDEM_TILE_LOAD(2, cb + 512, 128);
                        TANDEM_TILE_LOAD(3, cb + 528, 128);
                    }
                }
                const std::byte* a = c.x.data + tb * xs;
                for (int kb = kc; kb < kcEnd; ++kb) {
                    const std::byte* blk = panel + kb * 2 * l.blockBytes;
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
                TANDEM_TILE_STORE(0, cb, 128);
                TANDEM_TILE_STORE(1, cb + 16, 128);
                if (r1) {
                    TANDEM_TILE_STORE(2, cb + 512, 128);
                    TANDEM_TILE_STORE(3, cb + 528, 128);
                }
            }
        }
        const int col = (c.firstPanel + p) * kPanelRows;
        for (int r = 0; r < rows; ++r) {
            const float* cr = acc + static_cast<std::size_t>(r) * 32;
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
            _mm512_storeu_ps(c.act + static_cast<std::size_t>(r) * c.actStride + col, siluMul512(g, u));
        }
    }
    releaseTiles();
}

template <ExpertType Type>
void tileDown(const DownCall& c) {
    const ExpertLayout& l = *c.layout;
    const int rows = c.act.rows;
    const std::size_t as = c.act.stride;
    const std::size_t elementBytes = Type == ExpertType::BF16 ? 2 : 1;  // within one part
    const int parts = Type == ExpertType::BF16 ? 2 : 1;
    const std::size_t partOffset[2] = {0, c.act.loOffset};
    const std::size_t base = l.chunkOffset(c.firstChunk);
    const int end = c.firstPanel + c.panelCount;
    int chunkCols = 0;
    for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch) chunkCols += l.chunkCols(ch);
    alignas(64) float out[32 * 32];  // [row][panel q outputs | panel q+1 outputs]
    int* rowSums = nullptr;            // INT8: each row's activation sum over this call's chunks
    if constexpr (Type == ExpertType::INT8) {
        rowSums = reinterpret_cast<int*>(scratch.floats(static_cast<std::size_t>(rows)));
        for (int r = 0; r < rows; ++r) rowSums[r] = rowSum(c.act, r, c.firstChunk * kChunkCols / kActGroup, chunkCols / kActGroup);
    }
    for (int q = c.firstPanel; q < end; q += 2) {
        const bool pair = q + 1 < end;
        for (int tb = 0; tb < rows; tb += 32) {
            const int r0 = rows - tb < 16 ? rows - tb : 16;
            const int r1 = rows - tb - 16 <= 0 ? 0 : (rows - tb - 16 < 16 ? rows - tb - 16 : 16);
            configureTiles(r0, r1);
            TANDEM_TILE_ZERO(0);
            TANDEM_TILE_ZERO(1);
            if (r1) {
                TANDEM_TILE_ZERO(2);
                TANDEM_TILE_ZERO(3);
            }
            const std::byte* a = c.act.data + tb * as;
            for (int ch = c.firstChunk; ch < c.firstChunk + c.chunkCount; ++ch) {
                const std::byte* p0 = c.chunks + (l.chunkOffset(ch) - base) + q * l.chunkPanelBytes(ch);
                const std::byte* p1 = p0 + l.chunkPanelBytes(ch);
                for (int kb = 0; kb < l.chunkKBlocks(ch); ++kb) {
                    const std::size_t col = (ch * kChunkCols + kb * l.kBlock) * elementBytes;
                    TANDEM_TILE_LOAD(6, p0 + kb * 1024, 64);
                    if (pair) TANDEM_TILE_LOAD(7, p1 + kb * 1024, 64);
                    for (int part = 0; part < parts; ++part) {
                        const std::byte* ak = a + partOffset[part] + col;
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
            }
            TANDEM_TILE_STORE(0, out, 128);
            if (pair) TANDEM_TILE_STORE(1, out + 16, 128);
            if (r1) {
                TANDEM_TILE_STORE(2, out + 512, 128);
                if (pair) TANDEM_TILE_STORE(3, out + 528, 128);
            }
            for (int m = 0; m < r0 + r1; ++m) {
                const int r = tb + m;
                for (int half = 0; half < (pair ? 2 : 1); ++half) {
                    const int panel = q + half;
                    __m512 y;
                    if constexpr (Type == ExpertType::BF16) {
                        y = _mm512_load_ps(out + m * 32 + 16 * half);
                    } else {
                        const __m512i d = _mm512_sub_epi32(_mm512_load_si512(out + m * 32 + 16 * half), _mm512_set1_epi32(128 * rowSums[r]));
                        y = _mm512_mul_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(_mm512_loadu_ps(c.rowScales + panel * kPanelRows),
                                                                              _mm512_set1_ps(c.act.scale[r])));
                    }
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
        e.gemmMinRows[static_cast<int>(t)] = 5;  // INT4: AVX-512 either way; 4-row GEMV then 8-row GEMM blocks
    }
    // `bench-moe --sweep` on the GPU machine's Xeon (deepseek-v2-lite shape): AMX overtakes the
    // AVX-512 GEMV at 4 rows per expert for BF16 and INT8 (docs/BENCHMARKS.md).
    e.gemmMinRows[static_cast<int>(ExpertType::BF16)] = 4;
    e.gemmMinRows[static_cast<int>(ExpertType::INT8)] = 4;
    e.gemm[static_cast<int>(ExpertType::BF16)] = {tileGateUp<ExpertType::BF16>, tileDown<ExpertType::BF16>};
    e.gemm[static_cast<int>(ExpertType::INT8)] = {tileGateUp<ExpertType::INT8>, tileDown<ExpertType::INT8>};
    return e;
}

}  // namespace

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
