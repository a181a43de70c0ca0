#include "cpu/moe/moe_layer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <sys/mman.h>

#include "cpu/kernels/activation_quant.h"
#include "tandem/error.h"
#include "tandem/tuning.h"

namespace tandem::cpu {

namespace {

std::size_t align64(std::size_t n) { return (n + 63) / 64 * 64; }

// A row stride of an odd number of cache lines: rows a power-of-two apart would all fall into a few
// cache sets, and a tile or a block of rows would evict itself.
std::size_t rowStride(std::size_t bytes) {
    const std::size_t s = align64(bytes);
    return (s / 64) % 2 ? s : s + 64;
}

// 64-byte aligned scratch that grows and is kept between layers; large ones on transparent huge pages,
// because the AMX kernels load 16 rows of a tile from 16 different 4 KiB pages otherwise.
class AlignedBuffer {
public:
    AlignedBuffer() = default;
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    ~AlignedBuffer() { std::free(data_); }

    template <class T>
    T* get(std::size_t count) {
        const std::size_t bytes = align64(count * sizeof(T));
        if (bytes > bytes_) {
            std::free(data_);
            data_ = nullptr;
            bytes_ = 0;
            const std::size_t want = align64(bytes + bytes / 4);  // headroom for the next, larger batch
            const bool huge = want >= kHugePage;
            // aligned_alloc wants a size that is a multiple of the alignment.
            const std::size_t size = huge ? (want + kHugePage - 1) / kHugePage * kHugePage : want;
            void* p = std::aligned_alloc(huge ? kHugePage : 64, size);
            if (!p) throw std::bad_alloc();
            if (huge) madvise(p, size, MADV_HUGEPAGE);
            data_ = static_cast<std::byte*>(p);
            bytes_ = want;
        }
        return reinterpret_cast<T*>(data_);
    }

private:
    static constexpr std::size_t kHugePage = 2u << 20;
    std::byte* data_ = nullptr;
    std::size_t bytes_ = 0;
};

struct alignas(64) Counter {
    std::atomic<int> next{0};
};

// Scheduling granularity: about this many jobs per thread in the memory-bound phases keeps the
// threads' finishing times within a small fraction of the phase.
constexpr int kJobsPerThread = 16;

}  // namespace

class MoeRunner::Job : public PoolJob {
public:
    struct Active {
        int expert, firstRow, rows;
        bool gemm;
    };
    struct GateUpJob {
        int active, firstPanel, panelCount;
    };
    struct DownJob {
        int firstPanel, panelCount;
    };

    explicit Job(int nodes)
        : partialBuffers(static_cast<std::size_t>(nodes)), nextB(static_cast<std::size_t>(nodes)),
          nextD(static_cast<std::size_t>(nodes)), partial(static_cast<std::size_t>(nodes)) {}

    // One token (decode): the caller converts x in prepare(), and each expert's activation row is
    // converted by whichever thread finishes that expert's last gate/up piece and then marked ready,
    // so no barrier is left: a worker out of gate/up pieces starts down, and before each expert's
    // share of a down piece waits until that expert is ready (gate/up hands out experts in the order
    // down takes them, so by then it nearly always is). A decode part is ~0.1-0.3 ms, and a barrier of
    // 16 threads with the phase tail before it cost microseconds.
    void run(const WorkerContext& w) override {
        PhaseClock clock{profile};
        if (!oneToken) {
            phaseA();
            clock.lap(spent.convertX);
            barrier.arriveAndWait();
            clock.lap(spent.barriers);
        }
        phaseB(w);
        clock.lap(spent.gateUp);
        if (!oneToken) {
            barrier.arriveAndWait();
            clock.lap(spent.barriers);
        }
        if (!oneToken) {
            phaseC();
            clock.lap(spent.convertAct);
            barrier.arriveAndWait();
            clock.lap(spent.barriers);
        }
        phaseD(w);
        clock.lap(spent.down);
        if (layer->nodes() > 1) {
            barrier.arriveAndWait();
            clock.lap(spent.barriers);
            phaseE();
            clock.lap(spent.reduce);
        }
    }

    // Nanoseconds per phase, summed over threads (MoeOptions::profilePhases).
    struct Spent {
        std::atomic<long long> convertX{0}, gateUp{0}, convertAct{0}, down{0}, reduce{0}, barriers{0};
    };
    struct PhaseClock {
        bool on;
        std::chrono::steady_clock::time_point last = on ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
        void lap(std::atomic<long long>& into) {
            if (!on) return;
            const auto now = std::chrono::steady_clock::now();
            into.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count(), std::memory_order_relaxed);
            last = now;
        }
    };
    bool profile = false;
    Spent spent;

    void finished() noexcept override {
        if (onFinished) onFinished();
    }

    // Dynamic share-out of [0, n) in chunks: calls f(i) for each item this worker takes.
    template <class F>
    static void forEachItem(std::atomic<int>& counter, int n, int chunk, F&& f) {
        for (;;) {
            const int begin = counter.fetch_add(chunk, std::memory_order_relaxed);
            if (begin >= n) return;
            const int end = std::min(n, begin + chunk);
            for (int i = begin; i < end; ++i) f(i);
        }
    }

    void phaseA() {
        const int outRows = in.zeroOut ? in.tokens : 0;
        const int zeroRows = (layer->nodes() - 1) * in.tokens;
        forEachItem(nextA, rows + outRows + zeroRows, chunkA, [&](int i) {
            if (i < rows)
                convertX(i);
            else if (i < rows + outRows)
                zeroOutRow(i - rows);
            else
                zeroPartial(1 + (i - rows - outRows) / in.tokens, (i - rows - outRows) % in.tokens);
        });
    }

    void zeroOutRow(int token) {
        std::memset(in.out + static_cast<std::size_t>(token) * in.outStride, 0, layer->layout().hidden * sizeof(float));
    }

    void zeroPartial(int node, int token) {
        const int hidden = layer->layout().hidden;
        std::memset(partial[node] + static_cast<std::size_t>(token) * hidden, 0, hidden * sizeof(float));
    }

    void convertX(int i) {
        const ExpertLayout& l = layer->layout();
        const float* x = in.x + static_cast<std::size_t>(rowToken[i]) * in.xStride;
        if (l.type != ExpertType::BF16)
            activationToInt8(x, l.hidden, l.hiddenPad, reinterpret_cast<std::int8_t*>(xq + i * xRowBytes), xScale + i,
                             xSums + static_cast<std::size_t>(i) * xGroups);
        else if (splitBf16)
            activationToBf16Split(x, l.hidden, l.hiddenPad, xq + i * xRowBytes);
        else
            activationToFloat(x, l.hidden, l.hiddenPad, reinterpret_cast<float*>(xq + i * xRowBytes));
    }

    // The caller's share of phase A for one token: convert x once, copy it to every row (an expert
    // may hold several rows of the one token when routing repeats it, so rows are not shared).
    void prepareOneToken() {
        convertX(0);
        const bool scaled = layer->layout().type != ExpertType::BF16;  // BF16 rows carry no scale or sums
        for (int i = 1; i < rows; ++i) {
            std::memcpy(xq + i * xRowBytes, xq, xRowBytes);
            if (!scaled) continue;
            xScale[i] = xScale[0];
            std::memcpy(xSums + static_cast<std::size_t>(i) * xGroups, xSums, static_cast<std::size_t>(xGroups) * sizeof(std::int32_t));
        }
        for (int n = 1; n < layer->nodes(); ++n) zeroPartial(n, 0);
        if (in.zeroOut) zeroOutRow(0);
    }

    // Like forEachItem one item at a time, but while more than `reserve` items are left a worker claims
    // its next item before it runs the current one, f(item, next), so the kernel can prefetch the next
    // item's first bytes as it finishes (next is -1 when there is none). The last `reserve` items go
    // one at a time, so no worker holds one back while others run out of work.
    template <class F>
    static void forEachItemAhead(std::atomic<int>& counter, int n, int reserve, F&& f) {
        int item = counter.fetch_add(1, std::memory_order_relaxed);
        while (item < n) {
            int next = -1;
            if (item < n - reserve) {
                next = counter.fetch_add(1, std::memory_order_relaxed);
                if (next >= n) next = -1;
            }
            f(item, next);
            item = next >= 0 ? next : counter.fetch_add(1, std::memory_order_relaxed);
        }
    }

    void phaseB(const WorkerContext& w) {
        const ExpertLayout& l = layer->layout();
        const NodeShare& share = layer->share(w.node);
        const auto& jobs = gateUpJobs[w.node];
        auto panelsOf = [&](const GateUpJob& job) {
            return layer->expert(w.node, active[job.active].expert).gateUp +
                   static_cast<std::size_t>(job.firstPanel - share.firstPanel) * l.gateUpPanelBytes;
        };
        forEachItemAhead(nextB[w.node].next, static_cast<int>(jobs.size()), reserveAhead[w.node], [&](int j, int next) {
            const GateUpJob& job = jobs[j];
            const Active& a = active[job.active];
            GateUpCall call;
            call.layout = &l;
            call.panels = panelsOf(job);
            if (next >= 0) call.nextPanels = panelsOf(jobs[next]);
            call.firstPanel = job.firstPanel;
            call.panelCount = job.panelCount;
            call.x = {xq + a.firstRow * xRowBytes, xRowBytes, xLoOffset, xScale + a.firstRow,
                      xSums + static_cast<std::size_t>(a.firstRow) * xGroups, static_cast<std::size_t>(xGroups), a.rows};
            call.act = act + static_cast<std::size_t>(a.firstRow) * l.interPad;
            call.actStride = static_cast<std::size_t>(l.interPad);
            call.epilogue = layer->gateUpEpilogue(a.expert);
            kernels->pick(l.type, a.gemm).gateUp(call);
            if (oneToken && pendingGateUp[job.active].next.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                for (int r = a.firstRow; r < a.firstRow + a.rows; ++r) convertAct(r);
                pendingGateUp[job.active].next.store(kConverted, std::memory_order_release);
            }
        });
    }

    void waitConverted(std::size_t a) const {
        while (pendingGateUp[a].next.load(std::memory_order_acquire) != kConverted) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#else
            std::this_thread::yield();
#endif
        }
    }

    // Float32 BF16 activations need no conversion: down reads the intermediate rows in place.
    void phaseC() {
        const ExpertLayout& l = layer->layout();
        if (l.type == ExpertType::BF16 && !splitBf16) return;
        forEachItem(nextC, rows, chunkA, [&](int i) { convertAct(i); });
    }

    void convertAct(int i) {
        const ExpertLayout& l = layer->layout();
        if (l.type == ExpertType::BF16 && !splitBf16) return;
        const float* a = act + static_cast<std::size_t>(i) * l.interPad;
        if (l.type == ExpertType::BF16)
            activationToBf16Split(a, l.interPad, l.interPad, aq + i * aRowBytes);
        else
            activationToInt8(a, l.interPad, l.interPad, reinterpret_cast<std::int8_t*>(aq + i * aRowBytes), aScale + i,
                             aSums + static_cast<std::size_t>(i) * aGroups);
    }

    void phaseD(const WorkerContext& w) {
        const ExpertLayout& l = layer->layout();
        const NodeShare& share = layer->share(w.node);
        const auto& jobs = downJobs[w.node];
        forEachItemAhead(nextD[w.node].next, static_cast<int>(jobs.size()), reserveAhead[w.node], [&](int j, int next) {
            for (std::size_t ai = 0; ai < active.size(); ++ai) {
                const Active& a = active[ai];
                if (oneToken) waitConverted(ai);
                const ExpertShare& e = layer->expert(w.node, a.expert);
                DownCall call;
                call.layout = &l;
                call.chunks = e.down;
                call.firstChunk = share.firstChunk;
                call.chunkCount = share.chunkCount;
                call.firstPanel = jobs[j].firstPanel;
                call.panelCount = jobs[j].panelCount;
                call.rowScales = e.downScales;
                call.act = {aq + a.firstRow * aRowBytes, aRowBytes, aLoOffset, aScale + a.firstRow,
                            aSums + static_cast<std::size_t>(a.firstRow) * aGroups, static_cast<std::size_t>(aGroups), a.rows};
                call.dest = destRows[w.node].data() + a.firstRow;
                call.weight = rowWeight.data() + a.firstRow;
                if (ai + 1 < active.size()) {
                    call.nextChunks = layer->expert(w.node, active[ai + 1].expert).down;
                } else if (next >= 0) {
                    call.nextChunks = layer->expert(w.node, active[0].expert).down;
                    call.nextPanelOffset = jobs[next].firstPanel - jobs[j].firstPanel;
                }
                kernels->pick(l.type, a.gemm).down(call);
                // Down's bias, weight * bias per row, once (node 0, which adds into `out`).
                if (const float* bias = layer->downBias(a.expert); bias && w.node == 0) {
                    const int n0 = call.firstPanel * kPanelRows, n1 = std::min(l.hidden, (call.firstPanel + call.panelCount) * kPanelRows);
                    for (int r = 0; r < a.rows; ++r) {
                        float* d = call.dest[r];
                        const float wr = call.weight[r];
                        for (int n = n0; n < n1; ++n) d[n] += wr * bias[n];
                    }
                }
            }
        });
    }

    void phaseE() {
        const int hidden = layer->layout().hidden;
        constexpr int kColumns = 1024;
        const int blocks = (hidden + kColumns - 1) / kColumns;
        forEachItem(nextE, in.tokens * blocks, 1, [&](int i) {
            const int t = i / blocks, c0 = (i % blocks) * kColumns, c1 = std::min(hidden, c0 + kColumns);
            float* o = in.out + static_cast<std::size_t>(t) * in.outStride;
            for (int n = 1; n < layer->nodes(); ++n) {
                const float* p = partial[n] + static_cast<std::size_t>(t) * hidden;
                for (int c = c0; c < c1; ++c) o[c] += p[c];
            }
        });
    }

    // The evaluation being prepared or run.
    std::function<void()> onFinished;
    const PackedMoeLayer* layer = nullptr;
    const ExpertKernels* kernels = nullptr;
    MoeInput in;
    int rows = 0;
    int chunkA = 1;
    std::vector<int> count, fill, pieces;  // prepare()'s scratch, kept so a decode step allocates nothing
    std::vector<int> rowToken;
    std::vector<float> rowWeight;
    std::vector<Active> active;
    std::vector<std::vector<GateUpJob>> gateUpJobs;
    std::vector<int> reserveAhead;  // per node: forEachItemAhead's reserve (1 << 30: never claims ahead)
    std::vector<std::vector<DownJob>> downJobs;
    std::vector<std::vector<float*>> destRows;

    std::byte* xq = nullptr;
    float* xScale = nullptr;
    std::int32_t* xSums = nullptr;
    float* act = nullptr;
    std::byte* aq = nullptr;
    float* aScale = nullptr;
    std::int32_t* aSums = nullptr;
    bool splitBf16 = false;  // BF16 experts with kernels that take hi/lo activations
    std::size_t xRowBytes = 0, aRowBytes = 0;
    std::size_t xLoOffset = 0, aLoOffset = 0;
    int xGroups = 0, aGroups = 0;

    AlignedBuffer xqBuffer, xScaleBuffer, xSumsBuffer, actBuffer, aqBuffer, aScaleBuffer, aSumsBuffer;
    std::vector<AlignedBuffer> partialBuffers;

    alignas(64) std::atomic<int> nextA{0};
    alignas(64) std::atomic<int> nextC{0};
    alignas(64) std::atomic<int> nextE{0};
    std::vector<Counter> nextB, nextD;
    std::vector<float*> partial;
    SpinBarrier barrier;
    bool oneToken = false;
    // Per active expert: gate/up pieces not finished yet, then kConverted once its row is converted.
    static constexpr int kConverted = -1;
    std::unique_ptr<Counter[]> pendingGateUp;
    std::size_t pendingCapacity = 0;
};

MoeRunner::MoeRunner(ExpertPool& pool, const MoeOptions& options)
    : pool_(pool), options_(options), kernels_(&kernelsFor(options.isa ? *options.isa : selectedIsa())),
      job_(std::make_unique<Job>(pool.nodes())) {}

MoeRunner::~MoeRunner() {
    if (ticket_) {
        try {
            pool_.wait(*ticket_);
        } catch (...) {
            // The job's own error has no one left to report to; the pool is consistent again.
        }
    }
}

void MoeRunner::prepare(const PackedMoeLayer& layer, const MoeInput& in, bool callerJoins) {
    if (ticket_) throw Error("this MoeRunner still runs a layer; wait() for it first, or use a second runner");
    if (layer.nodes() != pool_.nodes())
        throw Error("the MoE layer was arranged for " + std::to_string(layer.nodes()) + " NUMA node(s) but the pool has " +
                    std::to_string(pool_.nodes()) + "; build the PackedMoeLayer with this pool's topology()");
    if (in.tokens < 0 || (in.tokens > 0 && (in.topK <= 0 || !in.x || !in.out || !in.expertIds || !in.weights)))
        throw Error("MoE layer input needs tokens >= 0, topK >= 1 and the x, out, expert id and weight arrays");
    const ExpertLayout& l = layer.layout();
    const int experts = layer.experts();
    const int nodes = layer.nodes();
    Job& j = *job_;
    j.layer = &layer;
    j.kernels = kernels_;
    j.profile = options_.profilePhases;
    j.in = in;
    const int entries = in.tokens * in.topK;

    // Group the (token, slot) rows by expert: a counting sort, largest experts first so that their
    // long GEMM jobs start early. Slots computed elsewhere (kComputedElsewhere) are no rows.
    std::vector<int>& count = j.count;
    count.assign(static_cast<std::size_t>(experts), 0);
    j.rows = 0;
    for (int s = 0; s < entries; ++s) {
        const int e = in.expertIds[s];
        if (e == kComputedElsewhere) continue;
        if (e < 0 || e >= experts)
            throw Error("token " + std::to_string(s / in.topK) + " is routed to expert " + std::to_string(e) +
                        ", outside 0.." + std::to_string(experts - 1));
        ++count[e];
        ++j.rows;
    }
    j.active.clear();
    for (int e = 0; e < experts; ++e)
        if (count[e]) j.active.push_back({e, 0, count[e], false});
    std::stable_sort(j.active.begin(), j.active.end(), [](const Job::Active& a, const Job::Active& b) { return a.rows > b.rows; });
    const int threshold = options_.gemmMinRows > 0 ? options_.gemmMinRows : kernels_->gemmMinRows[static_cast<int>(l.type)];
    std::vector<int>& fill = j.fill;
    fill.assign(static_cast<std::size_t>(experts), 0);
    int at = 0;
    stats_ = {static_cast<int>(j.active.size()), 0, j.rows};
    for (auto& a : j.active) {
        a.firstRow = at;
        fill[a.expert] = at;
        at += a.rows;
        a.gemm = options_.kernels == KernelChoice::Gemm || (options_.kernels == KernelChoice::Auto && a.rows >= threshold);
        stats_.gemmExperts += a.gemm;
    }
    j.rowToken.resize(static_cast<std::size_t>(j.rows));
    j.rowWeight.resize(static_cast<std::size_t>(j.rows));
    for (int s = 0; s < entries; ++s) {
        if (in.expertIds[s] == kComputedElsewhere) continue;
        const int r = fill[in.expertIds[s]]++;
        j.rowToken[r] = s / in.topK;
        j.rowWeight[r] = in.weights[s];
    }

    // Buffers. A split row's lo half starts at whole cache lines (bf16LoOffset), so the two halves
    // together are exactly activationBytes() per column.
    const std::size_t rows = static_cast<std::size_t>(std::max(1, j.rows));
    j.splitBf16 = l.type == ExpertType::BF16 && kernels_->bf16Activations == Bf16Activations::Split;
    j.xLoOffset = j.splitBf16 ? bf16LoOffset(l.hiddenPad) : 0;
    j.aLoOffset = j.splitBf16 ? bf16LoOffset(l.interPad) : 0;
    j.xRowBytes = rowStride(static_cast<std::size_t>(l.hiddenPad) * l.activationBytes());
    j.aRowBytes = rowStride(static_cast<std::size_t>(l.interPad) * l.activationBytes());
    j.xGroups = l.hiddenPad / kActGroup;
    j.aGroups = l.interPad / kActGroup;
    j.xq = j.xqBuffer.get<std::byte>(rows * j.xRowBytes);
    j.xScale = j.xScaleBuffer.get<float>(rows);
    j.xSums = j.xSumsBuffer.get<std::int32_t>(rows * j.xGroups);
    j.act = j.actBuffer.get<float>(rows * l.interPad);
    if (l.type == ExpertType::BF16 && !j.splitBf16) {
        j.aq = reinterpret_cast<std::byte*>(j.act);
        j.aRowBytes = static_cast<std::size_t>(l.interPad) * sizeof(float);
    } else {
        j.aq = j.aqBuffer.get<std::byte>(rows * j.aRowBytes);
    }
    j.aScale = j.aScaleBuffer.get<float>(rows);
    j.aSums = j.aSumsBuffer.get<std::int32_t>(rows * j.aGroups);
    j.destRows.resize(static_cast<std::size_t>(nodes));
    for (auto& d : j.destRows) d.resize(rows);
    for (int n = 0; n < nodes; ++n) {
        j.partial[n] = n == 0 ? nullptr : j.partialBuffers[n].get<float>(static_cast<std::size_t>(std::max(1, in.tokens)) * l.hidden);
        for (int r = 0; r < j.rows; ++r)
            j.destRows[n][r] = n == 0 ? in.out + static_cast<std::size_t>(j.rowToken[r]) * in.outStride
                                      : j.partial[n] + static_cast<std::size_t>(j.rowToken[r]) * l.hidden;
    }

    // Jobs. Gate/up: (expert, panel range) pieces of about equal cost, a GEMM panel costing in
    // proportion to its rows and a GEMV panel (bound by reading it) the same whatever its rows.
    j.gateUpJobs.resize(static_cast<std::size_t>(nodes));
    j.downJobs.resize(static_cast<std::size_t>(nodes));
    j.reserveAhead.assign(static_cast<std::size_t>(nodes), 0);
    bool anyGemm = false;
    for (const auto& a : j.active) anyGemm |= a.gemm;
    for (int n = 0; n < nodes; ++n) {
        const NodeShare& share = layer.share(n);
        const int nodeThreads = std::max(1, pool_.nodeParticipants(n, callerJoins));
        j.gateUpJobs[n].clear();
        j.downJobs[n].clear();
        // Claiming ahead is for GEMV pieces (decode), streamed once each; 1 << 30: never.
        j.reserveAhead[n] = !anyGemm ? nodeThreads : 1 << 30;
        if (share.chunkCount == 0) continue;
        auto cost = [](const Job::Active& a) { return a.gemm ? std::max(1, a.rows / 4) : 1; };
        long total = 0;
        for (const auto& a : j.active) total += static_cast<long>(share.panelCount) * cost(a);
        const long target = std::max<long>(1, total / (kJobsPerThread * nodeThreads));
        for (int ai = 0; ai < static_cast<int>(j.active.size()); ++ai) {
            const int piece = static_cast<int>(std::clamp<long>(target / cost(j.active[ai]), 1, share.panelCount));
            for (int p = 0; p < share.panelCount; p += piece)
                j.gateUpJobs[n].push_back({ai, share.firstPanel + p, std::min(piece, share.panelCount - p)});
        }
        // Down: output row ranges, each looping over every active expert. With GEMM experts the ranges
        // are few and large (each job re-reads the experts' activation rows) and even (AMX pairs panels).
        // Decode's down reads each chunk's pieces of a job's panels as one run (kernels_avx512_impl.h,
        // downRuns), so its jobs are fewer and longer than gate/up's: 8 per thread, which on the GPU
        // machine's Xeon read as fast as the 16 of one panel each before, and on Zen 4 faster
        // (Tuning::downJobsPerThread; docs/BENCHMARKS.md).
        const int downJobsPerThread = tuning().downJobsPerThread;
        int range = anyGemm ? (l.downPanels + 2 * nodeThreads - 1) / (2 * nodeThreads)
                            : std::max(1, l.downPanels / (downJobsPerThread * nodeThreads));
        if (anyGemm && range > 1) range += range % 2;
        for (int q = 0; q < l.downPanels; q += range) j.downJobs[n].push_back({q, std::min(range, l.downPanels - q)});
    }

    j.oneToken = in.tokens == 1;
    if (j.oneToken) {
        if (j.active.size() > j.pendingCapacity) {
            j.pendingGateUp = std::make_unique<Counter[]>(j.active.size());
            j.pendingCapacity = j.active.size();
        }
        // Counted in plain ints (hundreds of pieces), then stored once per expert.
        std::vector<int>& pieces = j.pieces;
        pieces.assign(j.active.size(), 0);
        for (const auto& jobs : j.gateUpJobs)
            for (const auto& g : jobs) ++pieces[static_cast<std::size_t>(g.active)];
        for (std::size_t a = 0; a < j.active.size(); ++a) {
            j.pendingGateUp[a].next.store(pieces[a], std::memory_order_relaxed);
            if (pieces[a] == 0) j.oneToken = false;  // nobody would convert it
        }
        if (j.oneToken) j.prepareOneToken();
    }
    j.chunkA = std::max(1, j.rows / (4 * pool_.participants(callerJoins)));
    j.nextA.store(0, std::memory_order_relaxed);
    j.nextC.store(0, std::memory_order_relaxed);
    j.nextE.store(0, std::memory_order_relaxed);
    for (auto& c : j.nextB) c.next.store(0, std::memory_order_relaxed);
    for (auto& c : j.nextD) c.next.store(0, std::memory_order_relaxed);
    j.barrier.reset(pool_.participants(callerJoins));
}

void MoeRunner::zeroIfIdle(const MoeInput& in) const {
    if (job_->rows > 0 || !in.zeroOut) return;
    for (int t = 0; t < in.tokens; ++t)
        std::memset(in.out + static_cast<std::size_t>(t) * in.outStride, 0, static_cast<std::size_t>(job_->layer->layout().hidden) * sizeof(float));
}

void MoeRunner::run(const PackedMoeLayer& layer, const MoeInput& input) {
    prepare(layer, input, true);
    zeroIfIdle(input);
    job_->onFinished = nullptr;
    if (job_->rows > 0) pool_.run(*job_);
}

void MoeRunner::submit(const PackedMoeLayer& layer, const MoeInput& input) {
    prepare(layer, input, false);
    zeroIfIdle(input);
    job_->onFinished = nullptr;
    if (job_->rows > 0) ticket_ = pool_.submit(*job_);
}

void MoeRunner::enqueueJoined(const PackedMoeLayer& layer, const MoeInput& input, std::function<void()> onFinished) {
    prepare(layer, input, true);  // before the hook changes: a runner still in flight throws here
    zeroIfIdle(input);
    job_->onFinished = std::move(onFinished);
    if (job_->rows > 0) {
        ticket_ = pool_.enqueueJoined(*job_);
    } else if (job_->onFinished) {
        job_->onFinished();
    }
}

MoePhaseSeconds MoeRunner::phaseSeconds() const {
    const auto& s = job_->spent;
    auto sec = [](const std::atomic<long long>& ns) { return static_cast<double>(ns.load()) * 1e-9; };
    return {sec(s.convertX), sec(s.gateUp), sec(s.convertAct), sec(s.down), sec(s.reduce), sec(s.barriers)};
}

void MoeRunner::resetPhaseSeconds() {
    auto& s = job_->spent;
    for (auto* a : {&s.convertX, &s.gateUp, &s.convertAct, &s.down, &s.reduce, &s.barriers}) a->store(0);
}

bool MoeRunner::done() const { return !ticket_ || pool_.done(*ticket_); }

void MoeRunner::wait() {
    if (!ticket_) return;
    const auto t = *ticket_;
    ticket_.reset();
    pool_.wait(t);
}

}  // namespace tandem::cpu
