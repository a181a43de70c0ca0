#pragma once
// Owning device and pinned-host allocations.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <utility>

#include "cuda/cuda_check.h"

namespace tandem::cuda {

template <class T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t count) : count_(count) {
        if (count) TANDEM_CUDA_CHECK(cudaMalloc(&data_, count * sizeof(T)));
    }
    ~DeviceBuffer() {
        if (data_) cudaFree(data_);
    }
    DeviceBuffer(DeviceBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        std::swap(data_, o.data_);
        std::swap(count_, o.count_);
        return *this;
    }
    T* get() const { return data_; }
    std::size_t size() const { return count_; }
    explicit operator bool() const { return data_ != nullptr; }

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

// Page-locked host memory: the GPU copies to and from it asynchronously, inside a CUDA graph too.
template <class T>
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    // mapped: also addressable by kernels (devicePointer()), for flags the GPU and CPU exchange.
    explicit PinnedBuffer(std::size_t count, bool mapped = false) : count_(count) {
        if (!count) return;
        TANDEM_CUDA_CHECK(cudaHostAlloc(&data_, count * sizeof(T), cudaHostAllocPortable | (mapped ? cudaHostAllocMapped : 0)));
        std::memset(static_cast<void*>(data_), 0, count * sizeof(T));
    }
    T* devicePointer() const {
        void* p = nullptr;
        TANDEM_CUDA_CHECK(cudaHostGetDevicePointer(&p, data_, 0));
        return static_cast<T*>(p);
    }
    ~PinnedBuffer() {
        if (data_) cudaFreeHost(data_);
    }
    PinnedBuffer(PinnedBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
        std::swap(data_, o.data_);
        std::swap(count_, o.count_);
        return *this;
    }
    T* get() const { return data_; }
    std::size_t size() const { return count_; }

private:
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

}  // namespace tandem::cuda
