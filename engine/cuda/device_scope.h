#pragma once
// The CUDA device a scope's work runs on: a pipeline's stages on several GPUs (issue 29) each allocate,
// launch and free on their own. Restores the device current before; -1 leaves the current device alone
// (one GPU, as before).
#include <cuda_runtime.h>

#include "cuda/cuda_check.h"

namespace tandem::cuda {

class DeviceScope {
public:
    explicit DeviceScope(int device) {
        if (device < 0) return;
        int current = 0;
        TANDEM_CUDA_CHECK(cudaGetDevice(&current));
        if (current == device) return;
        TANDEM_CUDA_CHECK(cudaSetDevice(device));
        previous_ = current;
    }
    ~DeviceScope() {
        if (previous_ >= 0) cudaSetDevice(previous_);
    }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

private:
    int previous_ = -1;
};

}  // namespace tandem::cuda
