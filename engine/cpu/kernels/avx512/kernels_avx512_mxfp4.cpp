// The AVX-512 kernels of MXFP4 experts: INT4's kernels (kernels_avx512_impl.h) with each nibble taken
// through a vpshufb table to 2v + 12, 4 rows per GEMV pass and 8 per GEMM pass as INT4. A translation
// unit of their own, like the BF16 GEMM's, so that adding them leaves GCC's inlining and scheduling
// of the other types' kernels in kernels_avx512.cpp exactly as measured.
#include "cpu/kernels/avx512/kernels_avx512_impl.h"

namespace tandem::cpu {

KernelPair avx512Mxfp4Gemv() {
    constexpr int kRows = 4;
    return {gateUpKernel<ExpertType::MXFP4, kRows>, downKernel<ExpertType::MXFP4, kRows>};
}

KernelPair avx512Mxfp4Gemm() {
    constexpr int kRows = 8;
    return {gateUpKernel<ExpertType::MXFP4, kRows>, downKernel<ExpertType::MXFP4, kRows>};
}

}  // namespace tandem::cpu
