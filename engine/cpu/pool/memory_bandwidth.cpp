#include "cpu/pool/memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include "cpu/kernels/expert_kernels.h"

namespace tandem::cpu {

void SliceJob::run(const WorkerContext& w) {
    const std::size_t slice = bytes_ / w.threads / 4096 * 4096;
    std::byte* p = data_ + slice * w.worker;
    if (write_)
        std::memset(p, 1 + w.worker, slice);
    else
        sink_.fetch_xor(streamRead(p, slice), std::memory_order_relaxed);
}

BandwidthProbe::BandwidthProbe(ExpertPool& pool, std::size_t bytes)
    : pool_(pool), buffer_(bytes, -1), read_(buffer_.data(), bytes, false) {
    SliceJob fill(buffer_.data(), bytes, true);
    pool.run(fill);  // real pages: reading never-written memory would read the shared zero page
    pool.run(read_);
}

double BandwidthProbe::pass() {
    const auto t0 = std::chrono::steady_clock::now();
    pool_.run(read_);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double gbps = static_cast<double>(read_.bytesTouched(pool_.threads())) / seconds / 1e9;
    best_ = std::max(best_, gbps);
    return gbps;
}

std::size_t lastLevelCacheBytes() {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
    std::size_t n = 0;
    char unit = 0;
    if (in >> n >> unit) return unit == 'M' ? n << 20 : unit == 'K' ? n << 10 : n;
    return 32u << 20;
}

std::size_t bandwidthBufferBytes() {
    const double want = std::max(4.0 * static_cast<double>(lastLevelCacheBytes()), 1024.0 * (1 << 20));
    const double available = static_cast<double>(availableMemoryBytes());
    return static_cast<std::size_t>(std::clamp(available / 4, 256.0 * (1 << 20), want)) / (1 << 20) << 20;
}

double measureMemoryBandwidth(ExpertPool& pool, int passes) {
    BandwidthProbe probe(pool, bandwidthBufferBytes());
    for (int i = 0; i < passes; ++i) probe.pass();
    return probe.best();
}

}  // namespace tandem::cpu
