#include "cuda/chained_launch.cuh"
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

__device__ void signalSlot(SlotControl* control, std::uint64_t* counter, int layer, LayerClock* clock) {
    const std::uint64_t n = *counter + 1;
    *counter = n;
    control->layer = layer;
    // The slot's data arrived by copies that finished before this kernel; order our own writes too.
    __threadfence_system();
    control->ready = n;
    clock[layer].signalNs = globalNs();
}

__device__ void waitForSlot(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
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

__global__ void signalKernel(SlotControl* control, std::uint64_t* counter, int layer, LayerClock* clock) {
    signalSlot(control, counter, layer, clock);
}

__global__ void waitKernel(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                           const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed,
                           std::uint64_t timeoutNs) {
    waitForSlot(control, counter, previous, previousCounter, layer, clock, failed, timeoutNs);
}

// Decode's hand-over in one block: the token's normalized hidden state and routing written to the
// slot, then the signal (as signalKernel), so the CPU starts one kernel launch earlier.
__global__ void exportSignalKernel(const float* hidden, int width, const int* ids, const float* weights, int routes,
                                   float* hostHidden, int* hostIds, float* hostWeights, SlotControl* control,
                                   std::uint64_t* counter, int layer, LayerClock* clock) {
    waitForPrevious();
    startNext();
    for (int i = threadIdx.x; i < width; i += blockDim.x) hostHidden[i] = hidden[i];
    for (int i = threadIdx.x; i < routes; i += blockDim.x) {
        hostIds[i] = ids[i];
        hostWeights[i] = weights[i];
    }
    __threadfence_system();  // each thread's writes visible to the CPU before the barrier
    __syncthreads();
    if (threadIdx.x == 0) signalSlot(control, counter, layer, clock);
}

// Decode's return in one block: thread 0 waits as waitKernel does, then every thread adds the CPU's
// result (and the previous layer's deferred result) into the residual stream. Before any of that,
// the other warps ask L2 for the prefetch ranges, in pieces, since weights depend on nothing.
__global__ void waitAddKernel(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                              const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed,
                              std::uint64_t timeoutNs, const float* a, const float* b, float* x, int width,
                              L2Prefetch prefetch) {
    constexpr unsigned kPiece = 64 << 10;
    if (threadIdx.x >= 32) {
        const unsigned helpers = blockDim.x - 32;
        unsigned index = 0;  // pieces numbered across all ranges; helper h takes every helpers-th
        for (int r = 0; r < prefetch.count; ++r) {
            const auto* base = static_cast<const char*>(prefetch.data[r]);
            for (unsigned offset = 0; offset < prefetch.bytes[r]; offset += kPiece, ++index)
                if (index % helpers == threadIdx.x - 32) prefetchToL2(base + offset, min(kPiece, prefetch.bytes[r] - offset));
        }
    }
    waitForPrevious();
    startNext();
    if (threadIdx.x == 0) waitForSlot(control, counter, previous, previousCounter, layer, clock, failed, timeoutNs);
    __syncthreads();
    // Uncached loads: the CPU wrote these after the kernel started.
    for (int i = threadIdx.x; i < width; i += blockDim.x) x[i] += b ? __ldcv(a + i) + __ldcv(b + i) : __ldcv(a + i);
}

}  // namespace

void launchExportSignal(const float* hidden, int width, const int* ids, const float* weights, int routes,
                        float* hostHidden, int* hostIds, float* hostWeights, SlotControl* control, std::uint64_t* counter,
                        int layer, LayerClock* clock, cudaStream_t s) {
    launchChained(exportSignalKernel, 1, 1024, 0, s, hidden, width, ids, weights, routes, hostHidden, hostIds, hostWeights, control,
                                          counter, layer, clock);
}

void launchWaitAdd(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                   const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed, double timeoutSeconds,
                   const float* hostA, const float* hostB, float* x, int width, const L2Prefetch& prefetch,
                   cudaStream_t s) {
    launchChained(waitAddKernel, 1, 1024, 0, s, control, counter, previous, previousCounter, layer, clock, failed,
                  static_cast<std::uint64_t>(timeoutSeconds * 1e9), hostA, hostB, x, width, prefetch);
}

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
