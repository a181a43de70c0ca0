#include "cuda/expert_bridge.h"

#include <algorithm>
#include <cstring>
#include <immintrin.h>


namespace tandem::cuda {

ExpertBridge::ExpertBridge(const model::ModelConfig& config, std::unique_ptr<model::RoutedExperts> experts,
                           std::vector<ExpertSlot*> slots)
    : config_(config), experts_(std::move(experts)), slots_(std::move(slots)),
      cpuSeconds_(static_cast<std::size_t>(config.numLayers)), thread_([this] { threadLoop(); }) {}

ExpertBridge::~ExpertBridge() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void ExpertBridge::setActive(bool active) {
    {
        std::lock_guard lock(mutex_);
        active_ = active;
    }
    wake_.notify_all();
}

void ExpertBridge::submitFromHost(ExpertSlot& slot, int layer) {
    slot.control->layer = layer;
    std::atomic_thread_fence(std::memory_order_release);
    slot.control->ready = slot.control->ready + 1;
}

void ExpertBridge::waitFromHost(const ExpertSlot& slot, const ExpertSlot* previous) {
    const SlotControl& c = *slot.control;
    while (c.immediateDone < c.ready || (previous && previous->control->deferredDone < previous->control->ready))
        _mm_pause();
    std::atomic_thread_fence(std::memory_order_acquire);
}

std::vector<double> ExpertBridge::takeCpuSeconds() {
    std::lock_guard lock(mutex_);
    std::vector<double> s(cpuSeconds_.size(), 0.0);
    std::swap(s, cpuSeconds_);
    return s;
}

void ExpertBridge::rethrowFailure() {
    std::exception_ptr failure;
    {
        std::lock_guard lock(mutex_);
        std::swap(failure, failure_);
    }
    if (failure) std::rethrow_exception(failure);
}

bool ExpertBridge::canDefer(int layer) const { return layer + 1 < config_.numLayers && config_.isMoeLayer(layer + 1); }

void ExpertBridge::process(ExpertSlot& s, std::uint64_t submission) {
    std::atomic_thread_fence(std::memory_order_acquire);  // the slot's data was written before `ready`
    const int layer = s.control->layer;
    const int k = config_.router.topK;
    const int deferred = canDefer(layer) ? std::clamp(deferred_.load(), 0, k - 1) : 0;
    const auto tokens = static_cast<std::size_t>(s.tokens);
    const auto start = std::chrono::steady_clock::now();
    try {
        experts_->run(layer, s.x, tokens, s.ids, s.weights, k, 0, k - deferred, s.immediateOut);
    } catch (...) {
        // The GPU must never wait forever: record the failure, publish an (empty) result.
        std::lock_guard lock(mutex_);
        if (!failure_) failure_ = std::current_exception();
    }
    std::atomic_thread_fence(std::memory_order_release);
    s.control->immediateDone = submission;
    try {
        if (deferred > 0 && !skip_)
            experts_->run(layer, s.x, tokens, s.ids, s.weights, k, k - deferred, k, s.deferredOut);
        else
            std::memset(s.deferredOut, 0, tokens * static_cast<std::size_t>(config_.hiddenSize) * sizeof(float));
    } catch (...) {
        std::lock_guard lock(mutex_);
        if (!failure_) failure_ = std::current_exception();
    }
    std::atomic_thread_fence(std::memory_order_release);
    s.control->deferredDone = submission;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard lock(mutex_);
    cpuSeconds_[static_cast<std::size_t>(layer)] += seconds;
}

void ExpertBridge::threadLoop() {
    for (;;) {
        bool found = false;
        for (ExpertSlot* s : slots_) {
            const std::uint64_t submission = s->control->ready;
            if (submission > s->handled) {
                process(*s, submission);
                s->handled = submission;
                found = true;
            }
        }
        if (found) continue;
        std::unique_lock lock(mutex_);
        if (stopping_) return;
        if (active_) {
            lock.unlock();
            _mm_pause();
            continue;
        }
        wake_.wait(lock, [&] { return stopping_ || active_; });
    }
}

}  // namespace tandem::cuda
