#pragma once
// The machine's memory bandwidth as the expert pool's threads see it: streaming reads of a buffer
// several times the caches. The decode ceiling (routed bytes per token over this) and bench-moe use it.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cpu/pool/cpu_topology.h"
#include "cpu/pool/worker_pool.h"

namespace tandem::cpu {

// Each worker writes or reads its own contiguous slice (so with NUMA the slice is node-local).
class SliceJob : public PoolJob {
public:
    SliceJob(std::byte* data, std::size_t bytes, bool write) : data_(data), bytes_(bytes), write_(write) {}
    void run(const WorkerContext& w) override;
    std::size_t bytesTouched(int threads) const { return bytes_ / threads / 4096 * 4096 * threads; }

private:
    std::byte* data_;
    std::size_t bytes_;
    bool write_;
    std::atomic<std::uint64_t> sink_{0};
};

// Streaming reads of a buffer larger than the caches by the pool's threads, one pass at a time, so
// that passes can be interleaved with other runs and both sampled under the same conditions.
class BandwidthProbe {
public:
    BandwidthProbe(ExpertPool& pool, std::size_t bytes);
    double pass();  // GB/s of one pass
    double best() const { return best_; }
    std::size_t bytes() const { return buffer_.size(); }

private:
    ExpertPool& pool_;
    NodeMemory buffer_;
    SliceJob read_;
    double best_ = 0;
};

std::size_t lastLevelCacheBytes();
// At least 4x the last-level cache, at least 1 GiB, at most a quarter of the free memory.
std::size_t bandwidthBufferBytes();
// Best GB/s of `passes` streaming reads, by the pool's threads, of a buffer several times the caches.
double measureMemoryBandwidth(ExpertPool& pool, int passes = 5);

}  // namespace tandem::cpu
