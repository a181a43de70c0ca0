#include "cpu/moe_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "cpu/expert_kernels.h"
#include "cpu/expert_pack.h"
#include "tandem/error.h"

namespace tandem::cpu {

namespace {

using Clock = std::chrono::steady_clock;

constexpr MoeShape kShapes[] = {
    {"deepseek-v3", 7168, 2048, 256, 8},
    {"qwen3-30b-a3b", 2048, 768, 128, 8},
    {"deepseek-v2-lite", 2048, 1408, 64, 6},
};

double seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

double availableMemory() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    double kb = 0;
    while (in >> key >> kb) {
        if (key == "MemAvailable:") return kb * 1024;
        in.ignore(1 << 10, '\n');
    }
    return 8.0 * (1ull << 30);
}

class Random {
public:
    explicit Random(std::uint64_t seed) : s_(seed) {}
    std::uint64_t next() {  // splitmix64
        std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) / static_cast<float>(1 << 24); }

private:
    std::uint64_t s_;
};

// Packs experts [0, count) with random weights, spread over the pool's workers.
class PackJob : public PoolJob {
public:
    PackJob(const ExpertLayout& l, std::byte* base, int count, std::uint64_t seed) : l_(l), base_(base), count_(count), seed_(seed) {}
    void run(const WorkerContext&) override {
        for (int e = next_.fetch_add(1); e < count_; e = next_.fetch_add(1)) {
            auto reader = [&](int matrix, int cols) {
                return [this, e, matrix, cols](std::int64_t row, float* out) {
                    Random rng(seed_ ^ (static_cast<std::uint64_t>(e) << 40) ^ (static_cast<std::uint64_t>(matrix) << 36) ^
                               static_cast<std::uint64_t>(row));
                    for (int k = 0; k < cols; ++k) out[k] = rng.uniform(-0.05f, 0.05f);
                };
            };
            packExpert(l_, {reader(0, l_.hidden), reader(1, l_.hidden), reader(2, l_.inter)},
                       base_ + static_cast<std::size_t>(e) * l_.expertBytes);
        }
    }

private:
    const ExpertLayout& l_;
    std::byte* base_;
    int count_;
    std::uint64_t seed_;
    std::atomic<int> next_{0};
};

// Each worker writes or reads its own contiguous slice (so with NUMA the slice is node-local).
class SliceJob : public PoolJob {
public:
    SliceJob(std::byte* data, std::size_t bytes, bool write) : data_(data), bytes_(bytes), write_(write) {}
    void run(const WorkerContext& w) override {
        const std::size_t slice = bytes_ / w.threads / 4096 * 4096;
        std::byte* p = data_ + slice * w.worker;
        if (write_)
            std::memset(p, 1 + w.worker, slice);
        else
            sink_.fetch_xor(streamRead(p, slice), std::memory_order_relaxed);
    }
    std::size_t bytesTouched(int threads) const { return bytes_ / threads / 4096 * 4096 * threads; }

private:
    std::byte* data_;
    std::size_t bytes_;
    bool write_;
    std::atomic<std::uint64_t> sink_{0};
};

double measureBandwidth(ExpertPool& pool, std::size_t bytes) {
    NodeMemory buffer(bytes, -1);
    SliceJob fill(buffer.data(), bytes, true);
    pool.run(fill);  // real pages: reading never-written memory would read the shared zero page
    SliceJob read(buffer.data(), bytes, false);
    pool.run(read);
    double best = 0;
    for (int pass = 0; pass < 5; ++pass) {
        const auto t0 = Clock::now();
        pool.run(read);
        best = std::max(best, static_cast<double>(read.bytesTouched(pool.threads())) / seconds(t0) / 1e9);
    }
    return best;
}

// Each token picks topK distinct experts, with random weights that sum to one.
void randomRouting(Random& rng, int tokens, int experts, int topK, std::vector<int>& ids, std::vector<float>& weights) {
    ids.resize(static_cast<std::size_t>(tokens) * topK);
    weights.resize(ids.size());
    for (int t = 0; t < tokens; ++t) {
        float sum = 0;
        for (int j = 0; j < topK; ++j) {
            int e;
            do {
                e = static_cast<int>(rng.next() % static_cast<std::uint64_t>(experts));
            } while (std::find(&ids[t * topK], &ids[t * topK] + j, e) != &ids[t * topK] + j);
            ids[t * topK + j] = e;
            weights[t * topK + j] = rng.uniform(0.1f, 1.0f);
            sum += weights[t * topK + j];
        }
        for (int j = 0; j < topK; ++j) weights[t * topK + j] /= sum;
    }
}

// The layer's experts in memory: `physical` packed copies, logical expert e using copy e % physical
// when not all fit.
struct BenchLayer {
    ExpertLayout layout;
    int physical = 0;
    NodeMemory memory;
    std::unique_ptr<PackedMoeLayer> layer;
};

BenchLayer makeLayer(const MoeBenchOptions& o, ExpertPool& pool, double reserve, double& packSeconds,
                     const std::function<void(const std::string&)>& progress) {
    BenchLayer b;
    b.layout = ExpertLayout::make(o.type, o.shape.hidden, o.shape.inter);
    const double budget = std::max(0.0, 0.6 * availableMemory() - reserve);
    b.physical = o.expertsInMemory > 0 ? std::min(o.expertsInMemory, o.shape.experts)
                                       : std::clamp(static_cast<int>(budget / static_cast<double>(b.layout.expertBytes)), 1, o.shape.experts);
    if (b.physical < o.shape.topK)
        throw Error("only " + std::to_string(b.physical) + " experts of this shape fit in memory, fewer than the " +
                    std::to_string(o.shape.topK) + " a token uses; free memory or pick a smaller type");
    progress("packing " + std::to_string(b.physical) + " random experts (" +
             std::to_string(static_cast<double>(b.layout.expertBytes) * b.physical / 1e9).substr(0, 5) + " GB)");
    const auto t0 = Clock::now();
    b.memory = NodeMemory(b.layout.expertBytes * static_cast<std::size_t>(b.physical), -1);
    PackJob pack(b.layout, b.memory.data(), b.physical, o.seed);
    pool.run(pack);
    packSeconds = seconds(t0);
    std::vector<const std::byte*> experts;
    for (int e = 0; e < o.shape.experts; ++e)
        experts.push_back(b.memory.data() + static_cast<std::size_t>(e % b.physical) * b.layout.expertBytes);
    b.layer = std::make_unique<PackedMoeLayer>(b.layout, experts, pool.topology(), PackedMoeLayer::Placement::InPlace);
    return b;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

std::span<const MoeShape> moeShapes() { return kShapes; }

const MoeShape* findMoeShape(std::string_view name) {
    for (const auto& s : kShapes)
        if (s.name == name) return &s;
    return nullptr;
}

MoeBenchReport runMoeBench(const MoeBenchOptions& o, const std::function<void(const std::string&)>& progress) {
    ExpertPool pool(PoolOptions::fromEnvironment(o.threads));
    MoeBenchReport report;
    report.isa = MoeRunner(pool, {std::nullopt, o.kernels, o.gemmMinRows}).isa();
    report.topology = pool.topology().describe();
    report.threads = pool.threads();
    report.nodes = pool.nodes();
    report.dispatch = measureDispatchLatency(pool);
    report.pinned = pool.pinned();

    const std::size_t bandwidthBytes = static_cast<std::size_t>(std::clamp(availableMemory() / 8, 256.0 * (1 << 20), 1024.0 * (1 << 20)));
    progress("measuring memory bandwidth (streaming read of " + std::to_string(bandwidthBytes >> 20) + " MiB)");
    report.bandwidthGbps = measureBandwidth(pool, bandwidthBytes);
    report.bandwidthBufferBytes = static_cast<double>(bandwidthBytes);

    BenchLayer b = makeLayer(o, pool, 0, report.packSeconds, progress);
    report.expertsInMemory = b.physical;
    report.layerBytes = static_cast<double>(b.layout.dataBytes) * o.shape.experts;

    Random rng(o.seed * 7919 + 3);
    for (const int tokens : o.tokens) {
        progress("timing " + std::to_string(tokens) + " token(s)");
        MoeRunner runner(pool, {std::nullopt, o.kernels, o.gemmMinRows});
        std::vector<float> x(static_cast<std::size_t>(tokens) * o.shape.hidden), out(x.size(), 0.0f);
        for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
        std::vector<int> ids;
        std::vector<float> weights;
        MoeBenchPoint p;
        p.tokens = tokens;
        std::vector<double> times;
        double bytes = 0, active = 0, gemm = 0;
        const auto start = Clock::now();
        for (int it = -2; it < 5000; ++it) {
            randomRouting(rng, tokens, o.shape.experts, o.shape.topK, ids, weights);
            const auto t0 = Clock::now();
            runner.run(*b.layer, {x.data(), static_cast<std::size_t>(o.shape.hidden), tokens, ids.data(), weights.data(),
                                  o.shape.topK, out.data(), static_cast<std::size_t>(o.shape.hidden)});
            const double dt = seconds(t0);
            if (it < 0) continue;  // warm-up
            std::set<int> copies;
            for (const int e : ids) copies.insert(e % b.physical);
            times.push_back(dt);
            bytes += static_cast<double>(copies.size()) * static_cast<double>(b.layout.dataBytes);
            active += runner.lastStats().activeExperts;
            gemm += runner.lastStats().gemmExperts;
            if (it >= 2 && seconds(start) > o.secondsPerPoint) break;
        }
        p.iterations = static_cast<int>(times.size());
        p.secondsPerLayer = median(times);
        p.weightBytes = bytes / p.iterations;
        p.weightsGbps = p.weightBytes / p.secondsPerLayer / 1e9;
        p.flops = 6.0 * o.shape.hidden * o.shape.inter * tokens * o.shape.topK;
        p.tflops = p.flops / p.secondsPerLayer / 1e12;
        p.activeExperts = active / p.iterations;
        p.gemmExperts = gemm / p.iterations;
        report.points.push_back(p);
    }
    return report;
}

std::vector<SweepPoint> sweepGemmThreshold(const MoeBenchOptions& o, const std::vector<int>& rowsPerExpert,
                                           const std::function<void(const std::string&)>& progress) {
    ExpertPool pool(PoolOptions::fromEnvironment(o.threads));
    double packSeconds = 0;
    BenchLayer b = makeLayer(o, pool, 0, packSeconds, progress);
    MoeRunner gemv(pool, {std::nullopt, KernelChoice::Gemv, 0}), gemm(pool, {std::nullopt, KernelChoice::Gemm, 0});
    std::vector<SweepPoint> points;
    Random rng(o.seed);
    for (const int rows : rowsPerExpert) {
        const int tokens = (rows * o.shape.experts + o.shape.topK - 1) / o.shape.topK;
        std::vector<float> x(static_cast<std::size_t>(tokens) * o.shape.hidden), out(x.size(), 0.0f);
        for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
        std::vector<int> ids(static_cast<std::size_t>(tokens) * o.shape.topK);
        std::vector<float> weights(ids.size(), 1.0f / o.shape.topK);
        for (std::size_t s = 0; s < ids.size(); ++s) ids[s] = static_cast<int>(s % o.shape.experts);
        const MoeInput in{x.data(), static_cast<std::size_t>(o.shape.hidden), tokens, ids.data(), weights.data(),
                          o.shape.topK, out.data(), static_cast<std::size_t>(o.shape.hidden)};
        auto time = [&](MoeRunner& r) {
            r.run(*b.layer, in);
            std::vector<double> t;
            for (int i = 0; i < 5; ++i) {
                const auto t0 = Clock::now();
                r.run(*b.layer, in);
                t.push_back(seconds(t0));
            }
            return median(t);
        };
        progress("sweep: " + std::to_string(rows) + " rows per expert");
        points.push_back({rows, time(gemv), time(gemm)});
    }
    return points;
}

}  // namespace tandem::cpu
