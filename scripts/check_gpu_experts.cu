// The routed-expert kernels (engine/cuda/expert_kernels.cu) against a float64 reference, then timed, on
// the GPU machine. Random experts of real shapes are packed by cpu::packExpert for each type (bf16, int8,
// int4), the reference multiplies the weights unpackExpertRow reads back (exactly what the kernels
// must reproduce) by the float32 activations in float64, and the kernels' outputs are poisoned with
// NaN before every run. Cases: decode (1 and 3 tokens; its kernels launched one after the other and
// chained) and prefill (512 tokens, and 5 tokens for tiny groups), = and +=, prefill with 2 and 3 bf16
// terms per activation; some experts of each layer are
// "on the CPU" (null in the expert table), so their slots must be skipped. The routing is grouped on
// the GPU (launchGroupRoutes) and compared with a grouping done here.
// Bounds (relative L2 error per token row, the worst row reported):
//   decode, float32 activations                    1e-5  (float32 sums of exact products)
//   prefill, 3 bf16 terms (~24 bits of x)          1e-5
//   prefill, 2 bf16 terms (~16 bits of x)          3e-5  (expected ~5e-6, as the CPU's split bf16)
// Then each shape and type is timed: decode of one token (steps in a CUDA graph, as the runner takes
// them; experts rotated so that L2 never holds the next step's), prefill of 512 and 2048 tokens (calls
// back to back), against the H200's roofline. The last lines are a
// table. Exits 1 when any error is above its bound. Build and run on the GPU machine:
//   nvcc -std=c++20 -arch=sm_90 -O3 -Iengine -Iengine/include scripts/check_gpu_experts.cu \
//     BUILD/engine/libtandem_engine.a -lnuma -ldl -lpthread -o /tmp/check-gpu-experts && /tmp/check-gpu-experts
// (BUILD: a configured build tree whose tandem_engine is built; the packer's sources alone no longer link).
// gpt-oss shapes (epilogue) add random biases per expert and the clamped SwiGLU (cuda::ExpertEpilogue) to
// the kernels and the reference alike; every shape also checks one token in the batch decode's router
// kernel writes (a group per slot, ExpertPairs::groupExpert). MXFP4 (gpt-oss) runs on INT4's kernels with
// its nibbles as e2m1 values and bf16 scales (fp4Pair).
// Flags: --check-only (no timings), --shapes NAME,NAME (a subset of the shapes below).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/expert_pack.h"
#include "cuda/expert_kernels.cu"
#include "cuda/expert_prefill.cu"

using namespace tandem;
using io::ExpertType;

namespace {

struct Shape {
    const char* name;
    int hidden, inter, experts, topK;
    bool epilogue = false;  // gpt-oss: random biases and the clamped SwiGLU (cuda::ExpertEpilogue)
};

// Each model's own expert count and top-k; "awkward" has no dimension a multiple of anything.
const Shape kShapes[] = {{"qwen3-30b-a3b", 2048, 768, 128, 8},
                         {"deepseek-v2-lite", 2048, 1408, 64, 6},
                         {"deepseek-v3", 7168, 2048, 256, 8},
                         {"awkward", 200, 136, 128, 8},
                         {"gpt-oss-20b", 2880, 2880, 32, 4, true},
                         {"awkward-gpt-oss", 200, 136, 32, 4, true}};

constexpr double kHbmBytesPerSecond = 4.3e12;  // H200, device-to-device copy measured here
constexpr double kFp32Flops = 60e12;           // CUDA cores, fp32 FMA
constexpr double kTensorFlops = 790e12;        // dense bf16 tensor cores, measured with cuBLAS

constexpr double kDecodeBound = 1e-5;
double prefillBound(int splits) { return splits == 3 ? 1e-5 : 3e-5; }

template <class F>
void parallelFor(int n, F f) {
    const int threads = std::max(1, std::min<int>(n, static_cast<int>(std::thread::hardware_concurrency())));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (int i = t; i < n; i += threads) f(i);
        });
    for (auto& th : pool) th.join();
}

struct alignas(64) Line {
    std::byte b[64];
};

// One expert's float32 weights: gate, up [inter][hidden], down [hidden][inter].
struct ExpertWeights {
    std::vector<float> gate, up, down;
};

ExpertWeights randomExpert(const Shape& s, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::size_t n = static_cast<std::size_t>(s.hidden) * s.inter;
    ExpertWeights w{std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
    // Unit-variance activations in, unit-variance sums out.
    const float inScale = 1.0f / std::sqrt(static_cast<float>(s.hidden)), outScale = 1.0f / std::sqrt(static_cast<float>(s.inter));
    for (auto& v : w.gate) v = normal(rng) * inScale;
    for (auto& v : w.up) v = normal(rng) * inScale;
    for (auto& v : w.down) v = normal(rng) * outScale;
    return w;
}

// The packed bytes and the weights as the kernels see them (dequantized by unpackExpertRow).
struct PackedExpert {
    std::vector<Line> bytes;
    ExpertWeights seen;
};

PackedExpert pack(const io::ExpertLayout& l, const ExpertWeights& w) {
    PackedExpert p;
    p.bytes.resize(l.expertBytes / sizeof(Line));
    auto* dst = reinterpret_cast<std::byte*>(p.bytes.data());
    auto reader = [](const std::vector<float>& m, int cols) {
        return [&m, cols](std::int64_t row, float* out) { std::memcpy(out, m.data() + row * cols, cols * sizeof(float)); };
    };
    cpu::packExpert(l, {reader(w.gate, l.hidden), reader(w.up, l.hidden), reader(w.down, l.inter)}, dst);
    p.seen = {std::vector<float>(w.gate.size()), std::vector<float>(w.up.size()), std::vector<float>(w.down.size())};
    for (int r = 0; r < l.inter; ++r) {
        cpu::unpackExpertRow(l, dst, cpu::ExpertMatrix::Gate, r, p.seen.gate.data() + static_cast<std::size_t>(r) * l.hidden);
        cpu::unpackExpertRow(l, dst, cpu::ExpertMatrix::Up, r, p.seen.up.data() + static_cast<std::size_t>(r) * l.hidden);
    }
    for (int r = 0; r < l.hidden; ++r)
        cpu::unpackExpertRow(l, dst, cpu::ExpertMatrix::Down, r, p.seen.down.data() + static_cast<std::size_t>(r) * l.inter);
    return p;
}

template <class T>
T* upload(const std::vector<T>& host) {
    T* p = nullptr;
    TANDEM_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(host.size(), 1) * sizeof(T)));
    if (!host.empty()) TANDEM_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

template <class T>
std::vector<T> download(const T* device, std::size_t count) {
    std::vector<T> host(count);
    TANDEM_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
}

// A layer's experts in device memory: expert e is distinct expert e % D, each at its own address.
struct Pool {
    std::uint8_t* bytes = nullptr;
    std::vector<const std::uint8_t*> all;   // every expert
    std::vector<const std::uint8_t*> some;  // experts e % 16 == 5 "on the CPU" (null)
    const std::uint8_t** allTable = nullptr;
    const std::uint8_t** someTable = nullptr;
};

Pool makePool(const io::ExpertLayout& l, const Shape& s, const std::vector<PackedExpert>& distinct) {
    Pool p;
    TANDEM_CUDA_CHECK(cudaMalloc(&p.bytes, l.expertBytes * s.experts));
    for (int e = 0; e < s.experts; ++e) {
        std::uint8_t* at = p.bytes + l.expertBytes * e;
        const int d = e % static_cast<int>(distinct.size());
        if (e < static_cast<int>(distinct.size()))
            TANDEM_CUDA_CHECK(cudaMemcpy(at, distinct[d].bytes.data(), l.expertBytes, cudaMemcpyHostToDevice));
        else
            TANDEM_CUDA_CHECK(cudaMemcpy(at, p.bytes + l.expertBytes * d, l.expertBytes, cudaMemcpyDeviceToDevice));
        p.all.push_back(at);
        p.some.push_back(e % 16 == 5 ? nullptr : at);
    }
    p.allTable = const_cast<const std::uint8_t**>(upload(p.all));
    p.someTable = const_cast<const std::uint8_t**>(upload(p.some));
    return p;
}

void freePool(Pool& p) {
    cudaFree(p.bytes);
    cudaFree(p.allTable);
    cudaFree(p.someTable);
}

struct Routing {
    int tokens = 0, topK = 0;
    std::vector<int> ids;
    std::vector<float> weights;
};

// Every token picks topK distinct experts uniformly; positive weights summing to 1.
Routing randomRouting(int tokens, const Shape& s, std::mt19937_64& rng) {
    Routing r{tokens, s.topK, std::vector<int>(static_cast<std::size_t>(tokens) * s.topK),
              std::vector<float>(static_cast<std::size_t>(tokens) * s.topK)};
    std::vector<int> perm(s.experts);
    std::uniform_real_distribution<float> uniform(0.05f, 1.0f);
    for (int t = 0; t < tokens; ++t) {
        for (int e = 0; e < s.experts; ++e) perm[e] = e;
        float sum = 0.0f;
        for (int k = 0; k < s.topK; ++k) {
            std::swap(perm[k], perm[k + std::uniform_int_distribution<int>(0, s.experts - 1 - k)(rng)]);
            r.ids[t * s.topK + k] = perm[k];
            sum += r.weights[t * s.topK + k] = uniform(rng);
        }
        for (int k = 0; k < s.topK; ++k) r.weights[t * s.topK + k] /= sum;
    }
    return r;
}

// The routing on the GPU and the batch launchGroupRoutes makes of it.
struct DeviceBatch {
    int* ids = nullptr;
    float* weights = nullptr;
    int *groupStart = nullptr, *pairToken = nullptr, *pairGroup = nullptr, *slotPair = nullptr;
    float* pairWeight = nullptr;
    cuda::ExpertPairs pairs;
};

DeviceBatch makeBatch(const Routing& r, const Shape& s, const std::uint8_t* const* table, cudaStream_t stream) {
    DeviceBatch b;
    b.ids = upload(r.ids);
    b.weights = upload(r.weights);
    const std::size_t n = r.ids.size();
    TANDEM_CUDA_CHECK(cudaMalloc(&b.groupStart, (s.experts + 1) * sizeof(int)));
    TANDEM_CUDA_CHECK(cudaMalloc(&b.pairToken, n * sizeof(int)));
    TANDEM_CUDA_CHECK(cudaMalloc(&b.pairGroup, n * sizeof(int)));
    TANDEM_CUDA_CHECK(cudaMalloc(&b.slotPair, n * sizeof(int)));
    TANDEM_CUDA_CHECK(cudaMalloc(&b.pairWeight, n * sizeof(float)));
    b.pairs = cuda::launchGroupRoutes(b.ids, b.weights, r.tokens, r.topK, table, s.experts, b.groupStart, b.pairToken,
                                      b.pairGroup, b.pairWeight, b.slotPair, stream);
    return b;
}

void freeBatch(DeviceBatch& b) {
    for (void* p : {static_cast<void*>(b.ids), static_cast<void*>(b.weights), static_cast<void*>(b.groupStart),
                    static_cast<void*>(b.pairToken), static_cast<void*>(b.pairGroup), static_cast<void*>(b.slotPair),
                    static_cast<void*>(b.pairWeight)})
        cudaFree(p);
}

// The grouping done here: groups in expert order, pairs in token-then-slot order. Empty string if the
// GPU's equals it, else what differs.
std::string checkGrouping(const Routing& r, const std::vector<const std::uint8_t*>& table, const DeviceBatch& b) {
    const int experts = static_cast<int>(table.size());
    std::vector<int> start(experts + 1, 0);
    for (int e : r.ids)
        if (table[e]) ++start[e + 1];
    for (int e = 0; e < experts; ++e) start[e + 1] += start[e];
    std::vector<int> cursor(start.begin(), start.end() - 1), token(r.ids.size(), -1), group(r.ids.size(), -1),
        slot(r.ids.size(), -1);
    std::vector<float> weight(r.ids.size(), 0.0f);
    for (std::size_t i = 0; i < r.ids.size(); ++i) {
        const int e = r.ids[i];
        if (!table[e]) continue;
        const int pos = cursor[e]++;
        token[pos] = static_cast<int>(i) / r.topK;
        group[pos] = e;
        weight[pos] = r.weights[i];
        slot[i] = pos;
    }
    const int pairs = start[experts];
    if (download(b.groupStart, experts + 1) != start) return "groupStart differs";
    auto gotToken = download(b.pairToken, pairs);
    auto gotGroup = download(b.pairGroup, pairs);
    auto gotWeight = download(b.pairWeight, pairs);
    if (!std::equal(gotToken.begin(), gotToken.end(), token.begin())) return "pairToken differs";
    if (!std::equal(gotGroup.begin(), gotGroup.end(), group.begin())) return "pairGroup differs";
    if (!std::equal(gotWeight.begin(), gotWeight.end(), weight.begin())) return "pairWeight differs";
    if (download(b.slotPair, r.ids.size()) != slot) return "slotPair differs";
    return "";
}

// Dot products in float64 with four sums (so the loop pipelines).
double dot(const float* w, const float* x, int n) {
    double s[4] = {};
    int k = 0;
    for (; k + 4 <= n; k += 4)
        for (int j = 0; j < 4; ++j) s[j] += static_cast<double>(w[k + j]) * x[k + j];
    for (; k < n; ++k) s[0] += static_cast<double>(w[k]) * x[k];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

double dotD(const float* w, const double* x, int n) {
    double s[4] = {};
    int k = 0;
    for (; k + 4 <= n; k += 4)
        for (int j = 0; j < 4; ++j) s[j] += static_cast<double>(w[k + j]) * x[k + j];
    for (; k < n; ++k) s[0] += static_cast<double>(w[k]) * x[k];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

// gpt-oss's biases (model::biasedExpert's layout): gate and up [experts][inter], down [experts][hidden].
struct HostEpilogue {
    std::vector<float> gate, up, down;
    float alpha = 1.702f, limit = 7.0f;
};

// The experts' sum for the given token rows in float64: row i of the result is token rows[i]. With an
// epilogue, each expert's biases and the clamped SwiGLU as model::biasedExpert computes them.
std::vector<double> reference(const Shape& s, const std::vector<PackedExpert>& distinct, const Routing& r,
                              const std::vector<const std::uint8_t*>& table, const std::vector<float>& x, int ldx,
                              const std::vector<int>& rows, const HostEpilogue* ep = nullptr) {
    std::vector<double> want(rows.size() * s.hidden, 0.0);
    parallelFor(static_cast<int>(rows.size()), [&](int i) {
        const int t = rows[i];
        const float* xt = x.data() + static_cast<std::size_t>(t) * ldx;
        std::vector<double> h(s.inter);
        double* out = want.data() + static_cast<std::size_t>(i) * s.hidden;
        for (int k = 0; k < r.topK; ++k) {
            const int e = r.ids[t * r.topK + k];
            if (!table[e]) continue;
            const ExpertWeights& w = distinct[e % distinct.size()].seen;
            for (int j = 0; j < s.inter; ++j) {
                double g = dot(w.gate.data() + static_cast<std::size_t>(j) * s.hidden, xt, s.hidden);
                double u = dot(w.up.data() + static_cast<std::size_t>(j) * s.hidden, xt, s.hidden);
                if (ep) {
                    g += ep->gate[static_cast<std::size_t>(e) * s.inter + j];
                    u += ep->up[static_cast<std::size_t>(e) * s.inter + j];
                    const double gc = std::min<double>(g, ep->limit), uc = std::clamp<double>(u, -ep->limit, ep->limit);
                    h[j] = (uc + 1.0) * gc / (1.0 + std::exp(-ep->alpha * gc));
                } else {
                    h[j] = g / (1.0 + std::exp(-g)) * u;
                }
            }
            const double weight = r.weights[t * r.topK + k];
            for (int n = 0; n < s.hidden; ++n)
                out[n] += weight * (dotD(w.down.data() + static_cast<std::size_t>(n) * s.inter, h.data(), s.inter) +
                                    (ep ? ep->down[static_cast<std::size_t>(e) * s.hidden + n] : 0.0));
        }
    });
    return want;
}

// Relative L2 error per checked row (against the experts' part: prior excluded), the worst one.
struct RowError {
    double error = 0.0;
    int row = -1;
    bool finite = true;
    int badRow = -1;
};

RowError compareRows(const std::vector<float>& got, int ldOut, const std::vector<double>& want, const std::vector<int>& rows,
                     const std::vector<float>* prior, int hidden, int tokens) {
    RowError r;
    for (int t = 0; t < tokens && r.finite; ++t)
        for (int n = 0; n < hidden; ++n)
            if (!std::isfinite(got[static_cast<std::size_t>(t) * ldOut + n])) {
                r.finite = false;
                r.badRow = t;
                break;
            }
    for (std::size_t i = 0; i < rows.size(); ++i) {
        double num = 0.0, den = 0.0;
        for (int n = 0; n < hidden; ++n) {
            const std::size_t at = static_cast<std::size_t>(rows[i]) * ldOut + n;
            const double base = prior ? (*prior)[at] : 0.0;
            const double d = (got[at] - base) - want[i * hidden + n];
            num += d * d;
            den += want[i * hidden + n] * want[i * hidden + n];
        }
        const double e = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
        if (e > r.error || r.row < 0) {
            r.error = e;
            r.row = rows[i];
        }
    }
    return r;
}

int failures = 0;
std::string currentCase;  // named in the error message if a launch fails

void report(const char* shape, const char* type, const char* kernel, int tokens, int splits, bool accumulate,
            const RowError& e, double bound) {
    const bool ok = e.finite && e.error <= bound;
    failures += !ok;
    char what[64];
    std::snprintf(what, sizeof what, "%s%s", kernel, splits ? (splits == 3 ? " x3" : " x2") : "");
    std::printf("%-7s %-17s %-5s %-11s tokens %4d %-2s  worst row %4d  rel L2 %9.2e  bound %.0e", ok ? "ok" : "FAILED",
                shape, type, what, tokens, accumulate ? "+=" : "=", e.row, e.error, bound);
    if (!e.finite) std::printf("  NaN/Inf in output row %d (not written, or NaN computed)", e.badRow);
    std::printf("\n");
}

// Evenly spread token rows (first and last included), at most `count`.
std::vector<int> spreadRows(int tokens, int count) {
    std::vector<int> rows;
    count = std::min(count, tokens);
    for (int i = 0; i < count; ++i) rows.push_back(count == 1 ? 0 : static_cast<int>(static_cast<std::int64_t>(i) * (tokens - 1) / (count - 1)));
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
}

struct Timing {
    double decodeUs = 0, decodeGBs = 0, decodeChainedUs = 0;
    double prefillMs[2][2] = {};  // [512, 2048][splits 2, 3]
    double prefillTflops[2][2] = {};
    double prefillRoofMs[2][2] = {};
};

double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median milliseconds of one call of f, from `runs` measurements of `reps` calls back to back (so the
// GPU never waits for the host), after `warm` untimed calls. f(i) gets the call's index.
template <class F>
double timeMs(int warm, int runs, int reps, cudaStream_t stream, F f) {
    cudaEvent_t a, b;
    TANDEM_CUDA_CHECK(cudaEventCreate(&a));
    TANDEM_CUDA_CHECK(cudaEventCreate(&b));
    int call = 0;
    for (int i = 0; i < warm; ++i) f(call++);
    std::vector<float> ms;
    for (int i = 0; i < runs; ++i) {
        TANDEM_CUDA_CHECK(cudaEventRecord(a, stream));
        for (int r = 0; r < reps; ++r) f(call++);
        TANDEM_CUDA_CHECK(cudaEventRecord(b, stream));
        TANDEM_CUDA_CHECK(cudaEventSynchronize(b));
        float t = 0;
        TANDEM_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t / reps);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return median(ms);
}

// Decode steps as the runner will take them, in a CUDA graph: `steps` calls of enqueue(i) captured
// into one graph, replayed; the median milliseconds per step.
template <class F>
double timeGraphStepMs(int steps, int runs, cudaStream_t stream, F enqueue) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < steps; ++i) enqueue(i);
    TANDEM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    TANDEM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const double ms = timeMs(3, runs, 1, stream, [&](int) { TANDEM_CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    return ms / steps;
}

void runShapeType(const Shape& s, ExpertType type, const std::vector<ExpertWeights>& sources, bool timings,
                  Timing& timing, cudaStream_t stream) {
    const io::ExpertLayout l = io::ExpertLayout::make(type, s.hidden, s.inter);
    const cuda::GpuExpertLayout gl = cuda::gpuExpertLayout(l);
    const char* typeName = io::expertTypeName(type).data();
    std::vector<PackedExpert> distinct(sources.size());
    parallelFor(static_cast<int>(sources.size()), [&](int d) { distinct[d] = pack(l, sources[d]); });
    Pool pool = makePool(l, s, distinct);
    std::mt19937_64 rng(1234 + static_cast<int>(type));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int ldx = (s.hidden + 3) / 4 * 4, ldOut = s.hidden + 5;  // an output stride of its own
    const int maxTokens = 2048;
    std::vector<float> x(static_cast<std::size_t>(maxTokens) * ldx, 0.0f), prior(static_cast<std::size_t>(maxTokens) * ldOut);
    for (int t = 0; t < maxTokens; ++t)
        for (int k = 0; k < s.hidden; ++k) x[static_cast<std::size_t>(t) * ldx + k] = normal(rng);
    for (auto& v : prior) v = normal(rng);
    float* dx = upload(x);
    float* dOut = nullptr;
    TANDEM_CUDA_CHECK(cudaMalloc(&dOut, prior.size() * sizeof(float)));
    const std::size_t scratchBytes =
        std::max(cuda::decodeScratchBytes(gl, maxTokens * s.topK), cuda::prefillScratchBytes(gl, maxTokens, maxTokens * s.topK, s.experts, 3));
    void* scratch = nullptr;
    TANDEM_CUDA_CHECK(cudaMalloc(&scratch, scratchBytes));
    // gpt-oss shapes: random biases per expert (every expert its own, though the weights repeat) and
    // the clamped SwiGLU, in the reference and the kernels alike.
    HostEpilogue hostEp;
    cuda::ExpertEpilogue ep;
    std::vector<float*> epBuffers;
    if (s.epilogue) {
        for (auto* v : {&hostEp.gate, &hostEp.up}) v->resize(static_cast<std::size_t>(s.experts) * s.inter);
        hostEp.down.resize(static_cast<std::size_t>(s.experts) * s.hidden);
        for (auto* v : {&hostEp.gate, &hostEp.up, &hostEp.down})
            for (auto& b : *v) b = 0.5f * normal(rng);
        ep.gateBias = upload(hostEp.gate);
        ep.upBias = upload(hostEp.up);
        ep.downBias = upload(hostEp.down);
        ep.clampedSwiglu = true;
        ep.alpha = hostEp.alpha;
        ep.limit = hostEp.limit;
        epBuffers = {const_cast<float*>(ep.gateBias), const_cast<float*>(ep.upBias), const_cast<float*>(ep.downBias)};
    }

    // Correctness: each case with the table where some experts are "on the CPU".
    const double perTokenFma = 3.0 * s.topK * s.hidden * s.inter;
    struct Case {
        int tokens;
        bool prefill;
    };
    for (const Case c : {Case{1, false}, Case{3, false}, Case{5, true}, Case{512, true}}) {
        const Routing r = randomRouting(c.tokens, s, rng);
        DeviceBatch b = makeBatch(r, s, pool.someTable, stream);
        TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
        const std::string grouping = checkGrouping(r, pool.some, b);
        if (!grouping.empty()) {
            ++failures;
            std::printf("FAILED  %-17s %-5s launchGroupRoutes tokens %d: %s\n", s.name, typeName, c.tokens, grouping.c_str());
        }
        const std::vector<int> rows = spreadRows(c.tokens, std::max(24, static_cast<int>(1.5e10 / perTokenFma)));
        const std::vector<double> want = reference(s, distinct, r, pool.some, x, ldx, rows, s.epilogue ? &hostEp : nullptr);
        // Prefill with 2 and 3 bf16 terms; decode launched one after the other and chained.
        for (const int variant : c.prefill ? std::vector<int>{2, 3} : std::vector<int>{0, 1})
            for (const bool accumulate : {false, true}) {
                const int splits = c.prefill ? variant : 0;
                const bool chained = !c.prefill && variant == 1;
                const char* kernel = c.prefill ? "prefill" : chained ? "decode ch" : "decode";
                std::vector<float> start(static_cast<std::size_t>(c.tokens) * ldOut);
                for (std::size_t i = 0; i < start.size(); ++i) start[i] = accumulate ? prior[i] : NAN;
                TANDEM_CUDA_CHECK(cudaMemcpy(dOut, start.data(), start.size() * sizeof(float), cudaMemcpyHostToDevice));
                TANDEM_CUDA_CHECK(cudaMemset(scratch, 0xff, scratchBytes));  // NaN bf16 and float everywhere
                currentCase = std::string(s.name) + " " + typeName + " " + kernel + (splits ? " x" + std::to_string(splits) : "") +
                              " tokens " + std::to_string(c.tokens) + (accumulate ? " +=" : " =");
                cuda::chain_detail::enabled = chained;
                if (c.prefill)
                    cuda::launchExpertsPrefill(gl, b.pairs, dx, ldx, dOut, ldOut, accumulate, splits, scratch, stream, ep);
                else
                    cuda::launchExpertsDecode(gl, b.pairs, dx, ldx, dOut, ldOut, accumulate, scratch, stream, {}, ep);
                cuda::chain_detail::enabled = false;
                TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
                const std::vector<float> got = download(dOut, start.size());
                const RowError e = compareRows(got, ldOut, want, rows, accumulate ? &prior : nullptr, s.hidden, c.tokens);
                report(s.name, typeName, kernel, c.tokens, splits, accumulate, e, c.prefill ? prefillBound(splits) : kDecodeBound);
            }
        freeBatch(b);
        if (c.tokens == 1) {
            // The batch decode's router kernel writes for a layer the GPU holds (cuda::decodeSlotBatch): a
            // group per slot, its expert named by groupExpert (the routing's ids), which picks the biases.
            const int k = s.topK;
            std::vector<const std::uint8_t*> slotWeights;
            std::vector<int> groupStart, zeros(k, 0), order;
            for (int j = 0; j < k; ++j) {
                slotWeights.push_back(pool.all[static_cast<std::size_t>(r.ids[j])]);
                groupStart.push_back(j);
                order.push_back(j);
            }
            groupStart.push_back(k);
            auto* dSlotWeights = upload(slotWeights);
            int* dGroupStart = upload(groupStart);
            int* dZeros = upload(zeros);
            int* dOrder = upload(order);
            int* dIds = upload(r.ids);
            float* dWeights = upload(r.weights);
            cuda::ExpertPairs sb;
            sb.groups = k;
            sb.weights = dSlotWeights;
            sb.groupStart = dGroupStart;
            sb.pairToken = dZeros;
            sb.pairGroup = dOrder;
            sb.pairWeight = dWeights;
            sb.maxPairs = k;
            sb.slotPair = dOrder;
            sb.groupExpert = dIds;
            sb.tokens = 1;
            sb.topK = k;
            const std::vector<int> row0{0};
            const std::vector<double> wantAll = reference(s, distinct, r, pool.all, x, ldx, row0, s.epilogue ? &hostEp : nullptr);
            const std::vector<float> start(static_cast<std::size_t>(ldOut), NAN);
            TANDEM_CUDA_CHECK(cudaMemcpy(dOut, start.data(), start.size() * sizeof(float), cudaMemcpyHostToDevice));
            TANDEM_CUDA_CHECK(cudaMemset(scratch, 0xff, scratchBytes));
            currentCase = std::string(s.name) + " " + typeName + " decode, a group per slot";
            cuda::launchExpertsDecode(gl, sb, dx, ldx, dOut, ldOut, false, scratch, stream, {}, ep);
            TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
            const std::vector<float> got = download(dOut, start.size());
            report(s.name, typeName, "decode slot", 1, 0, false, compareRows(got, ldOut, wantAll, row0, nullptr, s.hidden, 1),
                   kDecodeBound);
            for (void* p : {static_cast<void*>(dSlotWeights), static_cast<void*>(dGroupStart), static_cast<void*>(dZeros),
                            static_cast<void*>(dOrder), static_cast<void*>(dIds), static_cast<void*>(dWeights)})
                cudaFree(p);
        }
    }

    if (timings) {
        // Decode: one token, step i routed to experts (i * topK ..) mod experts, so consecutive steps
        // share none and a step's experts were last read many steps (and L2s) ago.
        const int rounds = s.experts / s.topK;
        std::vector<DeviceBatch> steps;
        for (int i = 0; i < rounds; ++i) {
            Routing r{1, s.topK, std::vector<int>(s.topK), std::vector<float>(s.topK, 1.0f / s.topK)};
            for (int k = 0; k < s.topK; ++k) r.ids[k] = (i * s.topK + k) % s.experts;
            steps.push_back(makeBatch(r, s, pool.allTable, stream));
        }
        // Both ways of launching the two kernels: one after the other, and chained (the second loads its
        // first weights while the first runs; what the runner does on Hopper).
        const double decodeBytes = static_cast<double>(s.topK) * l.dataBytes;
        for (const bool chained : {false, true}) {
            currentCase = std::string(s.name) + " " + typeName + " decode timing" + (chained ? ", chained" : "");
            cuda::chain_detail::enabled = chained;
            const double ms = timeGraphStepMs(4 * rounds, 15, stream, [&](int i) {
                cuda::launchExpertsDecode(gl, steps[i % rounds].pairs, dx, ldx, dOut, ldOut, false, scratch, stream);
            });
            cuda::chain_detail::enabled = false;
            (chained ? timing.decodeChainedUs : timing.decodeUs) = ms * 1e3;
            std::printf("time    %-17s %-5s decode      tokens    1     %8.1f us  %7.0f GB/s of %.1f MB  (HBM roofline %.1f us, "
                        "%.0f%%; per step of a CUDA graph%s)\n",
                        s.name, typeName, ms * 1e3, decodeBytes / (ms * 1e-3) / 1e9, decodeBytes / 1e6,
                        decodeBytes / kHbmBytesPerSecond * 1e6, 100.0 * decodeBytes / kHbmBytesPerSecond / (ms * 1e-3),
                        chained ? ", chained launches" : "");
        }
        for (auto& b : steps) freeBatch(b);
        timing.decodeGBs = decodeBytes / (std::min(timing.decodeUs, timing.decodeChainedUs) * 1e-6) / 1e9;
        // Prefill: every expert of the layer is read (at least once per 32 of its tokens).
        for (int pi = 0; pi < 2; ++pi) {
            const int tokens = pi == 0 ? 512 : 2048;
            const Routing r = randomRouting(tokens, s, rng);
            DeviceBatch b = makeBatch(r, s, pool.allTable, stream);
            const double flops = 2.0 * perTokenFma * tokens;
            const double bytes = static_cast<double>(s.experts) * l.dataBytes;
            for (int si = 0; si < 2; ++si) {
                const int splits = 2 + si;
                currentCase = std::string(s.name) + " " + typeName + " prefill timing, tokens " + std::to_string(tokens);
                const double ms = timeMs(2, 7, 3, stream, [&](int) {
                    cuda::launchExpertsPrefill(gl, b.pairs, dx, ldx, dOut, ldOut, false, splits, scratch, stream);
                });
                const double roofMs = std::max(bytes / kHbmBytesPerSecond, flops * splits / kTensorFlops) * 1e3;
                timing.prefillMs[pi][si] = ms;
                timing.prefillTflops[pi][si] = flops / (ms * 1e-3) / 1e12;
                timing.prefillRoofMs[pi][si] = roofMs;
                std::printf("time    %-17s %-5s prefill x%d tokens %4d     %8.3f ms  %6.1f TFLOP/s useful (x%d on the tensor cores), "
                            "%5.0f GB/s of %.0f MB  (roofline %.3f ms, %.0f%%; fp32 CUDA cores would need %.3f ms)\n",
                            s.name, typeName, splits, tokens, ms, timing.prefillTflops[pi][si], splits, bytes / (ms * 1e-3) / 1e9,
                            bytes / 1e6, roofMs, 100.0 * roofMs / ms, flops / kFp32Flops * 1e3);
            }
            freeBatch(b);
        }
    }
    cudaFree(dx);
    cudaFree(dOut);
    cudaFree(scratch);
    for (float* p : epBuffers) cudaFree(p);
    freePool(pool);
}

}  // namespace

int main(int argc, char** argv) {
    bool timings = true;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--check-only")
            timings = false;
        else if (a == "--shapes" && i + 1 < argc)
            only = "," + std::string(argv[++i]) + ",";
        else {
            std::fprintf(stderr, "usage: %s [--check-only] [--shapes qwen3-30b-a3b,deepseek-v2-lite,deepseek-v3,awkward]\n", argv[0]);
            return 2;
        }
    }
    try {
        cudaDeviceProp prop{};
        TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        std::printf("GPU: %s, %d SMs, %.0f MB L2\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6);
        cudaStream_t stream;
        TANDEM_CUDA_CHECK(cudaStreamCreate(&stream));
        struct Row {
            const Shape* shape;
            ExpertType type;
            Timing t;
        };
        std::vector<Row> table;
        for (const Shape& s : kShapes) {
            if (!only.empty() && only.find("," + std::string(s.name) + ",") == std::string::npos) continue;
            const int distinctCount = s.hidden * s.inter > 4 << 20 ? 4 : 8;
            std::vector<ExpertWeights> sources(distinctCount);
            parallelFor(distinctCount, [&](int d) { sources[d] = randomExpert(s, 1000 + d); });
            std::printf("== %s: hidden %d, intermediate %d, %d experts, top-%d (%d distinct random experts)\n", s.name, s.hidden,
                        s.inter, s.experts, s.topK, distinctCount);
            for (const ExpertType type : io::kAllExpertTypes) {
                table.push_back({&s, type, {}});
                runShapeType(s, type, sources, timings, table.back().t, stream);
                std::fflush(stdout);
            }
        }
        if (timings) {
            std::printf("\n%-17s %-5s %9s %8s %7s %6s | %9s %7s %9s | %9s %7s %9s | %9s\n", "shape", "type", "decode us",
                        "chained", "GB/s", "%HBM", "pp512 ms", "TFLOP/s", "(x3 ms)", "pp2048 ms", "TFLOP/s", "(x3 ms)",
                        "roof 2048");
            for (const Row& r : table) {
                const Timing& t = r.t;
                std::printf("%-17s %-5s %9.1f %8.1f %7.0f %5.0f%% | %9.3f %7.1f %9.3f | %9.3f %7.1f %9.3f | %9.3f\n",
                            r.shape->name, io::expertTypeName(r.type).data(), t.decodeUs, t.decodeChainedUs, t.decodeGBs,
                            100.0 * t.decodeGBs * 1e9 / kHbmBytesPerSecond,
                            t.prefillMs[0][0], t.prefillTflops[0][0], t.prefillMs[0][1], t.prefillMs[1][0], t.prefillTflops[1][0],
                            t.prefillMs[1][1], t.prefillRoofMs[1][0]);
            }
            std::printf("(decode: per step in a CUDA graph, launched one after the other / chained; GB/s and %%HBM of the "
                        "faster. pp = prefill with 2 bf16 terms per activation, x3 = with 3; TFLOP/s counts 6 hidden inter "
                        "per pair; roof = max(bytes / 4.3 TB/s, 2 x FLOP / 790 TFLOP/s))\n");
        }
    } catch (const std::exception& e) {
        std::printf("check_gpu_experts: error: %s (in: %s)\n", e.what(), currentCase.empty() ? "setup" : currentCase.c_str());
        return 2;
    }
    if (failures)
        std::printf("check_gpu_experts: %d FAILED\n", failures);
    else
        std::printf("check_gpu_experts: all within bounds\n");
    return failures ? 1 : 0;
}
