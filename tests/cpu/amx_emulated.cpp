// The AMX kernels with emulated tiles (engine/cpu/kernels/amx/amx_tiles.h), so that their tiling, tile shapes,
// addressing and epilogues are tested on CPUs without AMX. Real AMX runs in bench-moe --verify on the
// GPU machine (scripts/device-cpu-bench.sh).
#define TANDEM_AMX_EMULATE
#include "cpu/kernels/amx/kernels_amx.cpp"
