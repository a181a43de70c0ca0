#pragma once
// The CPU side of a hybrid MoE layer. The GPU copies a layer's normalized hidden states and routing
// into a pinned slot and signals it; a bridge thread sees the signal, computes the routed experts with
// the CPU pool while the GPU runs the shared experts, and flags the result, which the GPU waits for.
// With Expert Deferral a submission is split: the immediate part (the k-d heaviest experts) is flagged
// first and waited for at its own layer; the deferred part is flagged next and waited for at the next
// MoE layer, so it overlaps that layer's attention on the GPU.
//
// Signals travel through a SlotControl in host memory mapped into the GPU. Two ways to drive them,
// chosen per runner (TANDEM_GPU_WAIT, measured in docs/BENCHMARKS.md):
//   spin  GPU kernels write `ready` and spin on the done flags (no CUDA driver involvement);
//   host  host nodes of the stream/graph do the same on the CPU (cudaLaunchHostFunc).
// The bridge thread is the same for both: it spins on `ready` while a forward pass is active.
//
// How the bridge thread drives the CPU pool (TANDEM_BRIDGE, measured in docs/BENCHMARKS.md):
//   queued  (default) each part is queued on the pool as soon as it is known and the thread only
//           watches for completions and raises the flags: the workers go from a layer's immediate part
//           to its deferred part to the next layer's immediate part with no hand-back in between;
//   inline  the thread runs each part itself with the workers, one after the other.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/slot_control.h"
#include "model/config.h"
#include "model/routed_experts.h"

namespace tandem::cuda {

struct ExpertSlot {
    float* x = nullptr;        // [tokens, hidden] pinned, written by the GPU
    int* ids = nullptr;        // [tokens, topK]
    float* weights = nullptr;  // [tokens, topK]
    float* immediateOut = nullptr;
    float* deferredOut = nullptr;
    SlotControl* control = nullptr;
    int tokens = 0;            // rows of the current forward pass (set by the host before it runs)
    std::uint64_t handled = 0; // bridge thread only
};

class ExpertBridge {
public:
    ExpertBridge(const model::ModelConfig& config, std::unique_ptr<model::RoutedExperts> experts,
                 std::vector<ExpertSlot*> slots);
    ~ExpertBridge();
    ExpertBridge(const ExpertBridge&) = delete;
    ExpertBridge& operator=(const ExpertBridge&) = delete;

    // The deferral the next submissions use.
    void setDeferral(int deferred, bool skip) {
        deferred_ = deferred;
        skip_ = skip;
    }

    // While active, and for kLinger after, the bridge thread spins on the slots (and keeps the CPU
    // pool's workers spinning) instead of sleeping.
    void setActive(bool active);
    static constexpr std::chrono::milliseconds kLinger{20};

    // Host mode: what the host nodes do.
    static void submitFromHost(ExpertSlot& slot, int layer);
    static void waitFromHost(const ExpertSlot& slot, const ExpertSlot* previous);

    // CPU seconds per layer since the last call.
    std::vector<double> takeCpuSeconds();
    // The first CPU failure since the last call, rethrown on the calling (engine) thread.
    void rethrowFailure();

    enum class Mode { Queued, Inline };
    static Mode modeFromEnvironment();

private:
    using Clock = std::chrono::steady_clock;
    struct InFlight {
        ExpertSlot* slot;
        std::uint64_t submission;
        int layer;
        int lane;
        bool immediate;  // else the deferred part
        Clock::time_point queued;
    };

    void threadLoop();
    void process(ExpertSlot& slot, std::uint64_t submission);
    void queue(ExpertSlot& slot, int slotIndex, std::uint64_t submission);
    void reap();
    void recordFailure();
    void book(int layer, double seconds);
    bool canDefer(int layer) const;

    const model::ModelConfig& config_;
    std::unique_ptr<model::RoutedExperts> experts_;
    std::vector<ExpertSlot*> slots_;
    std::atomic<int> deferred_{0};
    std::atomic<bool> skip_{false};
    const Mode mode_;
    std::vector<InFlight> inFlight_;  // bridge thread only
    Clock::time_point lastFinish_{};  // bridge thread only: when the pool last finished a part

    std::mutex mutex_;
    std::condition_variable wake_;
    bool active_ = false;
    Clock::time_point idleSince_{};
    bool poolAwake_ = false;  // bridge thread only: it holds the pool awake
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::vector<double> cpuSeconds_;
    std::thread thread_;
};

}  // namespace tandem::cuda
