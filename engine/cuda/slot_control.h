#pragma once
// The flags and clocks the GPU and the CPU's expert bridge exchange through host memory mapped into
// the GPU (expert_bridge.h). Plain structs, included by CUDA and C++ files alike.
#include <cstdint>

namespace tandem::cuda {

// Written by both sides; lives in mapped pinned memory, a cache line per slot.
struct alignas(64) SlotControl {
    volatile std::uint64_t ready;          // submissions of the slot so far
    volatile std::int32_t layer;           // the layer of the latest submission (written before ready)
    volatile std::uint64_t immediateDone;  // the CPU: submissions whose immediate part is done
    volatile std::uint64_t deferredDone;   // ... and whose deferred part is done
};

// When each MoE layer reached its signal and its wait, in ns of one clock (the GPU's %globaltimer in
// spin mode, the host's steady clock in host mode); entry numLayers holds the step's start.
struct LayerClock {
    volatile std::uint64_t signalNs;
    volatile std::uint64_t waitBeginNs;
    volatile std::uint64_t waitEndNs;
};

}  // namespace tandem::cuda
