#pragma once
// Numerical checks of a level's expert kernels on random data with awkward shapes: each kernel
// against the scalar kernels, the scalar kernels against a float64 evaluation from the dequantized
// weights and activations, and (BF16) every level's whole expert against float64 on the unrounded
// inputs. The test suites assert these; `tandem-cli bench-moe --verify` runs them on
// machines the test suites do not reach (AMX).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cpu/kernels/expert_kernels.h"
#include "cpu/pool/thread_pool.h"
#include "cpu/pool/worker_pool.h"

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

// One MoE layer at a real model's widths, every expert read where it lies in the layer's buffer (expert
// e at e * expertBytes, up to GBs), with one level's kernels against the scalar kernels.
struct RealShapePlan {
    std::string shape;                 // for the check names: "qwen3-30b-a3b"
    int hidden = 0, inter = 0, experts = 0, topK = 0;
    std::vector<int> everyExpertRows;  // row counts every expert runs, with both kernel kinds (GEMV and GEMM)
    std::vector<int> sampledExperts;   // experts that also run every count of sampledRows
    std::vector<int> sampledRows;
    bool moeDecode = true;             // the whole layer, one token at a time, until every expert has been routed

    // CI's sweep: every expert with 1 row (decode's case), the first, a middle and the last expert with
    // every count of 1..64 rows, and the layer's decode over every expert: about 10 s per level and
    // type for Qwen3-30B-A3B's widths on one Zen 4 core.
    static RealShapePlan ci(std::string shape, int hidden, int inter, int experts, int topK);
    // Every expert with every count of 1..maxRows rows: minutes per level and type.
    static RealShapePlan full(std::string shape, int hidden, int inter, int experts, int topK, int maxRows = 64);
};

// One check per kernel kind, phase (gate/up, down) and row count: the worst row of any expert (the name
// says which expert), each within 1e-5 of the scalar kernels' row; then the MoE layer's decode steps
// (BF16 within 1e-5 per row, INT8/INT4 5e-3 as in checkMoeLayer). `progress` receives a line per stage.
std::vector<KernelCheck> checkRealShape(ThreadPool& pool, Isa isa, ExpertType type, const RealShapePlan& plan, std::uint64_t seed,
                                        const std::function<void(const std::string&)>& progress = {});

}  // namespace tandem::cpu
