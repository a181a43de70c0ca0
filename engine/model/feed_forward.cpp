#include "model/feed_forward.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tandem/error.h"

#include "cpu/dense/matmul.h"
#include "cpu/dense/ops.h"
#include "cpu/moe/moe_layer.h"
#include "model/routed_experts.h"
#include "model/router.h"

namespace tandem::model {

void denseMlp(const MlpWeights& w, const float* x, std::size_t tokens, float* out, cpu::ThreadPool& pool) {
    const auto hidden = static_cast<std::size_t>(w.gate.cols);
    const auto inner = static_cast<std::size_t>(w.gate.rows);
    std::vector<float> gate(tokens * inner), up(tokens * inner);
    cpu::matmul(w.gate, x, hidden, tokens, gate.data(), inner, pool);
    cpu::matmul(w.up, x, hidden, tokens, up.data(), inner, pool);
    cpu::siluMul(gate.data(), up.data(), gate.size());
    cpu::matmul(w.down, gate.data(), inner, tokens, out, hidden, pool);
}

namespace {

// gpt-oss's expert e: down(act(gate(x) + bg, up(x) + bu)) + bd, act the clamped SwiGLU (model/config.h).
void biasedExpert(const MoeWeights& w, std::size_t e, const float* x, std::size_t tokens, float* out, cpu::ThreadPool& pool) {
    const MlpWeights& m = w.experts[e];
    const auto hidden = static_cast<std::size_t>(m.gate.cols);
    const auto inner = static_cast<std::size_t>(m.gate.rows);
    std::vector<float> gate(tokens * inner), up(tokens * inner);
    cpu::matmul(m.gate, x, hidden, tokens, gate.data(), inner, pool);
    cpu::matmul(m.up, x, hidden, tokens, up.data(), inner, pool);
    const float* bg = &w.gateBias[e * inner];
    const float* bu = &w.upBias[e * inner];
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t i = 0; i < inner; ++i) {
            float& g = gate[t * inner + i];
            const float u = up[t * inner + i] + bu[i];
            g += bg[i];
            if (w.activation == ExpertActivation::ClampedSwiglu) {
                const float gc = std::min(g, w.swigluLimit);
                const float uc = std::clamp(u, -w.swigluLimit, w.swigluLimit);
                g = (uc + 1.0f) * gc / (1.0f + std::exp(-w.swigluAlpha * gc));
            } else {
                g = g / (1.0f + std::exp(-g)) * u;
            }
        }
    cpu::matmul(m.down, gate.data(), inner, tokens, out, hidden, pool);
    const float* bd = &w.downBias[e * hidden];
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t i = 0; i < hidden; ++i) out[t * hidden + i] += bd[i];
}

}  // namespace

void routeTokens(const ModelConfig& c, const MoeWeights& w, const float* x, std::size_t tokens, int* ids,
                 float* weights, cpu::ThreadPool& pool, float* choice) {
    const auto hidden = static_cast<std::size_t>(c.hiddenSize);
    const auto experts = static_cast<std::size_t>(c.numExperts);
    const auto k = static_cast<std::size_t>(c.router.topK);
    std::vector<float> logits(tokens * experts);
    cpu::matmul(w.router, x, hidden, tokens, logits.data(), experts, pool);
    if (!w.routerBias.empty())
        for (std::size_t t = 0; t < tokens; ++t)
            for (std::size_t e = 0; e < experts; ++e) logits[t * experts + e] += w.routerBias[e];
    const float* bias = w.correctionBias.empty() ? nullptr : w.correctionBias.data();
    for (std::size_t t = 0; t < tokens; ++t)
        routeToken(c.router, &logits[t * experts], c.numExperts, bias, &ids[t * k], &weights[t * k],
                   choice ? choice + t * experts : nullptr);
}

void routedExperts(const MoeWeights& w, const float* x, std::size_t tokens, const int* ids, const float* weights,
                   int topK, int firstSlot, int lastSlot, float* out, cpu::ThreadPool& pool) {
    const auto hidden = static_cast<std::size_t>(w.router.cols);
    const auto k = static_cast<std::size_t>(topK);
    std::fill_n(out, tokens * hidden, 0.0f);

    // Tokens grouped by expert, so each expert's weights are read once for all of its tokens.
    std::vector<std::vector<std::size_t>> slotsOf(w.experts.size());
    for (std::size_t t = 0; t < tokens; ++t)
        for (int s = firstSlot; s < lastSlot; ++s) {
            const std::size_t slot = t * k + static_cast<std::size_t>(s);
            if (ids[slot] == cpu::kComputedElsewhere) continue;
            if (ids[slot] < 0 || static_cast<std::size_t>(ids[slot]) >= slotsOf.size())
                throw Error("expert id " + std::to_string(ids[slot]) + " is out of range (the layer has " +
                            std::to_string(slotsOf.size()) + " experts)");
            slotsOf[static_cast<std::size_t>(ids[slot])].push_back(slot);
        }

    std::vector<float> gathered, result;
    for (std::size_t e = 0; e < slotsOf.size(); ++e) {
        const auto& slots = slotsOf[e];
        if (slots.empty()) continue;
        gathered.resize(slots.size() * hidden);
        result.resize(slots.size() * hidden);
        for (std::size_t i = 0; i < slots.size(); ++i) std::copy_n(x + (slots[i] / k) * hidden, hidden, &gathered[i * hidden]);
        if (w.gateBias.empty()) denseMlp(w.experts[e], gathered.data(), slots.size(), result.data(), pool);
        else biasedExpert(w, e, gathered.data(), slots.size(), result.data(), pool);
        for (std::size_t i = 0; i < slots.size(); ++i)
            cpu::axpy(weights[slots[i]], &result[i * hidden], out + (slots[i] / k) * hidden, hidden);
    }
}

}  // namespace tandem::model

namespace tandem::model {

namespace {

class ReferenceExperts : public RoutedExperts {
public:
    ReferenceExperts(const ModelWeights& weights, cpu::ThreadPool& pool) : weights_(weights), pool_(pool) {}
    void run(int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK, int firstSlot,
             int lastSlot, float* out) override {
        const auto& moe = weights_.layers[static_cast<std::size_t>(layer)].moe;
        if (!moe || moe->experts.empty())
            throw Error("layer " + std::to_string(layer) + " has no routed experts to run on the reference path");
        routedExperts(*moe, x, tokens, ids, weights, topK, firstSlot, lastSlot, out, pool_);
    }

private:
    const ModelWeights& weights_;
    cpu::ThreadPool& pool_;
};

class ComputedOnSubmit : public QueuedRoutedExperts {
public:
    explicit ComputedOnSubmit(std::unique_ptr<RoutedExperts> experts) : experts_(std::move(experts)) {}
    void run(int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK, int firstSlot,
             int lastSlot, float* out) override {
        experts_->run(layer, x, tokens, ids, weights, topK, firstSlot, lastSlot, out);
    }
    void submit(int, int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK,
                int firstSlot, int lastSlot, float* out, std::function<void()> onFinished) override {
        run(layer, x, tokens, ids, weights, topK, firstSlot, lastSlot, out);
        if (onFinished) onFinished();
    }
    void joinQueued() override {}
    bool done(int) const override { return true; }
    void wait(int) override {}
    void keepAwakeFor(std::chrono::microseconds) override {}

private:
    std::unique_ptr<RoutedExperts> experts_;
};

}  // namespace

std::unique_ptr<RoutedExperts> makeReferenceExperts(const ModelWeights& weights, cpu::ThreadPool& pool) {
    return std::make_unique<ReferenceExperts>(weights, pool);
}

std::unique_ptr<QueuedRoutedExperts> computeOnSubmit(std::unique_ptr<RoutedExperts> experts) {
    return std::make_unique<ComputedOnSubmit>(std::move(experts));
}

}  // namespace tandem::model
