#pragma once
// A fixed set of worker threads for data-parallel loops. The calling thread takes part in every loop,
// so a pool of N threads runs N-1 workers. One loop runs at a time.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::cpu {

class ThreadPool {
public:
    // threads <= 0: one per hardware thread.
    explicit ThreadPool(int threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Calls fn(begin, end) over [0, n) in chunks of at least `grain` items, in parallel; returns when all
    // chunks are done. An exception thrown by fn is rethrown here after the loop has finished.
    void parallelFor(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn);

private:
    void workerLoop();
    void runChunks();

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    std::uint64_t generation_ = 0;
    bool stopping_ = false;
    int active_ = 0;

    // The loop being run.
    const std::function<void(std::size_t, std::size_t)>* fn_ = nullptr;
    std::size_t n_ = 0;
    std::size_t chunk_ = 1;
    std::atomic<std::size_t> next_{0};
    std::exception_ptr error_;
    std::mutex errorMutex_;
};

}  // namespace tandem::cpu
