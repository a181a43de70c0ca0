// The GPU backend of a build without CUDA.
#include "runtime/gpu_backend.h"

namespace tandem::runtime {

std::unique_ptr<GpuBackend> createGpuBackend(const model::ModelConfig&, const model::ModelWeights&, cpu::ThreadPool&, int,
                                             ExpertsFactory, const GpuExpertsRequest&,
                                             std::string& reason) {
    reason = "this build of Tandem has no GPU support (built without CUDA)";
    return nullptr;
}

}  // namespace tandem::runtime
