#include "cuda/cuda_check.h"
#include "cuda/host_sync.h"

namespace tandem::cuda {

namespace {

__device__ inline std::uint64_t globalNs() {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void stampKernel(LayerClock* clock, int index) { clock[index].signalNs = globalNs(); }

__global__ void timestampKernel(std::uint64_t* where) { *where = globalNs(); }

__global__ void signalKernel(SlotControl* control, std::uint64_t* counter, int layer, LayerClock* clock) {
    const std::uint64_t n = *counter + 1;
    *counter = n;
    control->layer = layer;
    // The slot's data arrived by copies that finished before this kernel; order our own writes too.
    __threadfence_system();
    control->ready = n;
    clock[layer].signalNs = globalNs();
}

__global__ void waitKernel(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                           const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed,
                           std::uint64_t timeoutNs) {
    const std::uint64_t start = globalNs();
    clock[layer].waitBeginNs = start;
    const std::uint64_t target = *counter;
    const std::uint64_t previousTarget = previous ? *previousCounter : 0;
    while (control->immediateDone < target || (previous && previous->deferredDone < previousTarget)) {
        if (globalNs() - start > timeoutNs) {
            *failed = 1;
            break;
        }
        __nanosleep(64);
    }
    __threadfence_system();
    clock[layer].waitEndNs = globalNs();
}

}  // namespace

void launchStamp(LayerClock* clock, int index, cudaStream_t s) {
    stampKernel<<<1, 1, 0, s>>>(clock, index);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchTimestamp(std::uint64_t* where, cudaStream_t s) {
    timestampKernel<<<1, 1, 0, s>>>(where);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchSignal(SlotControl* control, std::uint64_t* counter, int layer, LayerClock* clock, cudaStream_t s) {
    signalKernel<<<1, 1, 0, s>>>(control, counter, layer, clock);
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

void launchWait(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed, double timeoutSeconds,
                cudaStream_t s) {
    waitKernel<<<1, 1, 0, s>>>(control, counter, previous, previousCounter, layer, clock, failed,
                               static_cast<std::uint64_t>(timeoutSeconds * 1e9));
    TANDEM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tandem::cuda
