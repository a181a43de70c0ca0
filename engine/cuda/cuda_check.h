#pragma once
// Turns CUDA and cuBLAS failures into tandem::Error with the call that failed, so a GPU problem reaches
// the user as a message (and the engine can fall back to the CPU) instead of a crash.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "tandem/error.h"

namespace tandem::cuda {

class GpuError : public Error {
public:
    using Error::Error;
};

[[noreturn]] inline void throwCuda(cudaError_t e, const char* call) {
    throw GpuError(std::string("GPU error in ") + call + ": " + cudaGetErrorString(e));
}
[[noreturn]] inline void throwCublas(cublasStatus_t s, const char* call) {
    throw GpuError(std::string("cuBLAS error in ") + call + ": " + cublasGetStatusString(s));
}

}  // namespace tandem::cuda

#define TANDEM_CUDA_CHECK(call)                                                   \
    do {                                                                          \
        const cudaError_t tandemCudaStatus_ = (call);                             \
        if (tandemCudaStatus_ != cudaSuccess) ::tandem::cuda::throwCuda(tandemCudaStatus_, #call); \
    } while (0)

#define TANDEM_CUBLAS_CHECK(call)                                                 \
    do {                                                                          \
        const cublasStatus_t tandemCublasStatus_ = (call);                        \
        if (tandemCublasStatus_ != CUBLAS_STATUS_SUCCESS) ::tandem::cuda::throwCublas(tandemCublasStatus_, #call); \
    } while (0)
