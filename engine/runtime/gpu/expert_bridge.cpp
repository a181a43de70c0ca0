#include "runtime/gpu/expert_bridge.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <string>

#include "cpu/moe/moe_layer.h"

namespace tandem::cuda {

ExpertBridge::ExpertBridge(const model::ModelConfig& config, std::vector<model::LayerPlan> layers,
                           std::unique_ptr<model::QueuedRoutedExperts> experts, std::vector<ExpertSlot*> slots)
    : config_(config), layers_(std::move(layers)), experts_(std::move(experts)), slots_(std::move(slots)),
      cpuSeconds_(static_cast<std::size_t>(config.numLayers)),
      gpuFrom_(static_cast<std::size_t>(config.numLayers), config.numExperts), masked_(slots_.size()),
      finishedAt_(2 * slots_.size()) {
    inFlight_.reserve(2 * slots_.size());  // two parts per slot at most: pushing never allocates
}

ExpertBridge::~ExpertBridge() {
    while (!inFlight_.empty()) retireAt(0);  // its failure, if any, has nobody left to go to
    experts_->keepAwakeFor(std::chrono::microseconds(0));
}

ExpertBridge::ServeMeanwhile::ServeMeanwhile(ExpertBridge& bridge)
    : thread_([this, &bridge] { bridge.pumpUntil([this] { return stop_.load(std::memory_order_relaxed); }, Idle::Yield); }) {}

ExpertBridge::ServeMeanwhile::~ServeMeanwhile() {
    stop_ = true;
    thread_.join();
}

void ExpertBridge::pumpUntil(const std::function<bool()>& finished, Idle idle) {
    experts_->keepAwakeFor(kLinger);
    for (;;) {
        if (pumpOnce()) continue;
        if (finished()) break;
        if (idle == Idle::Yield)
            std::this_thread::yield();
        else
            _mm_pause();
    }
    experts_->keepAwakeFor(kLinger);
}

void ExpertBridge::pumpAllUntil(const std::vector<ExpertBridge*>& bridges, const std::function<bool()>& finished) {
    for (ExpertBridge* b : bridges) b->experts_->keepAwakeFor(kLinger);
    for (;;) {
        bool any = false;
        for (ExpertBridge* b : bridges) any |= b->pumpOnce();
        if (any) continue;
        if (finished()) break;
        _mm_pause();
    }
    for (ExpertBridge* b : bridges) b->experts_->keepAwakeFor(kLinger);
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

void ExpertBridge::computeOnGpu(std::vector<std::vector<bool>> held) {
    for (auto& row : held)
        if (std::none_of(row.begin(), row.end(), [](bool b) { return b; })) row.clear();  // nothing to mask
    held_ = std::move(held);
}

void ExpertBridge::setGpuFrom(int layer, int first) { gpuFrom_[static_cast<std::size_t>(layer)] = first; }

std::vector<double> ExpertBridge::takeCpuSeconds() {
    std::vector<double> s(cpuSeconds_.size(), 0.0);
    std::swap(s, cpuSeconds_);
    return s;
}

void ExpertBridge::rethrowFailure() {
    std::exception_ptr failure;
    std::swap(failure, failure_);
    if (failure) std::rethrow_exception(failure);
}


void ExpertBridge::recordFailure() {
    if (!failure_) failure_ = std::current_exception();
}

// Queues the submission's parts on lanes 2·slot (immediate) and 2·slot + 1 (deferred), then runs this
// thread's share of them. Each part raises its flag the moment it is done, from whichever thread
// finishes it last. A slot is signalled again only after the GPU has seen both of its flags; its lanes
// are retired (waited for, their time booked) before they are used again.
void ExpertBridge::queue(ExpertSlot& s, int slotIndex, std::uint64_t submission) {
    std::atomic_thread_fence(std::memory_order_acquire);  // the slot's data was written before `ready`
    const int layer = s.control->layer;
    const int k = config_.router.topK;
    const int deferred =
        model::deferredExperts(layers_[static_cast<std::size_t>(layer)], k, deferred_.load(std::memory_order_relaxed));
    const bool runDeferred = deferred > 0 && !skip_.load(std::memory_order_relaxed);
    const auto tokens = static_cast<std::size_t>(s.tokens);
    const int lane = 2 * slotIndex;
    if (usage_) usage_->add(layer, s.ids, tokens * static_cast<std::size_t>(k));
    // The GPU's experts of a split or streamed layer are no work here.
    const int* ids = s.ids;
    const auto l = static_cast<std::size_t>(layer);
    const bool held = l < held_.size() && !held_[l].empty();
    const int gpuFrom = gpuFrom_[l];
    if (held || gpuFrom < config_.numExperts) {
        std::vector<int>& m = masked_[static_cast<std::size_t>(slotIndex)];
        m.assign(s.ids, s.ids + tokens * static_cast<std::size_t>(k));
        for (int& e : m)
            if (e >= gpuFrom || (held && e >= 0 && static_cast<std::size_t>(e) < held_[l].size() && held_[l][static_cast<std::size_t>(e)]))
                e = cpu::kComputedElsewhere;
        ids = m.data();
    }
    // The hook of a part: note when it finished (for the profile), then raise its flag.
    auto raise = [submission](volatile std::uint64_t* flag, std::atomic<Clock::rep>* finishedAt) {
        return [flag, submission, finishedAt] {
            if (finishedAt) finishedAt->store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_release);
            *flag = submission;
        };
    };
    auto start = [&](int part, int first, int last, float* out, volatile std::uint64_t* flag) {
        retire(part);
        std::atomic<Clock::rep>& finishedAt = finishedAt_[static_cast<std::size_t>(part)];
        finishedAt.store(0, std::memory_order_relaxed);
        const auto queued = Clock::now();
        try {
            experts_->submit(part, layer, s.x, tokens, ids, s.weights, k, first, last, out, raise(flag, &finishedAt));
        } catch (...) {
            recordFailure();  // the GPU must never wait forever: publish an (empty) result
            raise(flag, nullptr)();
            return;
        }
        inFlight_.push_back({part, layer, queued});  // within the reserved capacity
    };
    start(lane, 0, k - deferred, s.immediateOut, &s.control->immediateDone);
    if (runDeferred) {
        start(lane + 1, k - deferred, k, s.deferredOut, &s.control->deferredDone);
    } else {
        if (s.deferredRead) std::memset(s.deferredOut, 0, tokens * static_cast<std::size_t>(config_.hiddenSize) * sizeof(float));
        raise(&s.control->deferredDone, nullptr)();
    }
    try {
        experts_->joinQueued();
    } catch (...) {
        recordFailure();
    }
}

// Books a finished part's CPU time, from when it was queued (or from the previous part's end if the
// pool was still busy then) to when its last thread finished; rethrows nothing: a failure is kept for
// the engine thread.
void ExpertBridge::retireAt(std::size_t i) {
    const InFlight f = inFlight_[i];
    inFlight_.erase(inFlight_.begin() + static_cast<std::ptrdiff_t>(i));
    try {
        experts_->wait(f.lane);
    } catch (...) {
        recordFailure();
    }
    const Clock::rep at = finishedAt_[static_cast<std::size_t>(f.lane)].load(std::memory_order_relaxed);
    const Clock::time_point end = at ? Clock::time_point(Clock::duration(at)) : Clock::now();
    const Clock::time_point begin = std::max(f.queued, lastFinish_);
    if (end > begin) cpuSeconds_[static_cast<std::size_t>(f.layer)] += std::chrono::duration<double>(end - begin).count();
    lastFinish_ = std::max(lastFinish_, end);
}

void ExpertBridge::retire(int lane) {
    for (std::size_t i = 0; i < inFlight_.size(); ++i)
        if (inFlight_[i].lane == lane) return retireAt(i);
}

void ExpertBridge::reap() {
    for (std::size_t i = 0; i < inFlight_.size();)
        if (experts_->done(inFlight_[i].lane))
            retireAt(i);
        else
            ++i;
}

bool ExpertBridge::pumpOnce() {
    bool any = false;
    reap();
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        ExpertSlot* s = slots_[i];
        const std::uint64_t submission = s->control->ready;
        if (submission > s->handled) {
            queue(*s, static_cast<int>(i), submission);
            s->handled = submission;
            any = true;
        }
    }
    return any;
}

}  // namespace tandem::cuda
