#pragma once
// The AMX tile unit's measured throughput (`tandem-cli bench-moe --tile-peak`): the ceiling that the
// AMX kernels' TFLOP/s are compared with, measured on the machine rather than taken from the data sheet.
namespace tandem::cpu {

enum class TileTest {
    Bf16Resident,     // tdpbf16ps on resident tiles
    Int8Resident,     // tdpbssd, K 64, resident tiles
    Int8K32Resident,  // tdpbssd, K 32 (the INT4 kernels' tile products), resident tiles
    Int8FromL1,       // tdpbssd with A and B reloaded from L1 every step (contiguous tiles)
    Int8StridedA,     // tdpbssd with A rows a DeepSeek-V3 activation row apart, from a 1 MiB region
    Int8BFromL2,      // tdpbssd with B tiles (contiguous, as packed weights lie) from a 1 MiB region
};

// Operations per second (2 per multiply-add) on the calling thread; AMX only (the caller checks).
double amxTileOpsPerSecond(TileTest test, long steps);

}  // namespace tandem::cpu
