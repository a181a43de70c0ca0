#include "cuda/cublas_loader.h"

#include <cublas_v2.h>
#include <dlfcn.h>

namespace tandem::cuda {
namespace {

// cublas_api.h overloads these two in C++ (a cudaDataType compute type); the C functions take
// cublasComputeType_t.
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long, const void*,
                                                cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                long long, int, cublasComputeType_t, cublasGemmAlgo_t);

// The cuBLAS entry points gemm.cu and gpu_runner.cpp call; a new call there needs its line here.
struct CublasApi {
    decltype(&::cublasCreate_v2) create = nullptr;
    decltype(&::cublasDestroy_v2) destroy = nullptr;
    decltype(&::cublasSetStream_v2) setStream = nullptr;
    decltype(&::cublasSetWorkspace_v2) setWorkspace = nullptr;
    GemmEx gemmEx = nullptr;
    GemmStridedBatchedEx gemmStridedBatchedEx = nullptr;
    decltype(&::cublasGetStatusString) statusString = nullptr;
    std::string missing;
};

template <class Function>
void resolve(void* library, const char* name, Function& function, std::string& missing) {
    function = reinterpret_cast<Function>(dlsym(library, name));
    if (!function && missing.empty())
        missing = std::string(TANDEM_CUBLAS_SONAME " has no ") + name +
                  "; install the cuBLAS of the CUDA version Tandem was built with to use the GPU";
}

CublasApi open() {
    CublasApi api;
    // Never closed: cuBLAS handles live until the process ends. The system's library path first (an
    // installed Tandem); then the toolkit Tandem was built with, which is where a build folder's
    // binaries find it when that toolkit is not on the library path.
    void* library = dlopen(TANDEM_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!library) library = dlopen(TANDEM_CUBLAS_BUILD_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        api.missing = "cuBLAS (" TANDEM_CUBLAS_SONAME ") is not installed or not on the library path (" +
                      std::string(dlerror()) +
                      "); install NVIDIA's " TANDEM_CUBLAS_PACKAGE " package (or the CUDA toolkit Tandem was "
                      "built with) to use the GPU";
        return api;
    }
    resolve(library, "cublasCreate_v2", api.create, api.missing);
    resolve(library, "cublasDestroy_v2", api.destroy, api.missing);
    resolve(library, "cublasSetStream_v2", api.setStream, api.missing);
    resolve(library, "cublasSetWorkspace_v2", api.setWorkspace, api.missing);
    resolve(library, "cublasGemmEx", api.gemmEx, api.missing);
    resolve(library, "cublasGemmStridedBatchedEx", api.gemmStridedBatchedEx, api.missing);
    resolve(library, "cublasGetStatusString", api.statusString, api.missing);
    return api;
}

const CublasApi& api() {
    static const CublasApi loaded = open();
    return loaded;
}

}  // namespace

const std::string& cublasMissing() { return api().missing; }

}  // namespace tandem::cuda

// The definitions the linker finds instead of libcublas's. Without cuBLAS they report
// NOT_INITIALIZED; the GPU backend checks cublasMissing() first, so that is never seen in practice.
using tandem::cuda::api;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
    return api().missing.empty() ? api().create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    return api().missing.empty() ? api().destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    return api().missing.empty() ? api().setStream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
    return api().missing.empty() ? api().setWorkspace(handle, workspace, bytes) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!api().missing.empty()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return api().gemmEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                        computeType, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo) {
    if (!api().missing.empty()) return CUBLAS_STATUS_NOT_INITIALIZED;
    return api().gemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
                                      strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
}

const char* cublasGetStatusString(cublasStatus_t status) {
    return api().missing.empty() ? api().statusString(status) : "cuBLAS is not loaded";
}

}  // extern "C"
