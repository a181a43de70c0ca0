// `tandem-cli bench-moe --kernel-probe`: the GEMM (or with --kernels gemv the GEMV) kernels of the
// selected level alone, on one thread
// and then on every pool thread at once, each thread with its own activation rows, over one expert
// (its weights stay in the caches) or over many in turn (they come from memory). Splits a prefill
// layer's time into what the kernels themselves reach per thread and what sharing the machine costs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "cpu/kernels/activation_quant.h"
#include "cpu/pool/cpu_topology.h"
#include "cpu/kernels/expert_kernels.h"
#include "cpu/expert_pack.h"
#include "bench/moe_bench.h"

namespace tandem::cpu {

namespace {

using Clock = std::chrono::steady_clock;

// Rows of random activations in the kernels' format.
struct ProbeRows {
    ProbeRows(const ExpertKernels& k, ExpertType type, int rows, int n, int nPad) : rows_(rows) {
        const bool split = type == ExpertType::BF16 && k.bf16Activations == Bf16Activations::Split;
        const bool f32 = type == ExpertType::BF16 && !split;
        lo_ = split ? bf16LoOffset(nPad) : 0;
        // An odd number of cache lines per row, as the layer's buffers have.
        stride_ = split ? 2 * lo_ : (static_cast<std::size_t>(nPad) * (f32 ? 4 : 1) + 63) / 64 * 64;
        if ((stride_ / 64) % 2 == 0) stride_ += 64;
        data_ = NodeMemory(stride_ * rows, -1);
        scale_.resize(rows);
        sums_.resize(static_cast<std::size_t>(rows) * nPad / kActGroup);
        groupStride_ = static_cast<std::size_t>(nPad / kActGroup);
        std::vector<float> x(n);
        std::uint64_t s = 0x9e3779b97f4a7c15ull;
        for (int r = 0; r < rows; ++r) {
            for (float& v : x) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                v = static_cast<float>(static_cast<double>(s >> 40) / (1 << 24) - 0.5);
            }
            std::byte* row = data_.data() + stride_ * r;
            if (split)
                activationToBf16Split(x.data(), n, nPad, row);
            else if (f32)
                activationToFloat(x.data(), n, nPad, reinterpret_cast<float*>(row));
            else
                activationToInt8(x.data(), n, nPad, reinterpret_cast<std::int8_t*>(row), &scale_[r], &sums_[groupStride_ * r]);
        }
    }
    KernelRows view() const { return {data_.data(), stride_, lo_, scale_.data(), sums_.data(), groupStride_, rows_}; }

private:
    int rows_;
    std::size_t lo_ = 0, stride_ = 0, groupStride_ = 0;
    NodeMemory data_;
    std::vector<float> scale_;
    std::vector<std::int32_t> sums_;
};

// Each thread's gate/up and down calls over `experts` copies of one packed expert, in turn from
// expert `first`, for `seconds`: the seconds spent in each kernel and the calls made.
struct ProbeTimes {
    double gateUp = 0, down = 0;
    long calls = 0;
};

ProbeTimes runProbe(const ExpertKernels& k, ExpertType type, bool gemm, const ExpertLayout& l, const std::byte* experts, int count, int first,
                    int rows, double seconds) {
    const KernelPair& kp = k.pick(type, gemm);
    ProbeRows x(k, type, rows, l.hidden, l.hiddenPad);
    ProbeRows a(k, type, rows, l.interPad, l.interPad);
    std::vector<float> act(static_cast<std::size_t>(rows) * l.interPad);
    std::vector<float> out(static_cast<std::size_t>(rows) * l.hidden), weight(rows, 1.0f);
    std::vector<float*> dest(rows);
    for (int r = 0; r < rows; ++r) dest[r] = out.data() + static_cast<std::size_t>(r) * l.hidden;
    ProbeTimes t;
    const auto start = Clock::now();
    for (int e = first % count; std::chrono::duration<double>(Clock::now() - start).count() < seconds || t.calls < 2; e = (e + 1) % count) {
        const std::byte* expert = experts + static_cast<std::size_t>(e) * l.expertBytes;
        GateUpCall g;
        g.layout = &l;
        g.panels = expert;
        g.panelCount = l.gateUpPanels;
        g.x = x.view();
        g.act = act.data();
        g.actStride = l.interPad;
        const auto t0 = Clock::now();
        kp.gateUp(g);
        const auto t1 = Clock::now();
        DownCall d;
        d.layout = &l;
        d.chunks = expert + l.chunkOffset(0);
        d.chunkCount = l.chunks;
        d.panelCount = l.downPanels;
        d.rowScales = reinterpret_cast<const float*>(expert + l.downScalesOffset);
        d.act = a.view();
        d.dest = dest.data();
        d.weight = weight.data();
        kp.down(d);
        const auto t2 = Clock::now();
        t.gateUp += std::chrono::duration<double>(t1 - t0).count();
        t.down += std::chrono::duration<double>(t2 - t1).count();
        ++t.calls;
    }
    return t;
}

class ProbeJob : public PoolJob {
public:
    ProbeJob(const ExpertKernels& k, ExpertType type, bool gemm, const ExpertLayout& l, const std::byte* experts, int count, int rows,
             double seconds)
        : k_(k), type_(type), gemm_(gemm), l_(l), experts_(experts), count_(count), rows_(rows), seconds_(seconds) {}
    void run(const WorkerContext& w) override {
        const ProbeTimes t = runProbe(k_, type_, gemm_, l_, experts_, count_, w.worker * 7, rows_, seconds_);
        add(gateUpRate_, static_cast<double>(t.calls) / t.gateUp);
        add(downRate_, static_cast<double>(t.calls) / t.down);
    }
    double gateUpCallsPerSecond() const { return gateUpRate_.load(); }
    double downCallsPerSecond() const { return downRate_.load(); }

private:
    static void add(std::atomic<double>& a, double v) {
        double seen = a.load(std::memory_order_relaxed);
        while (!a.compare_exchange_weak(seen, seen + v, std::memory_order_relaxed)) {
        }
    }
    const ExpertKernels& k_;
    ExpertType type_;
    bool gemm_;
    const ExpertLayout& l_;
    const std::byte* experts_;
    int count_, rows_;
    double seconds_;
    std::atomic<double> gateUpRate_{0}, downRate_{0};
};

}  // namespace

std::vector<KernelProbePoint> probeKernels(const MoeBenchOptions& o, const std::vector<int>& rows) {
    const ExpertKernels& k = kernelsFor(selectedIsa());
    const ExpertLayout l = ExpertLayout::make(o.type, o.shape.hidden, o.shape.inter);
    // Enough copies of one expert that they do not fit in the last-level cache (1 GiB, at most 64).
    const int copies = static_cast<int>(std::clamp<std::size_t>((std::size_t{1} << 30) / l.expertBytes, 1, 64));
    // On 2 MiB pages where the kernel gives them, as bench-moe's layers and the engine's packed experts.
    NodeMemory memory(l.expertBytes * copies, -1);
    std::byte* const base = memory.data();
    {
        std::vector<float> g(static_cast<std::size_t>(l.inter) * l.hidden), u(g.size()), dn(g.size());
        std::uint64_t s = 88172645463325252ull;
        for (auto* m : {&g, &u, &dn})
            for (float& v : *m) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                v = static_cast<float>(static_cast<double>(s >> 40) / (1 << 24) - 0.5) * 0.1f;
            }
        auto reader = [](const std::vector<float>& m, int cols) {
            return [&m, cols](std::int64_t r, float* out) { std::copy_n(m.data() + r * cols, cols, out); };
        };
        packExpert(l, {reader(g, l.hidden), reader(u, l.hidden), reader(dn, l.inter)}, base);
        for (int e = 1; e < copies; ++e) std::memcpy(base + l.expertBytes * e, base, l.expertBytes);
    }
    ExpertPool pool(PoolOptions::fromEnvironment(o.threads));
    const bool gemm = o.kernels != KernelChoice::Gemv;
    const double ops = 2.0 * l.hidden * l.inter;  // per row and matrix
    const double gateUpBytes = static_cast<double>(l.gateUpPanelBytes) * l.gateUpPanels;
    const double downBytes = static_cast<double>(l.dataBytes - l.downOffset);
    std::vector<KernelProbePoint> out;
    for (const int r : rows)
        for (const int count : {1, copies}) {
            KernelProbePoint p;
            p.rows = r;
            p.experts = count;
            const ProbeTimes one = runProbe(k, o.type, gemm, l, base, count, 0, r, o.secondsPerPoint);
            p.gateUpOneThread = 2 * ops * r * one.calls / one.gateUp;
            p.downOneThread = ops * r * one.calls / one.down;
            p.gateUpGbps = gateUpBytes * one.calls / one.gateUp / 1e9;
            p.downGbps = downBytes * one.calls / one.down / 1e9;
            ProbeJob job(k, o.type, gemm, l, base, count, r, o.secondsPerPoint);
            pool.run(job);
            p.threads = pool.threads();
            p.gateUpAllThreads = 2 * ops * r * job.gateUpCallsPerSecond();
            p.downAllThreads = ops * r * job.downCallsPerSecond();
            out.push_back(p);
        }
    return out;
}

}  // namespace tandem::cpu
