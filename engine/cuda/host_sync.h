#pragma once
// The GPU's half of the expert bridge in spin mode (expert_bridge.h): kernels that signal a slot and
// wait for the CPU's result through host memory mapped into the GPU, so a decode graph needs no host
// nodes. The signal and wait kernels run one thread; the decode hand-over kernels one block.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/slot_control.h"

namespace tandem::cuda {

// clock[index].signalNs = now (the step's start uses index numLayers).
void launchStamp(LayerClock* clock, int index, cudaStream_t s);

// *where = now (the GPU's clock, ns); for TANDEM_GPU_PROFILE's per-stage timings.
void launchTimestamp(std::uint64_t* where, cudaStream_t s);

// counter += 1; control.layer = layer; control.ready = counter; clock[layer].signalNs = now.
void launchSignal(SlotControl* control, std::uint64_t* counter, int layer, LayerClock* clock, cudaStream_t s);

// Spins until control.immediateDone reaches *counter and, with a previous slot, its deferredDone
// reaches *previousCounter. Gives up after `timeoutSeconds`, setting *failed, so a CPU that never
// answers cannot hang the GPU.
void launchWait(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed, double timeoutSeconds,
                cudaStream_t s);

// Weights to bring into L2 while the GPU waits for the CPU: the next layer's router and attention
// projections, which the GPU then reads from L2 instead of HBM. Ranges 16-byte aligned, sizes
// multiples of 16.
struct L2Prefetch {
    static constexpr int kMaxRanges = 6;
    const void* data[kMaxRanges] = {};
    unsigned bytes[kMaxRanges] = {};
    int count = 0;
};

// The RMSNorm that follows a layer in decode (the next layer's input norm, or the final norm), done by
// the wait kernel once x is complete: out (bf16, its lo row `width` below with split) = x / rms(x) *
// weight. weight null: none.
struct FollowingNorm {
    const float* weight = nullptr;
    float eps = 0;
    __nv_bfloat16* out = nullptr;
    bool split = false;
};

// Decode (one token): launchWait followed by launchAddFromHost's x += hostA (+ hostB) and `norm` in
// one kernel, whose other threads meanwhile ask L2 for `prefetch`. (The hand-over is part of the
// router's kernel, launchRouterDecode in kernels.h.)
void launchWaitAdd(const SlotControl* control, const std::uint64_t* counter, const SlotControl* previous,
                   const std::uint64_t* previousCounter, int layer, LayerClock* clock, int* failed, double timeoutSeconds,
                   const float* hostA, const float* hostB, float* x, int width, const FollowingNorm& norm,
                   const L2Prefetch& prefetch, cudaStream_t s);

}  // namespace tandem::cuda
