#pragma once
// The AMX tile operations kernels_amx.cpp uses. Normally the intrinsics; with TANDEM_AMX_EMULATE
// defined, plain C++ with the same semantics that also checks the tile shapes of every operation, so
// the AMX kernels' tiling, addressing and epilogues are tested on CPUs without AMX (the test suite
// builds that variant). Tile numbers must be literals: the intrinsics paste them into the instruction.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace tandem::cpu {
namespace {

// The 64-byte operand of ldtilecfg, palette 1.
struct alignas(64) TileConfig {
    std::uint8_t palette = 1;
    std::uint8_t startRow = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};

}  // namespace
}  // namespace tandem::cpu

#ifdef TANDEM_AMX_EMULATE

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tandem::cpu {
namespace {

struct EmulatedTiles {
    TileConfig config;
    bool configured = false;
    alignas(64) std::uint8_t data[8][16][64];
};
thread_local EmulatedTiles emulatedTiles;

inline void emulationCheck(bool ok, const char* what) {
    if (ok) return;
    std::fprintf(stderr, "AMX emulation: %s\n", what);
    std::abort();
}

inline void emuLoadConfig(const TileConfig& c) {
    emulatedTiles.config = c;
    emulatedTiles.configured = true;
    std::memset(emulatedTiles.data, 0, sizeof emulatedTiles.data);
}

inline void emuUsable(int t) {
    emulationCheck(emulatedTiles.configured, "tile used before ldtilecfg");
    emulationCheck(emulatedTiles.config.rows[t] > 0 && emulatedTiles.config.colsb[t] > 0, "tile used but not configured");
}

inline void emuLoad(int t, const void* base, std::size_t stride) {
    emuUsable(t);
    const auto& c = emulatedTiles.config;
    std::memset(emulatedTiles.data[t], 0, sizeof emulatedTiles.data[t]);
    for (int m = 0; m < c.rows[t]; ++m)
        std::memcpy(emulatedTiles.data[t][m], static_cast<const std::uint8_t*>(base) + m * stride, c.colsb[t]);
}

inline void emuStore(int t, void* base, std::size_t stride) {
    emuUsable(t);
    const auto& c = emulatedTiles.config;
    for (int m = 0; m < c.rows[t]; ++m)
        std::memcpy(static_cast<std::uint8_t*>(base) + m * stride, emulatedTiles.data[t][m], c.colsb[t]);
}

inline void emuZero(int t) {
    emuUsable(t);
    std::memset(emulatedTiles.data[t], 0, sizeof emulatedTiles.data[t]);
}

inline void emuCheckShapes(int dst, int a, int b, int bytesPerElement) {
    emuUsable(dst);
    emuUsable(a);
    emuUsable(b);
    const auto& c = emulatedTiles.config;
    emulationCheck(c.rows[dst] == c.rows[a], "C and A rows differ");
    emulationCheck(c.colsb[dst] == c.colsb[b], "C and B columns differ");
    emulationCheck(c.colsb[a] / 4 == c.rows[b], "A's K does not match B's rows");
    (void)bytesPerElement;
}

inline float emuBf16(const std::uint8_t* p) {
    const std::uint32_t u = static_cast<std::uint32_t>(p[0] | (p[1] << 8)) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline void emuDpbf16ps(int dst, int a, int b) {
    emuCheckShapes(dst, a, b, 2);
    auto& d = emulatedTiles.data;
    const auto& c = emulatedTiles.config;
    for (int m = 0; m < c.rows[dst]; ++m)
        for (int n = 0; n < c.colsb[dst] / 4; ++n) {
            float acc;
            std::memcpy(&acc, &d[dst][m][4 * n], 4);
            for (int k = 0; k < c.colsb[a] / 4; ++k)
                acc += emuBf16(&d[a][m][4 * k]) * emuBf16(&d[b][k][4 * n]) + emuBf16(&d[a][m][4 * k + 2]) * emuBf16(&d[b][k][4 * n + 2]);
            std::memcpy(&d[dst][m][4 * n], &acc, 4);
        }
}

// int8 quads: signed A times unsigned (tdpbsud) or signed (tdpbssd) B, into int32.
template <bool SignedB>
inline void emuDpbInt8(int dst, int a, int b) {
    emuCheckShapes(dst, a, b, 1);
    auto& d = emulatedTiles.data;
    const auto& c = emulatedTiles.config;
    for (int m = 0; m < c.rows[dst]; ++m)
        for (int n = 0; n < c.colsb[dst] / 4; ++n) {
            std::int32_t acc;
            std::memcpy(&acc, &d[dst][m][4 * n], 4);
            for (int k = 0; k < c.colsb[a] / 4; ++k)
                for (int i = 0; i < 4; ++i) {
                    const std::uint8_t w = d[b][k][4 * n + i];
                    acc += static_cast<std::int8_t>(d[a][m][4 * k + i]) * (SignedB ? static_cast<std::int8_t>(w) : static_cast<std::int32_t>(w));
                }
            std::memcpy(&d[dst][m][4 * n], &acc, 4);
        }
}

}  // namespace
}  // namespace tandem::cpu

#define TANDEM_TILE_CONFIG(cfg) ::tandem::cpu::emuLoadConfig(cfg)
#define TANDEM_TILE_RELEASE() (::tandem::cpu::emulatedTiles.configured = false)
#define TANDEM_TILE_LOAD(t, base, stride) ::tandem::cpu::emuLoad(t, base, stride)
#define TANDEM_TILE_STORE(t, base, stride) ::tandem::cpu::emuStore(t, base, stride)
#define TANDEM_TILE_ZERO(t) ::tandem::cpu::emuZero(t)
#define TANDEM_TILE_DPBF16PS(c, a, b) ::tandem::cpu::emuDpbf16ps(c, a, b)
#define TANDEM_TILE_DPBSUD(c, a, b) ::tandem::cpu::emuDpbInt8<false>(c, a, b)
#define TANDEM_TILE_DPBSSD(c, a, b) ::tandem::cpu::emuDpbInt8<true>(c, a, b)

#else

// The compiler sees neither the 64 bytes ldtilecfg reads nor the memory tileloadd reads, so a barrier
// keeps the writes of the configuration and of tile sources before them.
#define TANDEM_TILE_CONFIG(cfg)             \
    do {                                    \
        asm volatile("" ::: "memory");      \
        _tile_loadconfig(&(cfg));           \
    } while (0)
#define TANDEM_TILE_RELEASE() _tile_release()
#define TANDEM_TILE_LOAD(t, base, stride) _tile_loadd(t, base, static_cast<long>(stride))
#define TANDEM_TILE_STORE(t, base, stride) _tile_stored(t, base, static_cast<long>(stride))
#define TANDEM_TILE_ZERO(t) _tile_zero(t)
#define TANDEM_TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#define TANDEM_TILE_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#define TANDEM_TILE_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)

#endif
