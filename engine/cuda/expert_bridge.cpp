#include "cuda/expert_bridge.h"

#include <algorithm>
#include <cstring>

#include "model/feed_forward.h"

namespace tandem::cuda {

namespace {

double secondsBetween(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

}  // namespace

ExpertBridge::ExpertBridge(const model::ModelConfig& config, const model::ModelWeights& weights, cpu::ThreadPool& pool)
    : config_(config), weights_(weights), pool_(pool), timings_(static_cast<std::size_t>(config.numLayers)),
      worker_([this] { workerLoop(); }) {}

void ExpertBridge::beginStep() { lastMark_ = std::chrono::steady_clock::now(); }

std::vector<ExpertBridge::Timing> ExpertBridge::takeTimings() {
    std::lock_guard lock(mutex_);
    std::vector<Timing> t(timings_.size());
    std::swap(t, timings_);
    return t;
}

ExpertBridge::~ExpertBridge() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    queued_.notify_all();
    worker_.join();
}

void ExpertBridge::submit(ExpertSlot& slot, int layer, bool canDefer) {
    const int k = config_.router.topK;
    const auto now = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(mutex_);
        timings_[static_cast<std::size_t>(layer)].gpu += secondsBetween(lastMark_, now);
    }
    slot.layer = layer;
    slot.deferred = canDefer ? std::clamp(deferred_.load(), 0, k - 1) : 0;
    ++slot.submitted;
    {
        std::lock_guard lock(mutex_);
        jobs_.push_back({&slot, false});
        jobs_.push_back({&slot, true});
    }
    queued_.notify_one();
}

void ExpertBridge::waitFor(const std::atomic<std::uint64_t>& done, std::uint64_t target, std::mutex& m,
                           std::condition_variable& cv) {
    // A decode step's CPU work takes tens of microseconds to milliseconds: spin briefly first so a
    // quick result is not delayed by a sleep and wake-up.
    for (int i = 0; i < 20000; ++i)
        if (done.load(std::memory_order_acquire) >= target) return;
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done.load(std::memory_order_acquire) >= target; });
}

void ExpertBridge::wait(ExpertSlot& slot, ExpertSlot* previous) {
    const auto t0 = std::chrono::steady_clock::now();
    waitFor(slot.immediateDone, slot.submitted.load(), mutex_, finished_);
    if (previous) waitFor(previous->deferredDone, previous->submitted.load(), mutex_, finished_);
    lastMark_ = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    timings_[static_cast<std::size_t>(slot.layer)].wait += secondsBetween(t0, lastMark_);
}

void ExpertBridge::rethrowFailure() {
    std::exception_ptr failure;
    {
        std::lock_guard lock(mutex_);
        std::swap(failure, failure_);
    }
    if (failure) std::rethrow_exception(failure);
}

void ExpertBridge::run(const Job& job) {
    ExpertSlot& s = *job.slot;
    const int k = config_.router.topK;
    const auto& moe = *weights_.layers[static_cast<std::size_t>(s.layer)].moe;
    const std::size_t n = static_cast<std::size_t>(s.tokens) * static_cast<std::size_t>(config_.hiddenSize);
    if (!job.deferredPart) {
        model::routedExperts(moe, s.x, static_cast<std::size_t>(s.tokens), s.ids, s.weights, k, 0, k - s.deferred,
                             s.immediateOut, pool_);
    } else if (s.deferred > 0 && !skip_) {
        model::routedExperts(moe, s.x, static_cast<std::size_t>(s.tokens), s.ids, s.weights, k, k - s.deferred, k,
                             s.deferredOut, pool_);
    } else {
        std::memset(s.deferredOut, 0, n * sizeof(float));
    }
}

void ExpertBridge::workerLoop() {
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            queued_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
            if (stopping_) return;
            job = jobs_.front();
            jobs_.pop_front();
        }
        try {
            const auto t0 = std::chrono::steady_clock::now();
            run(job);
            const double seconds = secondsBetween(t0, std::chrono::steady_clock::now());
            std::lock_guard lock(mutex_);
            timings_[static_cast<std::size_t>(job.slot->layer)].cpu += seconds;
        } catch (...) {
            // The GPU must never wait forever: record the failure, publish an (empty) result.
            std::lock_guard lock(mutex_);
            if (!failure_) failure_ = std::current_exception();
        }
        auto& done = job.deferredPart ? job.slot->deferredDone : job.slot->immediateDone;
        {
            std::lock_guard lock(mutex_);
            done.store(job.slot->submitted.load(), std::memory_order_release);
        }
        finished_.notify_all();
    }
}

}  // namespace tandem::cuda
