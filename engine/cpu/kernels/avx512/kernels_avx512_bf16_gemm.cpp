// The AVX-512 GEMM kernels of BF16 experts: 8 rows per pass over a panel, the block loop unrolled by 2
// (kernels_avx512_impl.h). BF16 used to take its 4-row GEMV kernels for GEMM too: 8 rows were slower
// while the block loop was unrolled fully (0.66-0.68 against 0.54-0.57 s per qwen3-30b-a3b layer at
// 512 tokens on one Zen 4 thread); unrolled by 2 they take 28% less time than 4 (docs/BENCHMARKS.md).
// A translation unit of their own, so that adding them leaves GCC's inlining and scheduling of the
// GEMV kernels in kernels_avx512.cpp, measured on both machines, exactly as they were.
#include "cpu/kernels/avx512/kernels_avx512_impl.h"

namespace tandem::cpu {

KernelPair avx512Bf16Gemm() {
    constexpr int kRows = 8;
    return {gateUpKernel<ExpertType::BF16, kRows>, downKernel<ExpertType::BF16, kRows>};
}

}  // namespace tandem::cpu
