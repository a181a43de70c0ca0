#include "bench/kernel_check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>

#include "cpu/kernels/activation_quant.h"
#include "cpu/expert_pack.h"
#include "cpu/half_float.h"
#include "cpu/moe/moe_layer.h"
#include "cpu/moe/packed_layer.h"

namespace tandem::cpu {

namespace {

class Random {
public:
    explicit Random(std::uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ull + 1) {}
    std::uint64_t next() {
        s_ ^= s_ << 13;
        s_ ^= s_ >> 7;
        s_ ^= s_ << 17;
        return s_;
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) / static_cast<float>(1 << 24); }

private:
    std::uint64_t s_;
};

struct AlignedBytes {
    explicit AlignedBytes(std::size_t n) : p(static_cast<std::byte*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64))) {}
    ~AlignedBytes() { std::free(p); }
    AlignedBytes(const AlignedBytes&) = delete;
    AlignedBytes& operator=(const AlignedBytes&) = delete;
    std::byte* p;
};

double relativeError(const std::vector<double>& got, const std::vector<double>& want) {
    double d = 0, r = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        d += (got[i] - want[i]) * (got[i] - want[i]);
        r += want[i] * want[i];
    }
    return std::sqrt(d) / std::sqrt(r);
}

// Worst relative L2 error over rows of `cols` values.
double worstRowError(const std::vector<double>& got, const std::vector<double>& want, std::size_t cols) {
    double worst = 0;
    for (std::size_t r = 0; r * cols < got.size(); ++r) {
        const std::vector<double> g(got.begin() + r * cols, got.begin() + (r + 1) * cols);
        const std::vector<double> w(want.begin() + r * cols, want.begin() + (r + 1) * cols);
        const double e = relativeError(g, w);
        if (!(e <= worst)) worst = e;  // NaN is the worst
    }
    return worst;
}

// The intermediate value of row i in float64: SiLU(g) * u, or the epilogue's (the scalar kernels' spec).
double referenceAct(double g, double u, const GateUpEpilogue* e, int i) {
    if (e) {
        if (e->gateBias) g += e->gateBias[i];
        if (e->upBias) u += e->upBias[i];
        if (e->activation == GatedActivation::ClampedSwiglu) {
            g = std::min(g, static_cast<double>(e->limit));
            u = std::clamp(u, -static_cast<double>(e->limit), static_cast<double>(e->limit));
            return (u + 1) * g / (1 + std::exp(-static_cast<double>(e->alpha) * g));
        }
    }
    return g / (1 + std::exp(-g)) * u;
}

// gpt-oss's epilogue with random biases in [-1, 1] (interPad floats each, zero past inter), and the
// given clamp limit.
struct RandomEpilogue {
    RandomEpilogue(Random& rng, const ExpertLayout& l, float limit) : gate(l.interPad, 0.0f), up(l.interPad, 0.0f) {
        for (int i = 0; i < l.inter; ++i) {
            gate[i] = rng.uniform(-1.0f, 1.0f);
            up[i] = rng.uniform(-1.0f, 1.0f);
        }
        e.activation = GatedActivation::ClampedSwiglu;
        e.gateBias = gate.data();
        e.upBias = up.data();
        e.limit = limit;
    }
    std::vector<float> gate, up;
    GateUpEpilogue e;
};

// Activation rows in one level's kernel format plus the values the kernels multiply.
struct Activations {
    Activations(ExpertType type, Bf16Activations format, int rows, int n, int nPad)
        : split(type == ExpertType::BF16 && format == Bf16Activations::Split),
          loOffset(split ? bf16LoOffset(nPad) : 0),
          rowBytes(split ? 2 * loOffset : (static_cast<std::size_t>(nPad) * (type == ExpertType::BF16 ? 4 : 1) + 63) / 64 * 64),
          bytes(rows * rowBytes), scale(rows), sums(static_cast<std::size_t>(rows) * nPad / kActGroup),
          values(static_cast<std::size_t>(rows) * n), rows(rows), n(n), nPad(nPad), type(type) {}

    void fill(const std::vector<float>& x) {
        for (int r = 0; r < rows; ++r) {
            const float* xr = x.data() + static_cast<std::size_t>(r) * n;
            std::byte* out = bytes.p + r * rowBytes;
            double* v = values.data() + static_cast<std::size_t>(r) * n;
            if (split) {
                activationToBf16Split(xr, n, nPad, out);
                const auto* hi = reinterpret_cast<const std::uint16_t*>(out);
                const auto* lo = reinterpret_cast<const std::uint16_t*>(out + loOffset);
                for (int k = 0; k < n; ++k) v[k] = static_cast<double>(bf16Value(hi[k])) + bf16Value(lo[k]);
            } else if (type == ExpertType::BF16) {
                activationToFloat(xr, n, nPad, reinterpret_cast<float*>(out));
                for (int k = 0; k < n; ++k) v[k] = xr[k];
            } else {
                activationToInt8(xr, n, nPad, reinterpret_cast<std::int8_t*>(out), &scale[r], &sums[static_cast<std::size_t>(r) * nPad / kActGroup]);
                for (int k = 0; k < n; ++k) v[k] = static_cast<double>(reinterpret_cast<std::int8_t*>(out)[k]) * scale[r];
            }
        }
    }

    KernelRows view() const {
        return {bytes.p, rowBytes, loOffset, scale.data(), sums.data(), static_cast<std::size_t>(nPad / kActGroup), rows};
    }

    bool split;
    std::size_t loOffset;
    std::size_t rowBytes;
    AlignedBytes bytes;
    std::vector<float> scale;
    std::vector<std::int32_t> sums;
    std::vector<double> values;
    int rows, n, nPad;
    ExpertType type;
};

struct Shape {
    int hidden, inter;
};

// An expert's weights as the kernels see them, in float64: gate and up [inter][hidden], down [hidden][inter].
struct ExpertWeights {
    const std::vector<double>& gate;
    const std::vector<double>& up;
    const std::vector<double>& down;
};

// A BF16 expert end to end with one level's kernels (gate/up, the intermediate rows in the level's
// format, down) against float64 on the unrounded float32 inputs: what a MoE layer computes per
// (token, expert). Each row must stay within 1e-5, far inside the 1e-3 per logits row that a model
// with bf16 experts has to meet against float32.
KernelCheck checkBf16Expert(const ExpertKernels& kernels, bool gemm, const ExpertLayout& l, const std::byte* packed,
                            const ExpertWeights& w, const std::vector<float>& x, int rows, std::string name, const GateUpEpilogue* epilogue) {
    const KernelPair& k = kernels.pick(ExpertType::BF16, gemm);
    Activations xt(ExpertType::BF16, kernels.bf16Activations, rows, l.hidden, l.hiddenPad);
    xt.fill(x);
    GateUpCall call;
    call.layout = &l;
    call.panels = packed;
    call.panelCount = l.gateUpPanels;
    call.x = xt.view();
    std::vector<float> act(static_cast<std::size_t>(rows) * l.interPad);
    call.act = act.data();
    call.actStride = l.interPad;
    call.epilogue = epilogue;
    k.gateUp(call);

    Activations at(ExpertType::BF16, kernels.bf16Activations, rows, l.interPad, l.interPad);
    at.fill(act);
    std::vector<float> dest(static_cast<std::size_t>(rows) * l.hidden, 0.0f), weight(rows, 1.0f);
    std::vector<float*> destRows(rows);
    for (int r = 0; r < rows; ++r) destRows[r] = dest.data() + static_cast<std::size_t>(r) * l.hidden;
    DownCall dc;
    dc.layout = &l;
    dc.chunks = packed + l.chunkOffset(0);
    dc.chunkCount = l.chunks;
    dc.panelCount = l.downPanels;
    dc.act = at.view();
    dc.dest = destRows.data();
    dc.weight = weight.data();
    k.down(dc);

    std::vector<double> got(dest.begin(), dest.end()), want;
    std::vector<double> a(l.inter);
    for (int r = 0; r < rows; ++r) {
        const float* xr = x.data() + static_cast<std::size_t>(r) * l.hidden;
        for (int o = 0; o < l.inter; ++o) {
            double g = 0, u = 0;
            for (int c = 0; c < l.hidden; ++c) {
                g += w.gate[static_cast<std::size_t>(o) * l.hidden + c] * xr[c];
                u += w.up[static_cast<std::size_t>(o) * l.hidden + c] * xr[c];
            }
            a[o] = referenceAct(g, u, epilogue, o);
        }
        for (int n = 0; n < l.hidden; ++n) {
            double y = 0;
            for (int o = 0; o < l.inter; ++o) y += w.down[static_cast<std::size_t>(n) * l.inter + o] * a[o];
            want.push_back(y);
        }
    }
    return {std::move(name), worstRowError(got, want, static_cast<std::size_t>(l.hidden)), 1e-5};
}

// With `clampLimit` > 0 gate/up runs gpt-oss's epilogue (random biases, the clamped SwiGLU with that
// limit) on every level, the scalar kernels' included.
void checkShape(const ExpertKernels& kernels, ExpertType type, Shape shape, std::uint64_t seed, std::vector<KernelCheck>& out,
                float clampLimit = 0) {
    Random rng(seed);
    const ExpertLayout l = ExpertLayout::make(type, shape.hidden, shape.inter);
    std::optional<RandomEpilogue> randomEpilogue;
    if (clampLimit > 0) randomEpilogue.emplace(rng, l, clampLimit);
    const GateUpEpilogue* epilogue = randomEpilogue ? &randomEpilogue->e : nullptr;
    std::vector<float> gate(static_cast<std::size_t>(l.inter) * l.hidden), up(gate.size()), down(gate.size());
    for (auto* m : {&gate, &up, &down})
        for (float& v : *m) v = rng.uniform(-0.5f, 0.5f);
    AlignedBytes packed(l.expertBytes);
    auto reader = [](const std::vector<float>& m, int cols) {
        return [&m, cols](std::int64_t r, float* o) { std::copy_n(m.data() + r * cols, cols, o); };
    };
    packExpert(l, {reader(gate, l.hidden), reader(up, l.hidden), reader(down, l.inter)}, packed.p);
    // The weights as the kernels see them, for the float64 reference.
    std::vector<double> wg(gate.size()), wu(gate.size()), wd(gate.size());
    std::vector<float> row(static_cast<std::size_t>(std::max(l.hidden, l.inter)));
    for (int r = 0; r < l.inter; ++r) {
        unpackExpertRow(l, packed.p, ExpertMatrix::Gate, r, row.data());
        for (int k = 0; k < l.hidden; ++k) wg[r * l.hidden + k] = row[k];
        unpackExpertRow(l, packed.p, ExpertMatrix::Up, r, row.data());
        for (int k = 0; k < l.hidden; ++k) wu[r * l.hidden + k] = row[k];
    }
    for (int r = 0; r < l.hidden; ++r) {
        unpackExpertRow(l, packed.p, ExpertMatrix::Down, r, row.data());
        for (int k = 0; k < l.inter; ++k) wd[r * l.inter + k] = row[k];
    }

    std::string prefix(isaName(kernels.isa));
    prefix.append(" ").append(expertTypeName(type)).append(" ");
    if (epilogue) prefix.append("clamped-swiglu+bias ");
    std::string dims(" ");
    dims.append(std::to_string(l.hidden)).append("x").append(std::to_string(l.inter));
    for (const int rows : {1, 3, 5, 17, 40}) {
        std::vector<float> x(static_cast<std::size_t>(rows) * l.hidden);
        for (float& v : x) v = rng.uniform(-2.0f, 2.0f);
        // The scalar kernels' activations (float32 for BF16) and the tested level's.
        Activations xa(type, scalarKernels().bf16Activations, rows, l.hidden, l.hiddenPad);
        Activations xt(type, kernels.bf16Activations, rows, l.hidden, l.hiddenPad);
        xa.fill(x);
        xt.fill(x);

        // Gate/up over panels [1, gateUpPanels) (or all when there is one), so panel offsets are exercised.
        const int firstPanel = l.gateUpPanels > 1 ? 1 : 0;
        GateUpCall call;
        call.layout = &l;
        call.panels = packed.p + firstPanel * l.gateUpPanelBytes;
        call.firstPanel = firstPanel;
        call.panelCount = l.gateUpPanels - firstPanel;
        call.x = xa.view();
        call.actStride = l.interPad;
        call.epilogue = epilogue;
        std::vector<float> actScalar(static_cast<std::size_t>(rows) * l.interPad, 0.0f), actTested(actScalar.size(), 0.0f);
        call.act = actScalar.data();
        scalarKernels().gemv[static_cast<int>(type)].gateUp(call);
        std::vector<double> ref, scalarOut;
        for (int r = 0; r < rows; ++r)
            for (int o = firstPanel * kPanelRows; o < l.inter; ++o) {
                double g = 0, u = 0;
                for (int k = 0; k < l.hidden; ++k) {
                    g += wg[o * l.hidden + k] * xa.values[r * l.hidden + k];
                    u += wu[o * l.hidden + k] * xa.values[r * l.hidden + k];
                }
                ref.push_back(referenceAct(g, u, epilogue, o));
                scalarOut.push_back(actScalar[r * l.interPad + o]);
            }
        if (kernels.isa == Isa::Scalar)
            out.push_back({prefix + "gate/up vs float64" + dims + " rows " + std::to_string(rows), relativeError(scalarOut, ref), 1e-5});

        // Down from the (scalar) intermediate rows, over chunks [1, chunks) when there are several.
        std::vector<float> inter(static_cast<std::size_t>(rows) * l.inter);
        for (float& v : inter) v = rng.uniform(-1.0f, 1.0f);
        Activations aa(type, scalarKernels().bf16Activations, rows, l.inter, l.interPad);
        Activations at(type, kernels.bf16Activations, rows, l.inter, l.interPad);
        aa.fill(inter);
        at.fill(inter);
        const int firstChunk = l.chunks > 1 ? 1 : 0;
        std::vector<float> destScalar(static_cast<std::size_t>(rows) * l.hidden), weight(rows);
        for (float& v : destScalar) v = rng.uniform(-1.0f, 1.0f);
        for (float& v : weight) v = rng.uniform(0.1f, 1.0f);
        const std::vector<float> dest0 = destScalar;
        std::vector<float> destTested = dest0;
        std::vector<float*> rowsScalar(rows), rowsTested(rows);
        for (int r = 0; r < rows; ++r) {
            rowsScalar[r] = destScalar.data() + static_cast<std::size_t>(r) * l.hidden;
            rowsTested[r] = destTested.data() + static_cast<std::size_t>(r) * l.hidden;
        }
        DownCall dc;
        dc.layout = &l;
        dc.chunks = packed.p + l.chunkOffset(firstChunk);
        dc.firstChunk = firstChunk;
        dc.chunkCount = l.chunks - firstChunk;
        dc.firstPanel = 0;
        dc.panelCount = l.downPanels;
        dc.rowScales = reinterpret_cast<const float*>(packed.p + l.downScalesOffset);
        dc.act = aa.view();
        dc.weight = weight.data();
        dc.dest = rowsScalar.data();
        scalarKernels().gemv[static_cast<int>(type)].down(dc);
        std::vector<double> downRef, downScalar;
        for (int r = 0; r < rows; ++r)
            for (int n = 0; n < l.hidden; ++n) {
                double y = 0;
                for (int k = firstChunk * kChunkCols; k < l.inter; ++k) y += wd[n * l.inter + k] * aa.values[r * l.inter + k];
                downRef.push_back(weight[r] * y);
                downScalar.push_back(static_cast<double>(destScalar[r * l.hidden + n]) - dest0[r * l.hidden + n]);
            }
        if (kernels.isa == Isa::Scalar)
            out.push_back({prefix + "down vs float64" + dims + " rows " + std::to_string(rows), relativeError(downScalar, downRef), 1e-5});

        if (type == ExpertType::BF16)
            for (const bool gemm : {false, true})
                out.push_back(checkBf16Expert(kernels, gemm, l, packed.p, {wg, wu, wd}, x, rows,
                                              prefix + (gemm ? "gemm" : "gemv") + " expert vs float64, worst row" + dims + " rows " +
                                                  std::to_string(rows),
                                              epilogue));

        if (kernels.isa == Isa::Scalar) continue;
        for (const bool gemm : {false, true}) {
            const KernelPair& k = kernels.pick(type, gemm);
            const std::string kind = gemm ? "gemm " : "gemv ";
            std::fill(actTested.begin(), actTested.end(), NAN);
            call.act = actTested.data();
            call.x = xt.view();
            k.gateUp(call);
            std::vector<double> got, want;
            for (int r = 0; r < rows; ++r)
                for (int o = firstPanel * kPanelRows; o < l.interPad; ++o) {
                    got.push_back(actTested[r * l.interPad + o]);  // a NaN here: a column the kernel did not write
                    want.push_back(actScalar[r * l.interPad + o]);
                }
            out.push_back({prefix + kind + "gate/up" + dims + " rows " + std::to_string(rows), relativeError(got, want), 1e-5});

            destTested = dest0;
            dc.dest = rowsTested.data();
            dc.act = at.view();
            k.down(dc);
            got.clear();
            want.clear();
            for (std::size_t i = 0; i < destTested.size(); ++i) {
                got.push_back(static_cast<double>(destTested[i]) - dest0[i]);
                want.push_back(static_cast<double>(destScalar[i]) - dest0[i]);
            }
            out.push_back({prefix + kind + "down" + dims + " rows " + std::to_string(rows), relativeError(got, want), 1e-5});
        }
    }
}

}  // namespace

std::vector<KernelCheck> checkKernels(const ExpertKernels& kernels, std::uint64_t seed) {
    std::vector<KernelCheck> out;
    // The fixtures' 64, odd sizes that leave partial blocks, panels and chunks, and a K long enough for
    // the AMX cache blocking to take two passes.
    const Shape shapes[] = {{96, 64}, {200, 136}, {1100, 300}};
    for (const ExpertType type : kAllExpertTypes)
        for (const Shape s : shapes) checkShape(kernels, type, s, seed++, out);
    // gpt-oss's epilogue: biases and the clamped SwiGLU, its limit 7 (products here reach ~15) and a
    // tight 1.5 that clamps most of them.
    for (const ExpertType type : kAllExpertTypes) {
        checkShape(kernels, type, {200, 136}, seed++, out, 7.0f);
        checkShape(kernels, type, {96, 64}, seed++, out, 1.5f);
    }
    return out;
}

std::vector<KernelCheck> checkMoeLayer(ExpertPool& pool, Isa isa, std::uint64_t seed) {
    std::vector<KernelCheck> out;
    Random rng(seed);
    constexpr int kExperts = 9, kTopK = 3;
    for (const ExpertType type : kAllExpertTypes) {
        for (const bool gptOss : {false, true}) {  // gpt-oss: biases on all three matrices, the clamped SwiGLU
            const ExpertLayout l = ExpertLayout::make(type, 200, 300);
            AlignedBytes bytes(l.expertBytes * kExperts);
            std::vector<float> w(static_cast<std::size_t>(l.hidden) * l.inter);
            for (int e = 0; e < kExperts; ++e) {
                for (float& v : w) v = rng.uniform(-0.3f, 0.3f);
                auto reader = [&w](int cols) { return [&w, cols](std::int64_t r, float* o) { std::copy_n(w.data() + r * cols, cols, o); }; };
                packExpert(l, {reader(l.hidden), reader(l.hidden), reader(l.inter)}, bytes.p + e * l.expertBytes);
            }
            PackedMoeLayer layer(l, kExperts, bytes.p, pool.topology());
            if (gptOss) {
                MoeExpertEpilogue epi;
                epi.activation = GatedActivation::ClampedSwiglu;
                epi.limit = 7.0f;
                for (const auto& [v, n] : {std::pair{&epi.gateBias, l.inter}, std::pair{&epi.upBias, l.inter}, std::pair{&epi.downBias, l.hidden}}) {
                    v->resize(static_cast<std::size_t>(kExperts) * n);
                    for (float& b : *v) b = rng.uniform(-1.0f, 1.0f);
                }
                layer.setEpilogue(epi);
            }
            MoeRunner tested(pool, {isa, KernelChoice::Auto, 0}), reference(pool, {Isa::Scalar, KernelChoice::Auto, 0});
            for (const int tokens : {1, 37}) {
                std::vector<float> x(static_cast<std::size_t>(tokens) * l.hidden), weights(tokens * kTopK);
                std::vector<int> ids(tokens * kTopK);
                for (float& v : x) v = rng.uniform(-2.0f, 2.0f);
                for (int t = 0; t < tokens; ++t)
                    for (int j = 0; j < kTopK; ++j) {
                        ids[t * kTopK + j] = static_cast<int>((rng.next() >> 33) % kExperts);
                        weights[t * kTopK + j] = rng.uniform(0.1f, 1.0f);
                    }
                std::vector<float> a(x.size(), 0.0f), b(x.size(), 0.0f);
                tested.run(layer, {x.data(), static_cast<std::size_t>(l.hidden), tokens, ids.data(), weights.data(), kTopK, a.data(),
                                   static_cast<std::size_t>(l.hidden)});
                reference.run(layer, {x.data(), static_cast<std::size_t>(l.hidden), tokens, ids.data(), weights.data(), kTopK, b.data(),
                                      static_cast<std::size_t>(l.hidden)});
                const std::vector<double> got(a.begin(), a.end()), want(b.begin(), b.end());
                const std::string name = std::string(isaName(isa)) + " " + std::string(expertTypeName(type)) +
                                         (gptOss ? " gpt-oss epilogue" : "") + " MoE layer tokens " +
                                         std::to_string(tokens) + " (" + std::to_string(tested.lastStats().gemmExperts) + " GEMM experts)";
                if (type == ExpertType::BF16)
                    out.push_back({name + ", worst row", worstRowError(got, want, static_cast<std::size_t>(l.hidden)), 1e-5});
                else
                    out.push_back({name, relativeError(got, want), 5e-3});
            }
        }
    }
    return out;
}

namespace {

// One layer's experts packed back to back, each weight drawn from (seed, expert, matrix, row) so that
// the experts pack on all threads in any order: uniform with variance 1 / K, so each product row is of
// the order of its inputs.
struct RealLayer {
    RealLayer(ThreadPool& pool, const ExpertLayout& l, int experts, std::uint64_t seed) : bytes(l.expertBytes * experts) {
        pool.parallelFor(static_cast<std::size_t>(experts), 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t e = begin; e < end; ++e) {
                auto reader = [&, e](int matrix, int cols) {
                    const float a = std::sqrt(3.0f / static_cast<float>(cols));
                    return [=](std::int64_t r, float* o) {
                        Random rng(seed ^ (e * 0x100000001b3ull + static_cast<std::uint64_t>(matrix) * 0x9e37ull + static_cast<std::uint64_t>(r) * 0x51afd7ed558ccdull));
                        for (int c = 0; c < cols; ++c) o[c] = rng.uniform(-a, a);
                    };
                };
                packExpert(l, {reader(0, l.hidden), reader(1, l.hidden), reader(2, l.inter)}, bytes.p + e * l.expertBytes);
            }
        });
    }
    AlignedBytes bytes;
};

// The worst row of each named check over all experts, gathered from the pool's threads.
class WorstRows {
public:
    void add(const std::string& name, double error, int expert) {
        std::lock_guard lock(mutex_);
        auto [it, fresh] = worst_.try_emplace(name, error, expert);
        if (!fresh && !(error <= it->second.first)) it->second = {error, expert};  // NaN is the worst
    }
    void appendTo(std::vector<KernelCheck>& out, const std::vector<std::string>& order, double tolerance) const {
        for (const auto& name : order) {
            const auto& [error, expert] = worst_.at(name);
            out.push_back({name + ", worst expert " + std::to_string(expert), error, tolerance});
        }
    }

private:
    std::mutex mutex_;
    std::map<std::string, std::pair<double, int>> worst_;
};

// Rows [0, rows) of two row-major blocks of `cols` columns (stride `stride`), as doubles.
double worstRowOf(const float* got, const float* want, int rows, std::size_t cols, std::size_t stride, const float* base = nullptr) {
    double worst = 0;
    std::vector<double> g(cols), w(cols);
    for (int r = 0; r < rows; ++r) {
        for (std::size_t c = 0; c < cols; ++c) {
            const double b = base ? base[r * stride + c] : 0.0;
            g[c] = static_cast<double>(got[r * stride + c]) - b;
            w[c] = static_cast<double>(want[r * stride + c]) - b;
        }
        const double e = relativeError(g, w);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

}  // namespace

RealShapePlan RealShapePlan::ci(std::string shape, int hidden, int inter, int experts, int topK) {
    RealShapePlan p{std::move(shape), hidden, inter, experts, topK, {1}, {0, experts / 2, experts - 1}, {}, true};
    p.sampledRows.resize(64);
    std::iota(p.sampledRows.begin(), p.sampledRows.end(), 1);
    return p;
}

RealShapePlan RealShapePlan::full(std::string shape, int hidden, int inter, int experts, int topK, int maxRows) {
    RealShapePlan p{std::move(shape), hidden, inter, experts, topK, {}, {}, {}, true};
    p.everyExpertRows.resize(static_cast<std::size_t>(maxRows));
    std::iota(p.everyExpertRows.begin(), p.everyExpertRows.end(), 1);
    return p;
}

std::vector<KernelCheck> checkRealShape(ThreadPool& pool, Isa isa, ExpertType type, const RealShapePlan& plan, std::uint64_t seed,
                                        const std::function<void(const std::string&)>& progress) {
    auto say = [&](const std::string& line) {
        if (progress) progress(line);
    };
    const ExpertKernels& tested = kernelsFor(isa);
    const ExpertKernels& scalar = scalarKernels();
    const ExpertLayout l = ExpertLayout::make(type, plan.hidden, plan.inter);
    const std::string prefix = std::string(isaName(isa)) + " " + std::string(expertTypeName(type)) + " " + plan.shape + " " +
                               std::to_string(l.hidden) + "x" + std::to_string(l.inter) + " ";
    say("packing " + std::to_string(plan.experts) + " " + std::string(expertTypeName(type)) + " experts of " + plan.shape + " (" +
        std::to_string(l.expertBytes * plan.experts >> 20) + " MiB)");
    const RealLayer layer(pool, l, plan.experts, seed);

    int maxRows = 1;
    for (const auto* counts : {&plan.everyExpertRows, &plan.sampledRows})
        for (const int n : *counts) maxRows = std::max(maxRows, n);
    // The inputs every expert shares: x (hidden) for gate/up, an intermediate row (inter) for down, the
    // destination rows' starting values and the routing weights, in the scalar and the tested formats.
    Random rng(seed + 1);
    std::vector<float> x(static_cast<std::size_t>(maxRows) * l.hidden), inter(static_cast<std::size_t>(maxRows) * l.inter);
    for (float& v : x) v = rng.uniform(-1.7f, 1.7f);
    for (float& v : inter) v = rng.uniform(-1.0f, 1.0f);
    std::vector<float> dest0(static_cast<std::size_t>(maxRows) * l.hidden), weight(static_cast<std::size_t>(maxRows));
    for (float& v : dest0) v = rng.uniform(-1.0f, 1.0f);
    for (float& v : weight) v = rng.uniform(0.1f, 1.0f);
    Activations xs(type, scalar.bf16Activations, maxRows, l.hidden, l.hiddenPad), xt(type, tested.bf16Activations, maxRows, l.hidden, l.hiddenPad);
    Activations as(type, scalar.bf16Activations, maxRows, l.inter, l.interPad), at(type, tested.bf16Activations, maxRows, l.inter, l.interPad);
    xs.fill(x);
    xt.fill(x);
    as.fill(inter);
    at.fill(inter);

    WorstRows worst;
    std::vector<std::string> order;
    auto nameOf = [&](bool gemm, bool down, int rows) {
        return prefix + (gemm ? "gemm " : "gemv ") + (down ? "down" : "gate/up") + " rows " + std::to_string(rows);
    };
    {
        std::vector<int> counts = plan.everyExpertRows;
        counts.insert(counts.end(), plan.sampledRows.begin(), plan.sampledRows.end());
        std::sort(counts.begin(), counts.end());
        counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
        for (const int n : counts)
            for (const bool gemm : {false, true})
                for (const bool down : {false, true}) order.push_back(nameOf(gemm, down, n));
    }
    say(std::string(isaName(isa)) + " against scalar: " + std::to_string(plan.experts) + " experts, rows " +
        (plan.everyExpertRows.empty() ? std::string("-") : std::to_string(plan.everyExpertRows.front()) + ".." + std::to_string(plan.everyExpertRows.back())) +
        " each" + (plan.sampledExperts.empty() ? std::string() : ", " + std::to_string(plan.sampledRows.size()) + " row counts on " +
                                                                       std::to_string(plan.sampledExperts.size()) + " of them"));

    pool.parallelFor(static_cast<std::size_t>(plan.experts), 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t e = begin; e < end; ++e) {
            const std::byte* packed = layer.bytes.p + e * l.expertBytes;
            const bool sampled = std::find(plan.sampledExperts.begin(), plan.sampledExperts.end(), static_cast<int>(e)) != plan.sampledExperts.end();
            std::vector<int> counts = plan.everyExpertRows;
            if (sampled) counts.insert(counts.end(), plan.sampledRows.begin(), plan.sampledRows.end());
            if (counts.empty()) continue;
            const int rows = *std::max_element(counts.begin(), counts.end());

            // The scalar kernels' rows, once for the most rows this expert runs (rows are independent).
            GateUpCall call;
            call.layout = &l;
            call.panels = packed;
            call.panelCount = l.gateUpPanels;
            call.actStride = static_cast<std::size_t>(l.interPad);
            call.x = xs.view();
            call.x.rows = rows;
            std::vector<float> actScalar(static_cast<std::size_t>(rows) * l.interPad), actTested(actScalar.size());
            call.act = actScalar.data();
            scalar.gemv[static_cast<int>(type)].gateUp(call);

            DownCall dc;
            dc.layout = &l;
            dc.chunks = packed + l.chunkOffset(0);
            dc.chunkCount = l.chunks;
            dc.panelCount = l.downPanels;
            dc.rowScales = reinterpret_cast<const float*>(packed + l.downScalesOffset);
            dc.weight = weight.data();
            std::vector<float> destScalar(dest0.begin(), dest0.begin() + static_cast<std::ptrdiff_t>(rows) * l.hidden), destTested;
            std::vector<float*> rowsScalar(static_cast<std::size_t>(rows)), rowsTested(static_cast<std::size_t>(rows));
            for (int r = 0; r < rows; ++r) rowsScalar[r] = destScalar.data() + static_cast<std::size_t>(r) * l.hidden;
            dc.dest = rowsScalar.data();
            dc.act = as.view();
            dc.act.rows = rows;
            scalar.gemv[static_cast<int>(type)].down(dc);

            for (const int n : counts)
                for (const bool gemm : {false, true}) {
                    const KernelPair& k = tested.pick(type, gemm);
                    std::fill(actTested.begin(), actTested.end(), NAN);  // a column the kernel does not write stays NaN
                    call.x = xt.view();
                    call.x.rows = n;
                    call.act = actTested.data();
                    k.gateUp(call);
                    worst.add(nameOf(gemm, false, n),
                              worstRowOf(actTested.data(), actScalar.data(), n, static_cast<std::size_t>(l.interPad), static_cast<std::size_t>(l.interPad)),
                              static_cast<int>(e));

                    destTested.assign(dest0.begin(), dest0.begin() + static_cast<std::ptrdiff_t>(n) * l.hidden);
                    for (int r = 0; r < n; ++r) rowsTested[r] = destTested.data() + static_cast<std::size_t>(r) * l.hidden;
                    dc.dest = rowsTested.data();
                    dc.act = at.view();
                    dc.act.rows = n;
                    k.down(dc);
                    worst.add(nameOf(gemm, true, n),
                              worstRowOf(destTested.data(), destScalar.data(), n, static_cast<std::size_t>(l.hidden), static_cast<std::size_t>(l.hidden),
                                         dest0.data()),
                              static_cast<int>(e));
                }
        }
    });
    std::vector<KernelCheck> out;
    worst.appendTo(out, order, 1e-5);

    if (plan.moeDecode) {
        // The whole layer for one token at a time, as decode runs it (work split into pieces over the
        // pool's threads, down read in runs across experts, the next expert prefetched): the experts in
        // a random order, topK per step, until every one has been routed.
        const int steps = (plan.experts + plan.topK - 1) / plan.topK;
        say(std::string(isaName(isa)) + " MoE layer decode: " + std::to_string(steps) + " steps of top-" + std::to_string(plan.topK));
        std::vector<int> perm(static_cast<std::size_t>(plan.experts));
        std::iota(perm.begin(), perm.end(), 0);
        for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[(rng.next() >> 33) % i]);
        const PackedMoeLayer moe(l, plan.experts, layer.bytes.p, pool.experts().topology());
        MoeRunner testedRunner(pool.experts(), {isa, KernelChoice::Auto, 0}), reference(pool.experts(), {Isa::Scalar, KernelChoice::Auto, 0});
        double worstDecode = 0;
        int worstStep = 0;
        std::vector<float> xd(static_cast<std::size_t>(l.hidden)), a(xd.size()), b(xd.size()), w(static_cast<std::size_t>(plan.topK));
        std::vector<int> ids(static_cast<std::size_t>(plan.topK));
        for (int s = 0; s < steps; ++s) {
            for (int j = 0; j < plan.topK; ++j) {
                ids[j] = perm[static_cast<std::size_t>((s * plan.topK + j) % plan.experts)];
                w[j] = rng.uniform(0.1f, 1.0f);
            }
            for (float& v : xd) v = rng.uniform(-1.7f, 1.7f);
            std::fill(a.begin(), a.end(), 0.0f);
            std::fill(b.begin(), b.end(), 0.0f);
            const auto hidden = static_cast<std::size_t>(l.hidden);
            testedRunner.run(moe, {xd.data(), hidden, 1, ids.data(), w.data(), plan.topK, a.data(), hidden});
            reference.run(moe, {xd.data(), hidden, 1, ids.data(), w.data(), plan.topK, b.data(), hidden});
            const double e = relativeError(std::vector<double>(a.begin(), a.end()), std::vector<double>(b.begin(), b.end()));
            if (!(e <= worstDecode)) {
                worstDecode = e;
                worstStep = s;
            }
        }
        out.push_back({prefix + "MoE layer decode, " + std::to_string(steps) + " steps over every expert, worst step " + std::to_string(worstStep),
                       worstDecode, type == ExpertType::BF16 ? 1e-5 : 5e-3});
    }
    return out;
}

}  // namespace tandem::cpu
