#pragma once
// The AVX-512 kernels by kind, for the AMX file, which uses AVX-512 wherever tiles do not pay.
#include "cpu/kernels/expert_kernels.h"

namespace tandem::cpu {

KernelPair avx512Gemv(ExpertType type);
KernelPair avx512Gemm(ExpertType type);
KernelPair avx512Bf16Gemm();  // kernels_avx512_bf16_gemm.cpp
KernelPair avx512Mxfp4Gemv();  // kernels_avx512_mxfp4.cpp
KernelPair avx512Mxfp4Gemm();

}  // namespace tandem::cpu
