#include "cpu/pool/worker_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <immintrin.h>
#include <string>
#include <system_error>

#include "tandem/error.h"
#include "tandem/tuning.h"

namespace tandem::cpu {

namespace {

using Clock = std::chrono::steady_clock;

// Spins until ready() or `budget` has passed; true if ready.
template <class Ready>
bool spinUntil(Ready&& ready, std::chrono::microseconds budget) {
    const auto deadline = Clock::now() + budget;
    for (int i = 1;; ++i) {
        if (ready()) return true;
        _mm_pause();
        if ((i & 255) == 0 && Clock::now() >= deadline) return ready();
    }
}

constexpr std::chrono::microseconds kBarrierSpin{100};
constexpr std::chrono::microseconds kWaitSpin{50};

}  // namespace

PoolOptions PoolOptions::fromEnvironment(int threads) {
    PoolOptions o;
    o.threads = threads;
    o.simulatedNodes = tuning().simulatedNumaNodes;
    return o;
}

void SpinBarrier::arriveAndWait() {
    const std::uint32_t gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == count_ - 1) {
        arrived_.store(0, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
        generation_.notify_all();
        return;
    }
    auto passed = [&] { return generation_.load(std::memory_order_acquire) != gen; };
    if (spinUntil(passed, kBarrierSpin)) return;
    while (!passed()) generation_.wait(gen, std::memory_order_acquire);
}

ExpertPool::ExpertPool(const PoolOptions& options)
    : topology_(planTopology(options.threads, options.simulatedNodes)), spin_(options.spin), pin_(options.pin) {
    // Participant 0 of a joined job is the caller, on node 0; workers follow node by node.
    std::vector<std::pair<int, int>> workers;  // (node, cpu)
    for (std::size_t n = 0; n < topology_.nodes.size(); ++n)
        for (std::size_t i = (n == 0 ? 1 : 0); i < topology_.nodes[n].cpus.size(); ++i)
            workers.emplace_back(static_cast<int>(n), topology_.nodes[n].cpus[i]);
    auto contexts = [&](bool callerJoins) {
        std::vector<int> nodeNodes;
        if (callerJoins) nodeNodes.push_back(0);
        for (const auto& w : workers) nodeNodes.push_back(w.first);
        std::vector<WorkerContext> ctx(nodeNodes.size());
        std::vector<int> perNode(topology_.nodes.size(), 0);
        for (std::size_t i = 0; i < ctx.size(); ++i) {
            ctx[i].worker = static_cast<int>(i);
            ctx[i].threads = static_cast<int>(ctx.size());
            ctx[i].node = nodeNodes[i];
            ctx[i].nodeWorker = perNode[nodeNodes[i]]++;
        }
        for (auto& c : ctx) c.nodeThreads = perNode[c.node];
        return ctx;
    };
    joined_ = contexts(true);
    alone_ = contexts(false);
    toJoin_.reserve(kQueue);
    try {
        for (std::size_t i = 0; i < workers.size(); ++i)
            workers_.emplace_back([this, i, cpu = options.pin ? workers[i].second : -1] { workerLoop(static_cast<int>(i), cpu); });
    } catch (const std::system_error& e) {
        // The system refused a thread (limits, memory): stop the ones started and say so.
        stopWorkers();
        throw Error("cannot start " + std::to_string(workers.size() + 1) + " threads for the CPU experts (the system refused thread " +
                    std::to_string(workers_.size() + 1) + ": " + e.what() + "); choose fewer threads");
    }
}

void ExpertPool::stopWorkers() {
    stopping_.store(true);
    published_.fetch_add(1);
    published_.notify_all();
    for (auto& t : workers_) t.join();
}

ExpertPool::~ExpertPool() { stopWorkers(); }

int ExpertPool::nodeParticipants(int node, bool callerJoins) const {
    const auto& ctx = callerJoins ? joined_ : alone_;
    for (const auto& c : ctx)
        if (c.node == node) return c.nodeThreads;
    return 0;
}

ExpertPool::Ticket ExpertPool::enqueue(PoolJob& job, bool callerJoins) {
    std::lock_guard lock(submitMutex_);
    const Ticket t = nextTicket_++;
    Slot& slot = slots_[(t - 1) % kQueue];
    if (t > kQueue) {
        // The slot's previous job must be finished before its state is reused.
        const Ticket previous = t - kQueue;
        while (slot.finishedTicket.load(std::memory_order_acquire) < previous) {
            const std::uint32_t seen = slot.finished.load(std::memory_order_acquire);
            if (slot.finishedTicket.load(std::memory_order_acquire) >= previous) break;
            slot.finished.wait(seen);
        }
    }
    slot.job = &job;
    slot.callerJoins = callerJoins;
    slot.error = nullptr;
    slot.remaining.store(participants(callerJoins), std::memory_order_relaxed);
    publishedTicket_.store(t, std::memory_order_release);
    published_.store(static_cast<std::uint32_t>(t), std::memory_order_release);
    published_.notify_all();
    return t;
}

void ExpertPool::pinCaller() {
    thread_local const ExpertPool* pinnedFor = nullptr;
    if (!pin_ || pinnedFor == this) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(topology_.nodes[0].cpus[0], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) pinned_.store(false);
    pinnedFor = this;
}

// A new job would take the queue slot of the oldest job the caller has not joined yet: that job can
// only finish once the caller joins it, so queueing would wait forever.
void ExpertPool::checkQueueRoom() const {
    if (!toJoin_.empty() && nextTicket_ - toJoin_.front() >= static_cast<Ticket>(kQueue))
        throw Error("the expert pool's caller queued too many jobs without joining them");
}

ExpertPool::Ticket ExpertPool::submit(PoolJob& job) {
    pinCaller();
    checkQueueRoom();
    if (workers_.empty())
        throw Error("the expert pool has no worker threads to run a submission on; give it at least 2 threads");
    for (int n = 0; n < nodes(); ++n)
        if (nodeParticipants(n, false) == 0)
            throw Error("NUMA node " + std::to_string(n) + " of the expert pool has no worker thread besides the caller; "
                        "give the pool more threads or fewer (simulated) nodes");
    return enqueue(job, false);
}

void ExpertPool::run(PoolJob& job) {
    pinCaller();
    joinQueued();  // the workers are waiting for the caller in those
    const Ticket t = enqueue(job, true);
    joinShare(t);
    wait(t);
}

ExpertPool::Ticket ExpertPool::enqueueJoined(PoolJob& job) {
    pinCaller();
    checkQueueRoom();
    const Ticket t = enqueue(job, true);
    toJoin_.push_back(t);  // within the capacity reserved in the constructor: cannot throw
    return t;
}

void ExpertPool::joinQueued() {
    for (const Ticket t : toJoin_) joinShare(t);
    toJoin_.clear();
}

void ExpertPool::joinShare(Ticket t) {
    Slot& slot = slots_[(t - 1) % kQueue];
    try {
        slot.job->run(joined_[0]);
    } catch (...) {
        std::lock_guard lock(slot.errorMutex);
        if (!slot.error) slot.error = std::current_exception();
    }
    finish(slot, t);
}

void ExpertPool::finish(Slot& slot, Ticket t) {
    if (slot.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        slot.job->finished();
        slot.finishedTicket.store(t, std::memory_order_release);
        slot.finished.store(static_cast<std::uint32_t>(t), std::memory_order_release);
        slot.finished.notify_all();
    }
}

void ExpertPool::keepAwakeFor(std::chrono::microseconds d) {
    awakeUntil_.store((Clock::now() + d).time_since_epoch().count(), std::memory_order_relaxed);
}

bool ExpertPool::done(Ticket t) const {
    return slots_[(t - 1) % kQueue].finishedTicket.load(std::memory_order_acquire) >= t;
}

void ExpertPool::wait(Ticket t) {
    // Waiting for a job the caller has queued but not joined would wait forever: join first.
    if (!toJoin_.empty() && t >= toJoin_.front()) joinQueued();
    Slot& slot = slots_[(t - 1) % kQueue];
    auto finished = [&] { return slot.finishedTicket.load(std::memory_order_acquire) >= t; };
    if (!spinUntil(finished, kWaitSpin))
        while (!finished()) {
            const std::uint32_t seen = slot.finished.load(std::memory_order_acquire);
            if (finished()) break;
            slot.finished.wait(seen);
        }
    // The slot still holds this job's error unless kQueue later jobs have been submitted since.
    if (slot.finishedTicket.load(std::memory_order_acquire) == t && slot.error) {
        std::exception_ptr e;
        {
            std::lock_guard lock(slot.errorMutex);
            std::swap(e, slot.error);
        }
        if (e) std::rethrow_exception(e);
    }
}

void ExpertPool::workerLoop(int index, int cpu) {
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) pinned_.store(false);
    }
    const std::string name = "tandem-expert" + std::to_string(index);
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());

    Ticket next = 1;
    for (;;) {
        auto available = [&] { return publishedTicket_.load(std::memory_order_acquire) >= next || stopping_.load(); };
        bool ready = spinUntil(available, spin_);
        while (!ready && Clock::now().time_since_epoch().count() < awakeUntil_.load(std::memory_order_relaxed))
            ready = spinUntil(available, spin_);
        if (!ready)
            while (!available()) {
                const std::uint32_t seen = published_.load(std::memory_order_acquire);
                if (available()) break;
                published_.wait(seen, std::memory_order_acquire);
            }
        if (stopping_.load()) return;
        Slot& slot = slots_[(next - 1) % kQueue];
        try {
            slot.job->run(slot.callerJoins ? joined_[index + 1] : alone_[index]);
        } catch (...) {
            std::lock_guard lock(slot.errorMutex);
            if (!slot.error) slot.error = std::current_exception();
        }
        finish(slot, next);
        ++next;
    }
}

DispatchLatency measureDispatchLatency(ExpertPool& pool, int repetitions) {
    struct Empty : PoolJob {
        void run(const WorkerContext&) override {}
    } job;
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    auto once = [&] {
        const auto t0 = Clock::now();
        pool.run(job);
        return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
    for (int i = 0; i < 10; ++i) once();
    std::vector<double> spinning, sleeping;
    for (int i = 0; i < repetitions; ++i) spinning.push_back(once());
    for (int i = 0; i < std::max(5, repetitions / 20); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));  // past the workers' spin
        sleeping.push_back(once());
    }
    return {median(spinning), median(sleeping)};
}

}  // namespace tandem::cpu
