#pragma once
// The CPU expert pool: persistent workers pinned to physical cores and grouped by NUMA node. A job
// runs on every participant at once (each learns its index and node), so one submission evaluates a
// whole MoE layer with spin barriers between its phases instead of one wake-up per phase.
//
// A pool of N threads has N-1 pinned workers; the Nth core is left to the thread that drives the
// pool. run() makes that calling thread the Nth participant (CPU-only inference: N threads on N cores,
// nobody spinning on a core someone else needs). submit() returns at once and the N-1 workers do the
// job while the caller does other things on its own core (the GPU path: launch the GPU's work, then
// wait() or done()). run() and submit() pin the calling thread to that Nth core, so it never shares a
// core with a spinning worker (which costs a scheduler time slice, hundreds of microseconds, per job).
// Jobs are taken in submission order from a small queue. Idle workers spin briefly (a decode step's
// next layer comes within microseconds), then sleep on a futex.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/pool/cpu_topology.h"

namespace tandem::cpu {

struct WorkerContext {
    int worker = 0;       // 0 .. threads-1
    int threads = 0;      // participants in this job
    int node = 0;         // index into the pool topology's nodes
    int nodeWorker = 0;   // 0 .. nodeThreads-1
    int nodeThreads = 0;  // participants of this node
};

class PoolJob {
public:
    virtual ~PoolJob() = default;
    // Called on every worker of the pool, concurrently. An exception is rethrown by wait().
    virtual void run(const WorkerContext& w) = 0;
    // Called once, by the last participant to finish, before done() reports the job finished (also
    // after a failure). Must not throw.
    virtual void finished() noexcept {}
};

struct PoolOptions {
    int threads = 0;                 // workers + the calling thread; <= 0: one per physical core
    int simulatedNodes = 0;          // > 1: pretend NUMA nodes (TANDEM_NUMA_SIM)
    bool pin = true;                 // pin each worker, and the caller, to its CPU
    std::chrono::microseconds spin{200};  // idle spinning before a worker sleeps

    // threads as given; simulatedNodes from TANDEM_NUMA_SIM.
    static PoolOptions fromEnvironment(int threads);
};

// All workers of a job meet here between phases. Spins, then sleeps if a phase runs long.
class SpinBarrier {
public:
    explicit SpinBarrier(int count = 1) : count_(count) {}
    void reset(int count) { count_ = count; }
    void arriveAndWait();

private:
    int count_;
    alignas(64) std::atomic<int> arrived_{0};
    alignas(64) std::atomic<std::uint32_t> generation_{0};
};

class ExpertPool {
public:
    explicit ExpertPool(const PoolOptions& options = {});
    ~ExpertPool();
    ExpertPool(const ExpertPool&) = delete;
    ExpertPool& operator=(const ExpertPool&) = delete;

    // Participants of run() (workers + caller).
    int threads() const { return static_cast<int>(workers_.size()) + 1; }
    int nodes() const { return static_cast<int>(topology_.nodes.size()); }
    // Participants of a job, in total and per node, when the caller joins (run) or not (submit).
    int participants(bool callerJoins) const { return threads() - (callerJoins ? 0 : 1); }
    int nodeParticipants(int node, bool callerJoins) const;
    // The planned CPUs: node 0's first CPU is the caller's, left unpinned.
    const CpuTopology& topology() const { return topology_; }
    bool pinned() const { return pinned_.load(); }

    using Ticket = std::uint64_t;
    // Queues `job` (which must outlive its completion) for the workers and returns at once. Blocks only
    // when kQueue jobs are unfinished. Throws tandem::Error for a pool without workers (threads 1) or
    // a NUMA node whose only thread is the caller.
    Ticket submit(PoolJob& job);
    bool done(Ticket t) const;
    // Returns when job t has finished on every worker; rethrows its exception.
    void wait(Ticket t);
    // Runs `job` on the workers and the calling thread; returns when all are done.
    void run(PoolJob& job);

    // Queues `job` for the workers and the calling thread, whose share runs when it calls
    // joinQueued(): the workers start at once, and go on to the next queued job as soon as they are
    // through with this one. done() / wait() as for submit(); wait() and run() from the caller join
    // its queued jobs first. Throws tandem::Error rather than queue past kQueue jobs of which the
    // oldest is not joined. The caller is one thread at a time.
    Ticket enqueueJoined(PoolJob& job);
    // Runs the caller's share of every job queued by enqueueJoined and not joined yet, in order.
    void joinQueued();

    // Idle workers spin for `d` from now (instead of their usual spin before sleeping), so a job that
    // follows a long gap (a decode step's first MoE layer, after the GPU's lm_head and the host's
    // sampling) starts in microseconds instead of paying a futex wake-up of every worker. The GPU path
    // renews it at the start and end of every forward pass; 0 ends it. Workers already asleep wake for
    // the next job and then stay awake.
    void keepAwakeFor(std::chrono::microseconds d);

    static constexpr int kQueue = 8;

private:
    struct Slot {
        PoolJob* job = nullptr;
        bool callerJoins = false;
        alignas(64) std::atomic<int> remaining{0};
        std::atomic<std::uint32_t> finished{0};  // low 32 bits of the last ticket finished here
        std::atomic<std::uint64_t> finishedTicket{0};
        std::mutex errorMutex;
        std::exception_ptr error;
    };

    Ticket enqueue(PoolJob& job, bool callerJoins);
    void stopWorkers();
    void pinCaller();
    void checkQueueRoom() const;
    void joinShare(Ticket t);
    void finish(Slot& slot, Ticket t);
    void workerLoop(int index, int cpu);

    CpuTopology topology_;
    std::vector<WorkerContext> joined_, alone_;  // contexts of participants with / without the caller
    std::chrono::microseconds spin_;
    bool pin_;
    std::vector<std::thread> workers_;
    Slot slots_[kQueue];
    std::mutex submitMutex_;
    std::uint64_t nextTicket_ = 1;
    alignas(64) std::atomic<std::uint32_t> published_{0};  // low 32 bits of the last ticket submitted
    std::atomic<std::uint64_t> publishedTicket_{0};
    std::atomic<bool> stopping_{false};
    std::atomic<std::int64_t> awakeUntil_{0};  // steady_clock nanoseconds
    std::vector<Ticket> toJoin_;                // the caller's: queued by enqueueJoined, not joined yet
    std::atomic<bool> pinned_{true};
};

// Dispatch latency of an empty job, submit to wait() returning, median of many: with the workers
// spinning (back-to-back jobs, as within a decode step) and with them asleep.
struct DispatchLatency {
    double spinningMicros = 0;
    double sleepingMicros = 0;
};
DispatchLatency measureDispatchLatency(ExpertPool& pool, int repetitions = 200);

}  // namespace tandem::cpu
