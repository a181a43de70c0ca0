// The AMX int8 dense kernel with emulated tiles (engine/cpu/kernels/amx/amx_tiles.h), so that its tiling,
// tails, addressing and epilogue are tested on CPUs without AMX; its functions are named in
// tandem::cpu::amx_emulated beside the real ones. tst_dense_amx runs the real kernel too where the CPU has AMX.
#define TANDEM_AMX_EMULATE
#include "cpu/dense/dense_int8_amx.cpp"
