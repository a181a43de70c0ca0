#pragma once
// The GPU's side of a slot's signal (host_sync.h), shared by the kernels that hand a layer over to
// the CPU.
#include <cstdint>

#include "cuda/slot_control.h"

namespace tandem::cuda {

__device__ inline std::uint64_t globalNs() {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ inline void signalSlot(SlotControl* control, std::uint64_t* counter, int layer, LayerClock* clock) {
    const std::uint64_t n = *counter + 1;
    *counter = n;
    control->layer = layer;
    // The slot's data arrived by copies that finished before this kernel; order our own writes too.
    __threadfence_system();
    control->ready = n;
    clock[layer].signalNs = globalNs();
}

}  // namespace tandem::cuda
