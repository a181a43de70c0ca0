#pragma once
// Work that io spreads over the caller's threads (checksums of large files), without io depending on any
// thread pool: the caller hands in how to run a loop in parallel (cpu::ThreadPool::parallelFor does).
#include <cstddef>
#include <functional>

namespace tandem::io {

struct ParallelFor {
    // Calls body(begin, end) over ranges covering [0, n), possibly at once on several threads, and
    // returns when all are done.
    std::function<void(std::size_t n, const std::function<void(std::size_t begin, std::size_t end)>& body)> run;
    int threads = 1;  // how many run at once, to size the work between progress reports
};

}  // namespace tandem::io
