// The hybrid GPU path behind runtime::GpuBackend: finds a usable GPU, checks that the model fits,
// uploads the dense weights and hands out per-session runners.
#include <cuda_runtime.h>

#include <string>

#include "cuda/cublas_loader.h"
#include "runtime/gpu/gpu_runner.h"
#include "runtime/gpu/gpu_weights.h"
#include "tandem/byte_size.h"
#include "model/rope.h"
#include "runtime/gpu_backend.h"

namespace tandem::runtime {

namespace {

constexpr int kPrefillChunk = 512;
constexpr std::uint64_t kHeadroomBytes = 512ull << 20;  // the CUDA context, cuBLAS, fragmentation

class CudaBackend : public GpuBackend {
public:
    CudaBackend(const model::ModelConfig& config, const model::ModelWeights& weights, cpu::ThreadPool& pool,
                ExpertsFactory experts, std::string name)
        : config_(config), experts_(std::move(experts)), rope_(config), name_(std::move(name)),
          gpuWeights_(cuda::uploadWeights(config, weights, rope_.inverseFrequencies(), pool)) {}

    std::unique_ptr<ModelRunner> newRunner(int capacity) override {
        return std::make_unique<cuda::GpuRunner>(config_, experts_(), gpuWeights_, rope_, capacity, kPrefillChunk);
    }
    std::string deviceName() const override { return name_; }

private:
    const model::ModelConfig& config_;
    ExpertsFactory experts_;
    model::Rope rope_;
    std::string name_;
    cuda::GpuWeights gpuWeights_;
};

}  // namespace

std::unique_ptr<GpuBackend> createGpuBackend(const model::ModelConfig& config, const model::ModelWeights& weights,
                                             cpu::ThreadPool& pool, int capacity, ExpertsFactory experts,
                                             std::string& reason) {
    int count = 0;
    const cudaError_t probe = cudaGetDeviceCount(&count);
    if (probe != cudaSuccess || count == 0) {
        if (probe == cudaSuccess || probe == cudaErrorNoDevice)
            reason = "no NVIDIA GPU was found";
        else if (probe == cudaErrorInsufficientDriver)
            reason = "no NVIDIA driver new enough for CUDA " + std::to_string(CUDART_VERSION / 1000) +
                     " was found (install or update the NVIDIA driver to use the GPU)";
        else
            reason = std::string("the NVIDIA driver is not usable (") + cudaGetErrorString(probe) + ")";
        cudaGetLastError();
        return nullptr;
    }
    if (const std::string& missing = cuda::cublasMissing(); !missing.empty()) {
        reason = missing;
        return nullptr;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major < 8) {
        reason = std::string("the GPU ") + prop.name + " is older than the Ampere generation Tandem needs (bf16)";
        return nullptr;
    }
    // The engine thread polls the stream while it serves the expert bridge (GpuRunner::finishStream);
    // where the runtime still waits (uploads), let it sleep, not spin on a core the expert pool needs.
    if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess) cudaGetLastError();  // already set up
    TANDEM_CUDA_CHECK(cudaSetDevice(0));
    std::size_t freeBytes = 0, totalBytes = 0;
    TANDEM_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));

    const std::uint64_t weightBytes = cuda::gpuWeightBytes(config, weights);
    const std::uint64_t sessionBytes = cuda::GpuRunner::deviceBytes(config, capacity, kPrefillChunk);
    if (weightBytes + sessionBytes + kHeadroomBytes > freeBytes) {
        std::string message = "the model's GPU part needs " + tandem::formatBytes(weightBytes) + " for weights and " +
                              tandem::formatBytes(sessionBytes) + " for a " + std::to_string(capacity) +
                              "-token context, but the GPU has " + tandem::formatBytes(freeBytes) + " free.";
        if (weightBytes + kHeadroomBytes < freeBytes) {
            const std::uint64_t perToken = cuda::GpuRunner::deviceBytes(config, 2, kPrefillChunk) -
                                           cuda::GpuRunner::deviceBytes(config, 1, kPrefillChunk);
            const std::uint64_t spare = freeBytes - weightBytes - kHeadroomBytes -
                                        cuda::GpuRunner::deviceBytes(config, 0, kPrefillChunk);
            message += " A context of up to " + std::to_string(perToken ? spare / perToken : 0) + " tokens would fit.";
        } else {
            message += " Run on the CPU only, or use a GPU with more memory.";
        }
        throw Error(message);
    }
    return std::make_unique<CudaBackend>(config, weights, pool, std::move(experts), prop.name);
}

}  // namespace tandem::runtime
