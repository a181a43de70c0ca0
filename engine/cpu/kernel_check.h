#pragma once
// Numerical checks of a level's expert kernels on random data with awkward shapes: each kernel
// against the scalar kernels, the scalar kernels against a float64 evaluation from the dequantized
// weights and activations, and (BF16) every level's whole expert against float64 on the unrounded
// inputs. The test suites assert these; `tandem-cli bench-moe --verify` runs them on
// machines the test suites do not reach (AMX).
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/expert_kernels.h"
#include "cpu/worker_pool.h"

namespace tandem::cpu {

struct KernelCheck {
    std::string name;  // "avx512 int4 gemm gate/up 200x136 rows 17"
    double error = 0;  // relative L2 error
    double tolerance = 0;
    bool passed() const { return error <= tolerance; }  // NaN fails
};

// Both kernel kinds (GEMV, GEMM) of every expert type for several shapes and row counts.
std::vector<KernelCheck> checkKernels(const ExpertKernels& kernels, std::uint64_t seed);

// A whole MoE layer (one and many tokens) on `pool` with `isa` against the same layer with the scalar
// kernels: BF16 within 1e-5 in every row; INT8/INT4 looser, because the intermediate values are
// rounded to int8 between gate/up and down, and where the two paths differ in the last float bit that
// rounding can go either way.
std::vector<KernelCheck> checkMoeLayer(ExpertPool& pool, Isa isa, std::uint64_t seed);

}  // namespace tandem::cpu
