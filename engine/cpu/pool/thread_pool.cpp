#include "cpu/pool/thread_pool.h"

#include <algorithm>
#include <atomic>

namespace tandem::cpu {

namespace {

// Every participant takes chunks until none are left.
class ForLoop : public PoolJob {
public:
    ForLoop(std::size_t n, std::size_t chunk, const std::function<void(std::size_t, std::size_t)>& fn)
        : n_(n), chunk_(chunk), fn_(fn) {}
    void run(const WorkerContext&) override {
        for (;;) {
            const std::size_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
            if (begin >= n_) return;
            fn_(begin, std::min(n_, begin + chunk_));
        }
    }

private:
    const std::size_t n_, chunk_;
    const std::function<void(std::size_t, std::size_t)>& fn_;
    std::atomic<std::size_t> next_{0};
};

}  // namespace

ThreadPool::ThreadPool(int threads) : pool_(PoolOptions::fromEnvironment(threads)) {}

void ThreadPool::parallelFor(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn) {
    if (n == 0) return;
    grain = std::max<std::size_t>(grain, 1);
    const auto threads = static_cast<std::size_t>(size());
    if (threads == 1 || n <= grain) {
        fn(0, n);
        return;
    }
    // About four chunks per thread balances uneven chunks without much scheduling traffic.
    ForLoop loop(n, std::max(grain, (n + threads * 4 - 1) / (threads * 4)), fn);
    pool_.run(loop);
}

}  // namespace tandem::cpu
