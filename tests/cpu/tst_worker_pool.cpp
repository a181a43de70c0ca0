// The expert pool: every participant runs each job once with the right context, asynchronous
// submission (submit, poll, wait), ordering, errors, the phase barrier, the CPU plan and NUMA
// simulation. Dispatch latency is measured and printed, never asserted.
#include <QDir>
#include <QFile>
#include <QTest>
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <set>

#include <sched.h>

#include "cpu/pool/worker_pool.h"
#include "tandem/error.h"
#include "tandem/tuning.h"

using namespace tandem::cpu;

namespace {

class RecordJob : public PoolJob {
public:
    void run(const WorkerContext& w) override {
        std::lock_guard lock(mutex);
        seen.push_back(w);
    }
    std::mutex mutex;
    std::vector<WorkerContext> seen;
};

}  // namespace

class TestWorkerPool : public QObject {
    Q_OBJECT

private slots:
    void everyParticipantRunsOnce() {
        for (const int threads : {1, 2, 3}) {
            ExpertPool pool({.threads = threads});
            QCOMPARE(pool.threads(), threads);
            RecordJob job;
            pool.run(job);
            QCOMPARE(static_cast<int>(job.seen.size()), threads);
            std::set<int> workers;
            for (const auto& w : job.seen) {
                workers.insert(w.worker);
                QCOMPARE(w.threads, threads);
                QVERIFY(w.nodeWorker < w.nodeThreads);
            }
            QCOMPARE(static_cast<int>(workers.size()), threads);
        }
    }

    // keepAwakeFor: the workers spin (state R in /proc) instead of sleeping on a futex (state S) past
    // their spin time, still run jobs, sleep again when it ends, and the pool still shuts down while
    // they are kept awake.
    void keptAwakeWorkersSpin() {
        auto workerStates = [] {
            QString states;
            const QDir tasks("/proc/self/task");
            for (const QString& tid : tasks.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
                QFile comm(tasks.filePath(tid + "/comm")), stat(tasks.filePath(tid + "/stat"));
                if (!comm.open(QIODevice::ReadOnly) || !comm.readAll().startsWith("tandem-expert")) continue;
                if (!stat.open(QIODevice::ReadOnly)) continue;
                const QByteArray line = stat.readAll();
                states += QChar(line.at(line.lastIndexOf(')') + 2));  // the field after "(comm)"
            }
            return states;
        };
        ExpertPool pool({.threads = 2, .spin = std::chrono::microseconds(1)});
        RecordJob first;
        pool.run(first);
        QTRY_COMPARE(workerStates(), QString("S"));  // past 1 µs of spinning: asleep
        pool.keepAwakeFor(std::chrono::hours(1));
        RecordJob second;
        pool.run(second);  // wakes the worker, which now stays awake
        QCOMPARE(static_cast<int>(second.seen.size()), 2);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        QCOMPARE(workerStates(), QString("R"));
        pool.keepAwakeFor(std::chrono::microseconds(0));
        QTRY_COMPARE(workerStates(), QString("S"));
        pool.keepAwakeFor(std::chrono::hours(1));  // while the pool is destroyed: must not hang
    }

    // enqueueJoined: the workers start at once, the caller's share runs in joinQueued, and each job's
    // finished() hook runs once, after every participant is through, before done() says so.
    void joinedJobsRunTheirHookOnce() {
        ExpertPool pool({.threads = 3});
        struct Counting : PoolJob {
            void run(const WorkerContext& w) override {
                ++ran;
                if (w.worker == 0) callerRan = true;
            }
            void finished() noexcept override {
                hookSawAll = ran.load() == 3;
                ++hooks;
            }
            std::atomic<int> ran{0}, hooks{0};
            std::atomic<bool> callerRan{false}, hookSawAll{false};
        } a, b;
        const auto ta = pool.enqueueJoined(a);
        const auto tb = pool.enqueueJoined(b);
        QTRY_COMPARE(b.ran.load(), 2);  // both workers went through both jobs without the caller
        QVERIFY(!pool.done(ta) && !pool.done(tb));
        QCOMPARE(a.hooks.load(), 0);
        pool.joinQueued();
        pool.wait(ta);
        pool.wait(tb);
        for (Counting* j : {&a, &b}) {
            QVERIFY(j->callerRan.load());
            QCOMPARE(j->hooks.load(), 1);
            QVERIFY(j->hookSawAll.load());
        }
        pool.joinQueued();  // nothing left: a no-op

        // Queueing past the queue's length without joining throws instead of waiting forever; wait()
        // and run() from the caller join what it has queued first.
        std::vector<std::unique_ptr<Counting>> many;
        std::vector<ExpertPool::Ticket> tickets;
        QVERIFY_THROWS_EXCEPTION(tandem::Error, {
            for (int i = 0; i < ExpertPool::kQueue + 1; ++i)
                tickets.push_back(pool.enqueueJoined(*many.emplace_back(std::make_unique<Counting>())));
        });
        QCOMPARE(static_cast<int>(tickets.size()), ExpertPool::kQueue);
        pool.wait(tickets.back());
        for (const auto t : tickets) pool.wait(t);
        for (const auto& j : many)
            if (j->ran.load()) QCOMPARE(j->hooks.load(), 1);
        Counting queued, direct;
        const auto tq = pool.enqueueJoined(queued);
        pool.run(direct);
        QVERIFY(pool.done(tq));
        QCOMPARE(queued.hooks.load(), 1);
        QCOMPARE(direct.hooks.load(), 1);
    }

    void submitReturnsAtOnceAndWaits() {
        ExpertPool pool({.threads = 3});
        struct Gate : PoolJob {
            void run(const WorkerContext&) override {
                ++started;
                while (!open.load()) std::this_thread::yield();
                ++finished;
            }
            std::atomic<bool> open{false};
            std::atomic<int> started{0}, finished{0};
        } job;
        const auto t = pool.submit(job);  // the caller does not take part: two workers do
        QVERIFY(!pool.done(t));
        QTRY_COMPARE(job.started.load(), 2);
        QVERIFY(!pool.done(t));
        job.open = true;
        pool.wait(t);
        QVERIFY(pool.done(t));
        QCOMPARE(job.finished.load(), 2);
    }

    void queuedJobsRunInOrder() {
        ExpertPool pool({.threads = 2});
        std::mutex m;
        std::vector<int> order;
        struct Append : PoolJob {
            void run(const WorkerContext& w) override {
                if (w.worker != 0) return;
                std::lock_guard lock(*m);
                order->push_back(id);
            }
            int id = 0;
            std::mutex* m = nullptr;
            std::vector<int>* order = nullptr;
        };
        std::vector<Append> jobs(20);
        std::vector<ExpertPool::Ticket> tickets;
        for (int i = 0; i < 20; ++i) {
            jobs[i].id = i;
            jobs[i].m = &m;
            jobs[i].order = &order;
            tickets.push_back(pool.submit(jobs[i]));  // more than the queue holds: submit waits for room
        }
        pool.wait(tickets.back());
        for (const auto t : tickets) QVERIFY(pool.done(t));
        std::vector<int> expected(20);
        for (int i = 0; i < 20; ++i) expected[i] = i;
        QCOMPARE(order, expected);
    }

    void jobErrorsReachTheWaiter() {
        ExpertPool pool({.threads = 2});
        struct Throw : PoolJob {
            void run(const WorkerContext& w) override {
                if (w.worker == 1) throw tandem::Error("boom");
            }
        } bad;
        QVERIFY_THROWS_EXCEPTION(tandem::Error, pool.run(bad));
        RecordJob good;
        pool.run(good);  // the pool carries on
        QCOMPARE(static_cast<int>(good.seen.size()), 2);
    }

    void barrierSeparatesPhases() {
        ExpertPool pool({.threads = 3});
        struct Phases : PoolJob {
            void run(const WorkerContext& w) override {
                for (int phase = 1; phase <= 20; ++phase) {
                    count.fetch_add(1);
                    barrier.arriveAndWait();
                    if (count.load() < phase * w.threads) bad = true;  // someone passed the barrier early
                    barrier.arriveAndWait();
                }
            }
            SpinBarrier barrier;
            std::atomic<int> count{0};
            std::atomic<bool> bad{false};
        } job;
        for (int rep = 0; rep < 20; ++rep) {
            job.count = 0;
            job.barrier.reset(pool.threads());
            pool.run(job);
            QVERIFY(!job.bad);
            QCOMPARE(job.count.load(), 20 * pool.threads());
        }
    }

    void aPoolWithoutWorkersRunsOnTheCaller() {
        ExpertPool pool({.threads = 1});
        RecordJob job;
        pool.run(job);
        QCOMPARE(static_cast<int>(job.seen.size()), 1);
        QVERIFY_THROWS_EXCEPTION(tandem::Error, pool.submit(job));
    }

    void dispatchLatencyIsMeasured() {
        ExpertPool pool;
        const DispatchLatency d = measureDispatchLatency(pool, 100);
        qInfo("dispatch of an empty job on %d threads: %.1f us with workers spinning, %.1f us from sleep (target < 5 us spinning)",
              pool.threads(), d.spinningMicros, d.sleepingMicros);
        QVERIFY(d.spinningMicros > 0 && d.sleepingMicros > 0);
    }

    void cpuPlan() {
        const CpuTopology all = planTopology(0, 0);
        QVERIFY(all.physicalCores >= 1);
        QCOMPARE(all.threads(), all.physicalCores);
        std::set<int> cpus;
        for (const auto& n : all.nodes) cpus.insert(n.cpus.begin(), n.cpus.end());
        QCOMPARE(static_cast<int>(cpus.size()), all.threads());  // one CPU per physical core, none twice
        QCOMPARE(planTopology(5, 0).threads(), 5);               // more threads than cores share them
    }

    // A pool pins its caller to one CPU; a pool planned later on that thread (the app loading the model
    // it switches to) still gets every CPU the process has.
    void aPinnedCallerStillPlansEveryCpu() {
        const int before = planTopology(0, 0).threads();
        cpu_set_t saved;
        QCOMPARE(sched_getaffinity(0, sizeof saved, &saved), 0);
        {
            ExpertPool pool({.threads = 0});
            RecordJob job;
            pool.run(job);  // pins this thread
        }
        cpu_set_t now;
        QCOMPARE(sched_getaffinity(0, sizeof now, &now), 0);
        const bool pinned = CPU_COUNT(&now) < CPU_COUNT(&saved);
        QCOMPARE(planTopology(0, 0).threads(), before);
        ExpertPool again({.threads = 0});
        QCOMPARE(again.threads(), before);
        QVERIFY(sched_setaffinity(0, sizeof saved, &saved) == 0);
        if (!pinned) qInfo("this machine's pool did not pin its caller (one CPU, or pinning refused)");
    }

    void numaSimulationSplitsNodes() {
        const CpuTopology sim = planTopology(4, 2);
        QCOMPARE(static_cast<int>(sim.nodes.size()), 2);
        QCOMPARE(sim.simulatedNodes, 2);
        QCOMPARE(sim.nodes[0].cpus.size(), std::size_t{2});
        QCOMPARE(sim.nodes[1].cpus.size(), std::size_t{2});
        QVERIFY_THROWS_EXCEPTION(tandem::Error, planTopology(1, 2));

        ExpertPool pool({.threads = 4, .simulatedNodes = 2});
        QCOMPARE(pool.nodes(), 2);
        RecordJob job;
        pool.run(job);
        int perNode[2] = {};
        for (const auto& w : job.seen) ++perNode[w.node];
        QCOMPARE(perNode[0], 2);
        QCOMPARE(perNode[1], 2);
        QCOMPARE(pool.nodeParticipants(0, false), 1);  // without the caller
        QCOMPARE(pool.nodeParticipants(1, false), 2);
    }

    void numaSimulationFromTheEnvironment() {
        qputenv("TANDEM_NUMA_SIM", "3");
        QCOMPARE(tandem::Tuning::fromEnvironment().simulatedNumaNodes, 3);
        qputenv("TANDEM_NUMA_SIM", "two");
        QVERIFY_THROWS_EXCEPTION(tandem::Error, tandem::Tuning::fromEnvironment());
        qunsetenv("TANDEM_NUMA_SIM");
        QCOMPARE(tandem::Tuning::fromEnvironment().simulatedNumaNodes, 0);
    }
};

QTEST_GUILESS_MAIN(TestWorkerPool)
#include "tst_worker_pool.moc"
