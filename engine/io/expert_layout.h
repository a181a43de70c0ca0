#pragma once
// The packed layout of one routed expert (gate, up, down), designed around the kernels that read it.
//
// Every matrix is cut into panels of 16 output rows (one AMX tile's columns, one zmm of float32
// results) and each panel's input dimension into blocks of kBlock columns. A block is one AMX B tile
// in VNNI order: 16 outputs x 2 bf16 (or 4 int8) per 64-byte row, so the same bytes feed a tile load,
// one zmm load of the AVX-512 kernels or two ymm loads of the AVX2 kernels.
//
//   [gate/up]  panel p of the intermediate rows, for every K block kb of the hidden dimension:
//              gate block (p, kb) then up block (p, kb)   -- one pass reads both, so SiLU(gate)*up
//              is formed in registers; INT8 adds 16 gate + 16 up row scales at the panel's end.
//   [down]     the intermediate (K) dimension in chunks of 128 columns; chunk c holds every output row
//              panel of down over its columns. A chunk is the unit by which an expert is split across
//              NUMA nodes: node n owns chunks [c0, c1) of down and the matching 8 panels per chunk of
//              gate/up, and each of those byte ranges is contiguous.
//   [scales]   INT8 only: one float per down row.
//
// Dimensions need not be multiples of anything: the hidden dimension is padded with zero columns to a
// whole block, the intermediate one with zero rows/columns to a multiple of 64, down's rows to a whole
// panel. Offsets are from the expert's first byte, so packed bytes work straight from a mapped file.
// Blocks are 64-byte aligned and each expert's size is a whole number of 4 KiB pages.
//
// Types:
//   BF16  weights as bfloat16; block = 16 pairs x 16 outputs x 2 = 1024 bytes (K 32).
//   INT8  symmetric per output row: w = (u - 128) * scale, u stored unsigned so that VNNI's
//         unsigned x signed dot products take it with int8 activations; block = 1024 bytes (K 64).
//   INT4  symmetric per group of 32 inputs: w = (n - 8) * scale(fp16), nibble n in [0, 15];
//         block = 512 bytes of nibbles (K 64 = two groups) + 16 fp16 scales per group = 576 bytes.
//         Byte 4*o + j of the block's 64-byte vector v (v = 0..7) holds, for output o, input
//         32*(v/4) + 4*(v%4) + j in its low nibble and the same input + 16 in its high nibble.
//   MXFP4 the OCP microscaling format gpt-oss ships its experts in, kept as it is: groups of 32
//         inputs, each value an FP4 e2m1 nibble n (sign n & 8, magnitude {0, .5, 1, 1.5, 2, 3, 4, 6}
//         by n & 7), each group one E8M0 exponent byte e (scale 2^(e - 127); 255, NaN, is refused).
//         The INT4 block geometry exactly: 512 bytes of nibbles in INT4's byte order, then per group
//         16 bfloat16 scales, 2^(e - 128), at the place of INT4's fp16 ones: 576 bytes (K 64).
//         Why bfloat16 2^(e - 128): the kernels take a nibble through a 16-entry table to the
//         unsigned byte 2v + 12 in [0, 24] (v the e2m1 value), dot that with the int8 activations as
//         INT4 does with n, subtract 12 * (group sum) and scale by 2^(e - 128), folding the table's
//         factor 2 into the power of two. bfloat16 has float32's 8-bit exponent, so every E8M0 scale,
//         halved, is exact in it (e = 0 and 1 as subnormals), and widening it to float32 is a 16-bit
//         shift on every level (AVX2 has no vcvt for E8M0 bytes, and 2^(e-127) by a shift into the
//         exponent field misses e = 0). A padding group's scale is 0 (its nibbles are 0 too).
//         The activations are the same int8 rows (one scale per row, group sums) as INT4's, and the
//         weights are exact (no rounding on packing from MXFP4 blocks), so the error is INT4's
//         activation rounding alone.
//
// Roofline (decode reads each chosen expert's bytes once): per 16 x 64 block, BF16 2048 bytes (as
// two 1024-byte K-32 blocks), INT8 1024 (+ row scales), INT4 576, MXFP4 576: 4.5 bits per weight,
// the same bytes as INT4. The checkpoint's own MXFP4 is 4.25 bits (16 nibble bytes + 1 scale byte per
// 32 values); raw E8M0 bytes (32 per block) would leave 32 bytes of padding to keep blocks on cache
// lines, so the exact bfloat16 scales cost nothing over that. A gpt-oss expert (hidden 2880, inter
// 2880, 3 x 2880 x 2880 weights): MXFP4 and INT4 13,996,800 bytes (45 x 180 blocks of 576 bytes per
// matrix; 3418 pages), against 13,219,200 in the checkpoint's MXFP4 and 49.8 MB in bf16: decode at
// B bytes/s of memory reads at most B / (4 x 14.0 MB) tokens/s of a layer's 4 chosen experts.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem::io {

enum class ExpertType : std::uint8_t { BF16, INT8, INT4, MXFP4 };

inline constexpr ExpertType kAllExpertTypes[] = {ExpertType::BF16, ExpertType::INT8, ExpertType::INT4, ExpertType::MXFP4};
// The size of every table indexed by ExpertType.
inline constexpr int kExpertTypeCount = 4;

std::string_view expertTypeName(ExpertType type);  // "bf16", "int8", "int4", "mxfp4"
std::optional<ExpertType> parseExpertType(std::string_view name);

inline constexpr int kPanelRows = 16;
inline constexpr int kChunkCols = 128;
inline constexpr int kPanelsPerChunk = kChunkCols / kPanelRows;
inline constexpr int kInt4Group = 32;
inline constexpr int kMxfp4Group = 32;  // values per E8M0 scale
// Activation group for the integer paths' per-group sums (the INT4 weight group).
inline constexpr int kActGroup = 32;
inline constexpr std::size_t kExpertAlignment = 4096;

// Input columns and bytes of one 16-output block of a type (see Types above).
constexpr int blockColumns(ExpertType type) { return type == ExpertType::BF16 ? 32 : 64; }
constexpr std::size_t blockBytesOf(ExpertType type) { return type == ExpertType::INT4 || type == ExpertType::MXFP4 ? 576 : 1024; }
// INT4 and MXFP4: 4-bit values in 32-column groups with one 16-bit scale per output and group.
constexpr bool isGrouped4Bit(ExpertType type) { return type == ExpertType::INT4 || type == ExpertType::MXFP4; }

struct ExpertLayout {
    ExpertType type = ExpertType::BF16;
    int hidden = 0;  // model dimension: gate/up inputs, down outputs
    int inter = 0;   // expert intermediate dimension: gate/up outputs, down inputs

    int kBlock = 0;                    // input columns per block
    std::size_t blockBytes = 0;        // bytes of one 16 x kBlock block
    int hiddenPad = 0;                 // hidden rounded up to kBlock (gate/up K)
    int interPad = 0;                  // inter rounded up to 64
    int gateUpPanels = 0;              // interPad / 16
    std::size_t gateUpPanelBytes = 0;  // gate and up blocks of one panel (+ INT8 row scales)
    int downPanels = 0;                // ceil(hidden / 16)
    int chunks = 0;                    // interPad / 128, rounded up (the last may be 64 wide)
    std::size_t downOffset = 0;        // first byte of chunk 0
    std::size_t downScalesOffset = 0;  // INT8: downPanels * 16 floats
    std::size_t dataBytes = 0;         // bytes the kernels read per expert
    std::size_t expertBytes = 0;       // dataBytes rounded up to kExpertAlignment: the expert stride

    // Throws tandem::Error for non-positive dimensions.
    static ExpertLayout make(ExpertType type, int hidden, int inter);

    int hiddenKBlocks() const { return hiddenPad / kBlock; }
    int chunkCols(int c) const { return (c + 1 < chunks) ? kChunkCols : interPad - kChunkCols * c; }
    int chunkKBlocks(int c) const { return chunkCols(c) / kBlock; }
    // Bytes of one down row panel within chunk c.
    std::size_t chunkPanelBytes(int c) const { return static_cast<std::size_t>(chunkKBlocks(c)) * blockBytes; }
    // The last chunk when it is narrower than the others (64 columns), else -1.
    int narrowChunk() const { return chunkCols(chunks - 1) != kChunkCols ? chunks - 1 : -1; }
    // Bytes of a full chunk (all of down's row panels over 128 columns).
    std::size_t fullChunkBytes() const { return static_cast<std::size_t>(kChunkCols / kBlock) * blockBytes * downPanels; }
    // Offset of chunk c; c == chunks gives the end of down's blocks. Every chunk but the last is full.
    std::size_t chunkOffset(int c) const {
        const std::size_t full = fullChunkBytes();
        if (c < chunks) return downOffset + static_cast<std::size_t>(c) * full;
        return downOffset + static_cast<std::size_t>(chunks - 1) * full + chunkPanelBytes(chunks - 1) * downPanels;
    }
    // Gate/up panels that belong to chunks [c0, c1).
    int firstPanelOfChunk(int c) const { return c * kPanelsPerChunk < gateUpPanels ? c * kPanelsPerChunk : gateUpPanels; }
    // Bytes per element of an activation row in the kernels' format (activation_quant.h): BF16 rows
    // hold float32 or a bf16 hi and lo (4), INT8/INT4/MXFP4 rows int8 (1).
    std::size_t activationBytes() const { return type == ExpertType::BF16 ? 4 : 1; }
};

}  // namespace tandem::io
