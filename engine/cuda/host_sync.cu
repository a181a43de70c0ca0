#include "cuda/block_reduce.cuh"
#include "cuda/chained_launch.cuh"
#include "cuda/cuda_check.h"
#include "cuda/host_sync.h"
#include "cuda/slot_signal.cuh"

namespace tandem::cuda {

namespace {

// Asks for `bytes` at p (16-byte aligned, a multiple of 16) to be brought into L2 without waiting.
__device__ __forceinline__ void prefetchToL2(const void* p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

__global__ void stampKernel(LayerClock* clock, int index) { clock[index].signalNs = globalNs(); }

__global__ void timestampKernel(std::uint64_t* where) { *where = globalNs(); }

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

// Decode's return in one block: thread 0 waits as waitKernel does, then every thread adds the CPU's
// result (and the previous layer's deferred result) into the residual stream, and the block, which
// holds the whole row, normalizes it for what follows. Before any of that, the other warps ask L2 for
// the prefetch ranges, in pieces: weights depend on nothing.
__global__ void waitAddKernel(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                              const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed,
                              std::uint64_t timeoutNs, const float* a, const float* b, float* x, int width,
                              FollowingNorm norm, L2Prefetch prefetch) {
    __shared__ float scratch[32];
    constexpr unsigned kPiece = 64 << 10;
    if (threadIdx.x >= 32) {
        const unsigned helpers = blockDim.x - 32;
        unsigned index = 0;  // pieces numbered across all ranges; helper h takes every helpers-th
        for (int r = 0; r < prefetch.count; ++r) {
            const auto* base = static_cast<const char*>(prefetch.data[r]);
            for (unsigned offset = 0; offset < prefetch.bytes[r]; offset += kPiece, ++index)
                if (index % helpers == threadIdx.x - 32)
                    prefetchToL2(base + offset, min(kPiece, prefetch.bytes[r] - offset));
        }
    }
    waitForPrevious();
    startNext();
    if (threadIdx.x == 0) waitForSlot(control, counter, previous, previousCounter, layer, clock, failed, timeoutNs);
    __syncthreads();
    // Uncached loads: the CPU wrote these after the kernel started.
    float squares = 0.0f;
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
        const float v = x[i] + (b ? __ldcv(a + i) + __ldcv(b + i) : __ldcv(a + i));
        x[i] = v;
        squares += v * v;
    }
    if (!norm.weight) return;
    // Each thread reads back only the elements it wrote.
    const float inv = 1.0f / sqrtf(blockSum(squares, scratch) / static_cast<float>(width) + norm.eps);
    for (int i = threadIdx.x; i < width; i += blockDim.x)
        storeBf16(x[i] * inv * norm.weight[i], norm.out + i, norm.out + width + i, norm.split);
}

}  // namespace

void launchWaitAdd(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                   const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed, double timeoutSeconds,
                   const float* hostA, const float* hostB, float* x, int width, const FollowingNorm& norm,
                   const L2Prefetch& prefetch, cudaStream_t s) {
    launchChained(waitAddKernel, 1, 1024, 0, s, control, counter, previous, previousCounter, layer, clock, failed,
                  static_cast<std::uint64_t>(timeoutSeconds * 1e9), hostA, hostB, x, width, norm, prefetch);
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
