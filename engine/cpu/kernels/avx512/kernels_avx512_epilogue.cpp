// The AVX-512 gate/up kernels with an epilogue (biases, gpt-oss's clamped SwiGLU: expert_kernels.h),
// every type, GEMV and GEMM. A translation unit of their own, so that the plain kernels in
// kernels_avx512.cpp, whose code was measured on both machines, compile exactly as before (their
// only change is the forward here when a call carries an epilogue).
#include "cpu/kernels/avx512/kernels_avx512_impl.h"

namespace tandem::cpu {

void avx512GateUpWithEpilogue(const GateUpCall& c, bool gemm) {
    constexpr int kGemv = 4, kGemm = 8;  // rows per pass, as the plain kernels
    switch (c.layout->type) {
    case ExpertType::BF16: return gemm ? gateUpKernel<ExpertType::BF16, kGemm, true>(c) : gateUpKernel<ExpertType::BF16, kGemv, true>(c);
    case ExpertType::INT8: return gemm ? gateUpKernel<ExpertType::INT8, kGemm, true>(c) : gateUpKernel<ExpertType::INT8, kGemv, true>(c);
    case ExpertType::INT4: return gemm ? gateUpKernel<ExpertType::INT4, kGemm, true>(c) : gateUpKernel<ExpertType::INT4, kGemv, true>(c);
    case ExpertType::MXFP4: return gemm ? gateUpKernel<ExpertType::MXFP4, kGemm, true>(c) : gateUpKernel<ExpertType::MXFP4, kGemv, true>(c);
    }
}

}  // namespace tandem::cpu
