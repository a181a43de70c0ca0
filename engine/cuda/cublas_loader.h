#pragma once
// cuBLAS without a load-time dependency: cublas_loader.cpp defines the few cuBLAS functions Tandem
// calls, each forwarding to libcublas.so.N opened with dlopen on first use. A machine without cuBLAS
// then runs the CPU path instead of failing to start; the GPU path says what to install.
#include <string>

namespace tandem::cuda {

// Opens cuBLAS once per process. Empty when it is usable; otherwise why not and what to install.
const std::string& cublasMissing();

}  // namespace tandem::cuda
