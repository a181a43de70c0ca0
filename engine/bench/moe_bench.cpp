#include "bench/moe_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "cpu/kernels/amx/amx_peak.h"
#include "cpu/kernels/expert_kernels.h"
#include "cpu/expert_pack.h"
#include "tandem/error.h"

namespace tandem::cpu {

namespace {

using Clock = std::chrono::steady_clock;

constexpr MoeShape kShapes[] = {
    {"deepseek-v3", 7168, 2048, 256, 8},
    {"qwen3-30b-a3b", 2048, 768, 128, 8},
    {"deepseek-v2-lite", 2048, 1408, 64, 6},
    {"gpt-oss-120b", 2880, 2880, 128, 4},
};

double seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

double availableMemory() { return static_cast<double>(availableMemoryBytes()); }

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

// Several copies of the layer, used in turn as a model's layers are: otherwise a small layer (qwen3
// int4: 340 MB) would be read from a large last-level cache (300 MiB on the GPU machine's Xeon) rather
// than from memory. Copy l's expert e is packed expert (l * experts + e) % physical, which repeats
// experts only when memory is short.
struct BenchLayer {
    ExpertLayout layout;
    int physical = 0;
    NodeMemory memory;
    std::vector<std::unique_ptr<PackedMoeLayer>> copies;
};

BenchLayer makeLayer(const MoeBenchOptions& o, ExpertPool& pool, double reserve, double& packSeconds,
                     const std::function<void(const std::string&)>& progress) {
    BenchLayer b;
    b.layout = ExpertLayout::make(o.type, o.shape.hidden, o.shape.inter);
    const double budget = std::max(0.0, 0.6 * availableMemory() - reserve);
    const double layerBytes = static_cast<double>(b.layout.expertBytes) * o.shape.experts;
    const int copies = std::clamp(static_cast<int>(std::ceil(4.0 * static_cast<double>(lastLevelCacheBytes()) / layerBytes)), 1, 64);
    const int fit = static_cast<int>(std::min<double>(budget / static_cast<double>(b.layout.expertBytes), 1 << 20));
    b.physical = std::clamp(o.expertsInMemory > 0 ? o.expertsInMemory : copies * o.shape.experts, 1, std::max(1, fit));
    if (o.expertsInMemory > 0) b.physical = std::min(o.expertsInMemory, copies * o.shape.experts);
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
    const int used = std::max(1, std::min(copies, b.physical / o.shape.experts));
    for (int c = 0; c < used; ++c) {
        std::vector<const std::byte*> experts;
        for (int e = 0; e < o.shape.experts; ++e)
            experts.push_back(b.memory.data() + static_cast<std::size_t>((c * o.shape.experts + e) % b.physical) * b.layout.expertBytes);
        b.copies.push_back(std::make_unique<PackedMoeLayer>(b.layout, experts, pool.topology(), PackedMoeLayer::Placement::InPlace));
    }
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

    const std::size_t bandwidthBytes = bandwidthBufferBytes();
    progress("measuring memory bandwidth (streaming read of " + std::to_string(bandwidthBytes >> 20) + " MiB)");
    BandwidthProbe probe(pool, bandwidthBytes);
    for (int i = 0; i < 5; ++i) probe.pass();
    report.bandwidthBufferBytes = static_cast<double>(bandwidthBytes);

    BenchLayer b = makeLayer(o, pool, static_cast<double>(bandwidthBytes), report.packSeconds, progress);
    report.expertsInMemory = b.physical;
    report.layerCopies = static_cast<int>(b.copies.size());
    report.layerBytes = static_cast<double>(b.layout.dataBytes) * o.shape.experts;

    Random rng(o.seed * 7919 + 3);
    for (const int tokens : o.tokens) {
        progress("timing " + std::to_string(tokens) + " token(s)");
        MoeRunner runner(pool, {std::nullopt, o.kernels, o.gemmMinRows, o.profilePhases});
        MoeRunner second(pool, {std::nullopt, o.kernels, o.gemmMinRows, o.profilePhases});
        const int k = o.shape.topK, later = std::clamp(o.deferred, 0, k - 1);
        std::vector<int> idsA, idsB;
        std::vector<float> weightsA, weightsB;
        std::vector<float> x(static_cast<std::size_t>(tokens) * o.shape.hidden), out(x.size(), 0.0f), out2(out);
        for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
        std::vector<int> ids;
        std::vector<float> weights;
        MoeBenchPoint p;
        p.tokens = tokens;
        std::vector<double> times, bandwidth;
        double bytes = 0, active = 0, gemm = 0;
        const auto start = Clock::now();
        auto lastProbe = start;
        for (int it = -2; it < 5000; ++it) {
            randomRouting(rng, tokens, o.shape.experts, o.shape.topK, ids, weights);
            const PackedMoeLayer& layer = *b.copies[static_cast<std::size_t>(it + 2) % b.copies.size()];
            const std::size_t H = static_cast<std::size_t>(o.shape.hidden);
            double dt = 0;
            if (later == 0) {
                const auto t0 = Clock::now();
                runner.run(layer, {x.data(), H, tokens, ids.data(), weights.data(), k, out.data(), H});
                dt = seconds(t0);
            } else {
                auto part = [&](int first, int last, std::vector<int>& pi, std::vector<float>& pw) {
                    pi.clear();
                    pw.clear();
                    for (int t = 0; t < tokens; ++t)
                        for (int s = first; s < last; ++s) {
                            pi.push_back(ids[static_cast<std::size_t>(t * k + s)]);
                            pw.push_back(weights[static_cast<std::size_t>(t * k + s)]);
                        }
                };
                part(0, k - later, idsA, weightsA);
                part(k - later, k, idsB, weightsB);
                const auto t0 = Clock::now();
                runner.enqueueJoined(layer, {x.data(), H, tokens, idsA.data(), weightsA.data(), k - later, out.data(), H}, {});
                second.enqueueJoined(layer, {x.data(), H, tokens, idsB.data(), weightsB.data(), later, out2.data(), H}, {});
                pool.joinQueued();
                runner.wait();
                second.wait();
                dt = seconds(t0);
            }
            if (it < 0) {  // warm-up
                runner.resetPhaseSeconds();
                second.resetPhaseSeconds();
                continue;
            }
            std::set<const std::byte*> read;
            for (const int e : ids) read.insert(layer.expert(0, e).gateUp);
            times.push_back(dt);
            bytes += static_cast<double>(read.size()) * static_cast<double>(b.layout.dataBytes);
            active += runner.lastStats().activeExperts + (later ? second.lastStats().activeExperts : 0);
            gemm += runner.lastStats().gemmExperts + (later ? second.lastStats().gemmExperts : 0);
            // A bandwidth pass about every 0.1 s of layers, so both see the same machine.
            if (seconds(lastProbe) > 0.1) {
                bandwidth.push_back(probe.pass());
                lastProbe = Clock::now();
            }
            if (it >= 2 && bandwidth.size() >= 3 && seconds(start) > o.secondsPerPoint) break;
        }
        p.iterations = static_cast<int>(times.size());
        p.secondsPerLayer = median(times);
        p.weightBytes = bytes / p.iterations;
        p.weightsGbps = p.weightBytes / p.secondsPerLayer / 1e9;
        p.bandwidthGbps = median(bandwidth);
        p.flops = 6.0 * o.shape.hidden * o.shape.inter * tokens * o.shape.topK;
        p.tflops = p.flops / p.secondsPerLayer / 1e12;
        if (o.profilePhases) {
            const MoePhaseSeconds a = runner.phaseSeconds(), b2 = second.phaseSeconds();
            const double n = p.iterations;
            p.phases = {(a.convertX + b2.convertX) / n, (a.gateUp + b2.gateUp) / n,     (a.convertAct + b2.convertAct) / n,
                        (a.down + b2.down) / n,         (a.reduce + b2.reduce) / n, (a.barriers + b2.barriers) / n};
            double wall = 0;
            for (const double t : times) wall += t;
            p.threadSeconds = pool.threads() * wall / n;
        }
        p.activeExperts = active / p.iterations;
        p.gemmExperts = gemm / p.iterations;
        report.points.push_back(p);
    }
    report.bandwidthBestGbps = probe.best();
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
        std::vector<float> x(static_cast<std::size_t>(tokens) * o.shape.hidden), out(x.size(), 0.0f), out2(out);
        for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
        std::vector<int> ids(static_cast<std::size_t>(tokens) * o.shape.topK);
        std::vector<float> weights(ids.size(), 1.0f / o.shape.topK);
        for (std::size_t s = 0; s < ids.size(); ++s) ids[s] = static_cast<int>(s % o.shape.experts);
        const MoeInput in{x.data(), static_cast<std::size_t>(o.shape.hidden), tokens, ids.data(), weights.data(),
                          o.shape.topK, out.data(), static_cast<std::size_t>(o.shape.hidden)};
        auto time = [&](MoeRunner& r) {
            r.run(*b.copies[0], in);
            std::vector<double> t;
            for (int i = 0; i < 5; ++i) {
                const auto t0 = Clock::now();
                r.run(*b.copies[static_cast<std::size_t>(i + 1) % b.copies.size()], in);
                t.push_back(seconds(t0));
            }
            return median(t);
        };
        progress("sweep: " + std::to_string(rows) + " rows per expert");
        points.push_back({rows, time(gemv), time(gemm)});
    }
    return points;
}

std::vector<TilePeakPoint> measureTilePeak(int threads) {
    if (const std::string missing = isaMissing(Isa::Amx); !missing.empty())
        throw Error("--tile-peak needs AMX; this CPU lacks " + missing);
    struct Test {
        TileTest test;
        std::string_view name;
    };
    constexpr Test kTests[] = {{TileTest::Bf16Resident, "bf16 tdpbf16ps, resident tiles"},
                               {TileTest::Int8Resident, "int8 tdpbssd K 64, resident tiles"},
                               {TileTest::Int8K32Resident, "int8 tdpbssd K 32, resident tiles"},
                               {TileTest::Int8FromL1, "int8 K 64, A and B loaded from L1"},
                               {TileTest::Int8StridedA, "int8 K 64, A rows 7232 B apart (L2)"},
                               {TileTest::Int8BFromL2, "int8 K 64, B tiles from L2"}};
    constexpr long kSteps = 1 << 20;  // ~35 ms at peak
    class PeakJob : public PoolJob {
    public:
        explicit PeakJob(TileTest t) : test_(t) {}
        void run(const WorkerContext&) override {
            const double ops = amxTileOpsPerSecond(test_, kSteps);
            double seen = total_.load(std::memory_order_relaxed);
            while (!total_.compare_exchange_weak(seen, seen + ops, std::memory_order_relaxed)) {
            }
        }
        double total() const { return total_.load(); }

    private:
        TileTest test_;
        std::atomic<double> total_{0};
    };
    ExpertPool pool(PoolOptions::fromEnvironment(threads));
    std::vector<TilePeakPoint> out;
    for (const Test& t : kTests) {
        amxTileOpsPerSecond(t.test, kSteps / 16);  // warm up the tile unit's clock
        TilePeakPoint p{t.name, amxTileOpsPerSecond(t.test, kSteps), 0};
        PeakJob job(t.test);
        pool.run(job);
        p.allThreads = job.total();
        out.push_back(p);
    }
    return out;
}

}  // namespace tandem::cpu
