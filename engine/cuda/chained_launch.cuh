#pragma once
// Programmatic dependent launch (Hopper and later) for the kernels of a decode step. A kernel launched
// with launchChained may be scheduled while the kernel before it in the stream still runs, so the
// launch latency and its own start-up (reading weights) overlap that kernel's tail. In exchange it
// must call waitForPrevious() before it reads anything earlier work of the step wrote and before it
// writes anything; before that it may only read what no kernel writes, such as weights. Every kernel
// that calls waitForPrevious() also calls startNext(), which lets the kernel after it be scheduled.
// Without the launch attribute (older GPUs, TANDEM_GPU_CHAIN=0) both calls do nothing.
#include <cuda_runtime.h>

#include <utility>

#include "cuda/cuda_check.h"

namespace tandem::cuda {

__device__ __forceinline__ void waitForPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void startNext() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Set once by the runner through enableChainedLaunches (kernels.h).
namespace chain_detail {
inline bool enabled = false;
}

template <class... Params, class... Args>
void launchChained(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t sharedBytes, cudaStream_t s,
                   Args&&... args) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = sharedBytes;
    config.stream = s;
    config.attrs = &attribute;
    config.numAttrs = chain_detail::enabled ? 1 : 0;
    TANDEM_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace tandem::cuda
