#pragma once
// The CPU side of a hybrid MoE layer. The GPU copies a layer's normalized hidden states and routing
// into a pinned slot and signals it; the bridge sees the signal, has the CPU pool compute the routed
// experts while the GPU runs the shared experts, and flags the result, which the GPU waits for.
// With Expert Deferral a submission is split: the immediate part (the k-d heaviest experts) is flagged
// first and waited for at its own layer; the deferred part is flagged next and waited for at the next
// MoE layer, so it overlaps that layer's attention on the GPU.
//
// Signals travel through a SlotControl in host memory mapped into the GPU: GPU kernels write `ready`
// and spin on the done flags, with no CUDA driver involvement (host nodes of the graph doing the same
// through cudaLaunchHostFunc were slower, docs/BENCHMARKS.md).
//
// The engine thread, which has nothing else to do while the GPU runs a forward pass, serves the bridge
// (pumpUntil) until the GPU's work is done, on the core the CPU pool leaves to its caller: no second
// thread spins on that core, and the end of a decode step is seen by polling rather than by a wake-up
// from the driver. While the engine thread is still enqueueing a prefill chunk kernel by kernel, a
// helper thread serves instead (ServeMeanwhile): a launch can block until the GPU is idle (lazy module
// loading, a full launch queue), and the GPU may be waiting for the CPU at that moment. A decode step
// is one graph launch, so it needs no helper.
//
// A layer's parts are queued on the CPU pool together and the serving thread takes its share of both;
// each part raises its flag from whichever thread finishes it last, and the workers go from the
// immediate part to the deferred part without waiting for each other (running each part in turn with
// the serving thread, raising the flag after each, was slower: docs/BENCHMARKS.md).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "cuda/slot_control.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/routed_experts.h"
#include "runtime/placement.h"

namespace tandem::cuda {

struct ExpertSlot {
    float* x = nullptr;        // [tokens, hidden] pinned, written by the GPU
    int* ids = nullptr;        // [tokens, topK]
    float* weights = nullptr;  // [tokens, topK]
    float* immediateOut = nullptr;
    float* deferredOut = nullptr;
    SlotControl* control = nullptr;
    int tokens = 0;            // rows of the current forward pass (set by the host before it runs)
    std::uint64_t handled = 0; // the bridge only
    // The GPU adds deferredOut in this pass even when nothing was deferred (decode's graph does; a prompt
    // chunk without deferral does not), so it must then be zeroed (set by the host before the pass).
    bool deferredRead = true;
};

class ExpertBridge {
public:
    // `layers`: the runner's layer plan (who defers to whom; runtime::placedLayers).
    ExpertBridge(const model::ModelConfig& config, std::vector<model::LayerPlan> layers,
                 std::unique_ptr<model::QueuedRoutedExperts> experts, std::vector<ExpertSlot*> slots);
    ~ExpertBridge();  // waits for parts still on the pool
    ExpertBridge(const ExpertBridge&) = delete;
    ExpertBridge& operator=(const ExpertBridge&) = delete;

    // The deferral the next submissions use.
    void setDeferral(int deferred, bool skip) {
        deferred_.store(deferred, std::memory_order_relaxed);
        skip_.store(skip, std::memory_order_relaxed);
    }

    // Serves the slots (starts signalled submissions, raises the flags of finished parts) until
    // finished() says true; finished() is asked between rounds. Keeps the CPU pool's workers spinning
    // for kLinger after it returns, so the next decode step's first layer finds them awake.
    // Idle::Yield gives the core away between rounds: for a helper that shares its core with the engine
    // thread (both run on the core the pool leaves to its caller).
    enum class Idle { Spin, Yield };
    void pumpUntil(const std::function<bool()>& finished, Idle idle = Idle::Spin);
    // The same for several bridges at once, in turn (a batched decode step: GpuRunner::decodeBatch).
    static void pumpAllUntil(const std::vector<ExpertBridge*>& bridges, const std::function<bool()>& finished);
    static constexpr std::chrono::milliseconds kLinger{20};

    // For its lifetime, a helper thread serves the bridge (never at the same time as pumpUntil). It
    // yields its core whenever there is nothing to serve, so the engine thread's launches go on.
    class ServeMeanwhile {
    public:
        explicit ServeMeanwhile(ExpertBridge& bridge);
        ~ServeMeanwhile();
        ServeMeanwhile(const ServeMeanwhile&) = delete;
        ServeMeanwhile& operator=(const ServeMeanwhile&) = delete;

    private:
        std::atomic<bool> stop_{false};
        std::thread thread_;
    };

    // What the GPU's signal and wait kernels do (host_sync.h), from the host: for tests that play the GPU.
    static void submitFromHost(ExpertSlot& slot, int layer);
    static void waitFromHost(const ExpertSlot& slot, const ExpertSlot* previous);

    // The experts of a layer the GPU computes, which the CPU then skips (cpu::kComputedElsewhere): those
    // the placement keeps there (`held[layer][expert]`, empty rows for none; for the bridge's life) and,
    // for the submissions from now on, experts `first` and up of `layer` (a streamed layer's copied
    // share; numExperts for none). Not while a forward pass runs.
    void computeOnGpu(std::vector<std::vector<bool>> held);
    void setGpuFrom(int layer, int first);
    // Every submission's routing is counted there (all of it, the GPU's experts too), when not null.
    void countUsage(runtime::UsageCounter* usage) { usage_ = usage; }
    // CPU seconds per layer since the last call.
    std::vector<double> takeCpuSeconds();
    // The first CPU failure since the last call, rethrown on the calling (engine) thread.
    void rethrowFailure();

private:
    using Clock = std::chrono::steady_clock;
    struct InFlight {
        int lane;
        int layer;
        Clock::time_point queued;
    };

    // One round: start what has been signalled, raise the flags of what has finished. True if it did
    // anything.
    bool pumpOnce();
    void queue(ExpertSlot& slot, int slotIndex, std::uint64_t submission);
    void reap();
    void retire(int lane);
    void retireAt(std::size_t index);
    void recordFailure();

    const model::ModelConfig& config_;
    std::vector<model::LayerPlan> layers_;
    std::unique_ptr<model::QueuedRoutedExperts> experts_;
    std::vector<ExpertSlot*> slots_;
    std::atomic<int> deferred_{0};
    std::atomic<bool> skip_{false};
    std::vector<InFlight> inFlight_;
    Clock::time_point lastFinish_{};  // when the pool last finished a part
    std::exception_ptr failure_;
    std::vector<double> cpuSeconds_;
    std::vector<std::vector<bool>> held_;   // per layer: experts the placement keeps on the GPU
    std::vector<int> gpuFrom_;              // per layer: experts from here on are the GPU's this pass
    std::vector<std::vector<int>> masked_;  // per slot: its routing with the GPU's slots masked
    runtime::UsageCounter* usage_ = nullptr;
    std::vector<std::atomic<Clock::rep>> finishedAt_;  // per lane: when its part finished (0: not yet)
};

}  // namespace tandem::cuda
