// AVX-512 expert kernels: vdpbf16ps (AVX512-BF16) for BF16 experts, vpdpbusd (AVX512-VNNI) for INT8,
// INT4 and MXFP4 experts (MXFP4's in kernels_avx512_mxfp4.cpp). Each 64-byte row of a packed block is one zmm of 16 outputs, multiplied against a
// broadcast pair (bf16) or quad (int8) of one activation row. BF16 activations come split in hi and
// lo (activation_quant.h): each weight load feeds two dot products, which decode, bound by reading
// the weights, does not notice. This file is compiled with AVX-512 flags and reached only through
// kernelsFor(Isa::Avx512) or the AMX kernels.
#include "cpu/kernels/avx512/kernels_avx512_impl.h"

namespace tandem::cpu {

namespace {

// GEMV keeps up to 4 rows in registers over one pass of the weights; GEMM blocks 8 rows per pass
// over a panel that stays in L2 (BF16's GEMM: kernels_avx512_bf16_gemm.cpp).
constexpr int kGemvRows = 4;
constexpr int kGemmRows = 8;

}  // namespace

KernelPair avx512Gemv(ExpertType type) {
    switch (type) {
    case ExpertType::BF16: return {gateUpKernel<ExpertType::BF16, kGemvRows>, downKernel<ExpertType::BF16, kGemvRows>};
    case ExpertType::INT8: return {gateUpKernel<ExpertType::INT8, kGemvRows>, downKernel<ExpertType::INT8, kGemvRows>};
    case ExpertType::INT4: return {gateUpKernel<ExpertType::INT4, kGemvRows>, downKernel<ExpertType::INT4, kGemvRows>};
    case ExpertType::MXFP4: return avx512Mxfp4Gemv();
    }
    return {};
}

KernelPair avx512Gemm(ExpertType type) {
    switch (type) {
    case ExpertType::BF16: return avx512Bf16Gemm();
    case ExpertType::INT8: return {gateUpKernel<ExpertType::INT8, kGemmRows>, downKernel<ExpertType::INT8, kGemmRows>};
    case ExpertType::INT4: return {gateUpKernel<ExpertType::INT4, kGemmRows>, downKernel<ExpertType::INT4, kGemmRows>};
    case ExpertType::MXFP4: return avx512Mxfp4Gemm();
    }
    return {};
}

const ExpertKernels& avx512Kernels() {
    static const ExpertKernels k = [] {
        ExpertKernels e;
        e.isa = Isa::Avx512;
        e.bf16Activations = Bf16Activations::Split;
        for (const ExpertType t : kAllExpertTypes) {
            e.gemv[static_cast<int>(t)] = avx512Gemv(t);
            e.gemm[static_cast<int>(t)] = avx512Gemm(t);
            e.gemmMinRows[static_cast<int>(t)] = kGemvRows + 1;
        }
        // `bench-moe --sweep` on Zen 4 (deepseek-v2-lite shape, two runs): INT8/INT4 passes of 5-7 rows,
        // unrolled fully, are 2-16% slower than 4 + 1-3 GEMV rows; 8 rows 18-23% faster.
        e.gemmMinRows[static_cast<int>(ExpertType::INT8)] = kGemmRows;
        e.gemmMinRows[static_cast<int>(ExpertType::INT4)] = kGemmRows;
        e.gemmMinRows[static_cast<int>(ExpertType::MXFP4)] = kGemmRows;  // INT4's kernels with a table: INT4's measurement
        return e;
    }();
    return k;
}

}  // namespace tandem::cpu
