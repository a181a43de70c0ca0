#pragma once
// The AVX-512 kernels by kind, for the AMX file, which uses AVX-512 wherever tiles do not pay.
#include "cpu/kernels/expert_kernels.h"

namespace tandem::cpu {

KernelPair avx512Gemv(ExpertType type);
KernelPair avx512Gemm(ExpertType type);
KernelPair avx512Bf16Gemm();  // kernels_avx512_bf16_gemm.cpp
KernelPair avx512Mxfp4Gemv();  // kernels_avx512_mxfp4.cpp
KernelPair avx512Mxfp4Gemm();
// Gate/up of any type with the call's epilogue (c.epilogue set), the GEMV (4 rows a pass) or GEMM (8)
// kernels: kernels_avx512_epilogue.cpp. The plain kernels forward such calls here.
void avx512GateUpWithEpilogue(const GateUpCall& c, bool gemm);

}  // namespace tandem::cpu
