#include "cpu/thread_pool.h"

#include <algorithm>

namespace tandem::cpu {

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::runChunks() {
    for (;;) {
        const std::size_t begin = next_.fetch_add(chunk_);
        if (begin >= n_) return;
        const std::size_t end = std::min(n_, begin + chunk_);
        try {
            (*fn_)(begin, end);
        } catch (...) {
            std::lock_guard lock(errorMutex_);
            if (!error_) error_ = std::current_exception();
        }
    }
}

void ThreadPool::workerLoop() {
    std::uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) return;
            seen = generation_;
        }
        runChunks();
        {
            std::lock_guard lock(mutex_);
            if (--active_ == 0) done_.notify_one();
        }
    }
}

void ThreadPool::parallelFor(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn) {
    if (n == 0) return;
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t threads = static_cast<std::size_t>(size());
    if (workers_.empty() || n <= grain) {
        fn(0, n);
        return;
    }
    // About four chunks per thread balances uneven chunks without much scheduling traffic.
    const std::size_t chunk = std::max(grain, (n + threads * 4 - 1) / (threads * 4));
    {
        std::lock_guard lock(mutex_);
        fn_ = &fn;
        n_ = n;
        chunk_ = chunk;
        next_.store(0);
        error_ = nullptr;
        active_ = static_cast<int>(workers_.size());
        ++generation_;
    }
    wake_.notify_all();
    runChunks();
    {
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return active_ == 0; });
        fn_ = nullptr;
    }
    if (error_) std::rethrow_exception(error_);
}

}  // namespace tandem::cpu
