#pragma once
// Data-parallel loops on the expert pool's workers. Attention, the dense matrix products and the MoE
// kernels all run on the same pinned threads, so nothing else competes for the cores while a step runs
// (two pools would each spin on cores the other needs).
#include <cstddef>
#include <functional>

#include "cpu/pool/worker_pool.h"
#include "io/parallel_for.h"

namespace tandem::cpu {

class ThreadPool {
public:
    // threads <= 0: one per physical core. The calling thread takes part in every loop.
    explicit ThreadPool(int threads = 0);

    int size() const { return pool_.threads(); }
    ExpertPool& experts() { return pool_; }

    // Calls fn(begin, end) over [0, n) in chunks of at least `grain` items, in parallel; returns when all
    // chunks are done. An exception thrown by fn is rethrown here after the loop has finished. Loops do
    // not nest: fn must not call parallelFor.
    void parallelFor(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn);
    // The same, one item at a time, for io's parallel work (checksums).
    io::ParallelFor asParallelFor() {
        return {[this](std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) { parallelFor(n, 1, body); },
                size()};
    }

private:
    ExpertPool pool_;
};

}  // namespace tandem::cpu
