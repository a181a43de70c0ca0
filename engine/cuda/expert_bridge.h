#pragma once
// The CPU side of a hybrid MoE layer. The GPU copies a layer's normalized hidden states and routing
// into a pinned slot and, from a host node of the stream (or graph), submits the slot here; a worker
// thread computes the routed experts with the CPU pool while the GPU runs the shared experts; a second
// host node waits for the result. With Expert Deferral a slot's experts are split: the immediate part
// is waited for at its own layer, the deferred part at the next layer, so it overlaps that layer's
// attention on the GPU.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/thread_pool.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem::cuda {

struct ExpertSlot {
    // Filled by the GPU before submit; outputs filled by the CPU.
    float* x = nullptr;        // [tokens, hidden] pinned
    int* ids = nullptr;        // [tokens, topK] pinned
    float* weights = nullptr;  // [tokens, topK] pinned
    float* immediateOut = nullptr;
    float* deferredOut = nullptr;
    int tokens = 0;            // rows this slot is used with (set by the host before the GPU runs)
    int layer = 0;             // set by the submit host node
    int deferred = 0;          // experts deferred for this submission
    std::atomic<std::uint64_t> immediateDone{0}, deferredDone{0};
    std::atomic<std::uint64_t> submitted{0};
};

class ExpertBridge {
public:
    ExpertBridge(const model::ModelConfig& config, const model::ModelWeights& weights, cpu::ThreadPool& pool);
    ~ExpertBridge();
    ExpertBridge(const ExpertBridge&) = delete;
    ExpertBridge& operator=(const ExpertBridge&) = delete;

    // The deferral the next submissions use (read when a submit host node runs).
    void setDeferral(int deferred, bool skip) {
        deferred_ = deferred;
        skip_ = skip;
    }

    // Called from host nodes. `canDefer`: the layer is followed by a MoE layer that will wait.
    void submit(ExpertSlot& slot, int layer, bool canDefer);
    // Waits for the slot's immediate part and, if given, the previous layer's deferred part.
    void wait(ExpertSlot& slot, ExpertSlot* previous);

    // Timings per layer, summed since the last take: GPU work before each submit (since the previous
    // wait, or the step's start), CPU compute, GPU waiting. beginStep marks a step's start.
    struct Timing {
        double gpu = 0, cpu = 0, wait = 0;
    };
    void beginStep();
    std::vector<Timing> takeTimings();

    // The first CPU failure since the last call, rethrown on the calling (engine) thread.
    void rethrowFailure();

private:
    struct Job {
        ExpertSlot* slot;
        bool deferredPart;
    };
    void workerLoop();
    void run(const Job& job);
    static void waitFor(const std::atomic<std::uint64_t>& done, std::uint64_t target, std::mutex& m,
                        std::condition_variable& cv);

    const model::ModelConfig& config_;
    const model::ModelWeights& weights_;
    cpu::ThreadPool& pool_;
    std::atomic<int> deferred_{0};
    std::atomic<bool> skip_{false};

    std::mutex mutex_;
    std::condition_variable queued_, finished_;
    std::deque<Job> jobs_;
    bool stopping_ = false;
    std::exception_ptr failure_;
    std::vector<Timing> timings_;
    std::chrono::steady_clock::time_point lastMark_;
    std::thread worker_;
};

}  // namespace tandem::cuda
