#include "model/transformer.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "cpu/dense/matmul.h"
#include "cpu/dense/ops.h"
#include "model/attention.h"
#include "model/feed_forward.h"
#include "tandem/error.h"

namespace tandem::model {

namespace {
RoutingObserver& routingObserver() {
    static RoutingObserver observer;
    return observer;
}
}  // namespace

void Transformer::setRoutingObserver(RoutingObserver observer) { routingObserver() = std::move(observer); }

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, RoutedExperts& experts,
                         cpu::ThreadPool& pool)
    : config_(config), weights_(weights), experts_(experts), pool_(pool), rope_(config) {}

model::KvCache Transformer::makeCache(int capacity) const {
    const ModelConfig& c = config_;
    if (c.attention == AttentionKind::Mla) return KvCache(c.numLayers, {c.kvLoraRank, c.qkRopeHeadDim}, capacity);
    const int kvDim = c.numKvHeads * c.headDim;
    return KvCache(c.numLayers, {kvDim, kvDim}, capacity);
}

void Transformer::feedForward(int layer, const float* normed, std::size_t T, const Deferral& deferral, float* branch,
                              std::vector<float>& pending, double* expertSeconds) {
    const ModelConfig& c = config_;
    const LayerWeights& lw = weights_.layers[static_cast<std::size_t>(layer)];
    const std::size_t n = T * static_cast<std::size_t>(c.hiddenSize);
    std::vector<float> deferredOut;
    if (lw.moe) {
        const int k = c.router.topK;
        const bool canDefer = layer + 1 < c.numLayers && c.isMoeLayer(layer + 1);
        const int deferred = canDefer ? std::clamp(deferral.deferred, 0, k - 1) : 0;
        std::vector<int> ids(T * static_cast<std::size_t>(k));
        std::vector<float> weights(ids.size()), routed(n);
        const RoutingObserver& observer = routingObserver();
        std::vector<float> choice(observer ? T * static_cast<std::size_t>(c.numExperts) : 0);
        routeTokens(c, *lw.moe, normed, T, ids.data(), weights.data(), pool_, observer ? choice.data() : nullptr);
        if (observer) observer(layer, T, c.numExperts, choice.data());
        if (lw.moe->shared)
            denseMlp(*lw.moe->shared, normed, T, branch, pool_);
        else
            std::fill_n(branch, n, 0.0f);
        const auto t0 = std::chrono::steady_clock::now();
        experts_.run(layer, normed, T, ids.data(), weights.data(), k, 0, k - deferred, routed.data());
        for (std::size_t i = 0; i < n; ++i) branch[i] += routed[i];
        if (deferred > 0 && !deferral.skip) {
            deferredOut.resize(n);
            experts_.run(layer, normed, T, ids.data(), weights.data(), k, k - deferred, k, deferredOut.data());
        }
        if (expertSeconds) *expertSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
        denseMlp(*lw.dense, normed, T, branch, pool_);
    }
    if (!pending.empty())
        for (std::size_t i = 0; i < n; ++i) branch[i] += pending[i];
    pending = std::move(deferredOut);
}

void Transformer::forward(std::span<const int> tokens, int start, model::KvCache& cache, const ForwardOptions& options,
                          std::vector<float>& logits, std::vector<double>* expertSeconds) {
    if (expertSeconds) expertSeconds->resize(static_cast<std::size_t>(config_.numLayers), 0.0);
    const ModelConfig& c = config_;
    const std::size_t T = tokens.size();
    const auto H = static_cast<std::size_t>(c.hiddenSize);
    if (T == 0) throw Error("nothing to run: no tokens were given");
    for (const int id : tokens)
        if (id < 0 || id >= c.vocabSize)
            throw Error("token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                        std::to_string(c.vocabSize));
    cache.reserve(start + static_cast<int>(T));

    std::vector<float> x(T * H), normed(T * H), branch(T * H);
    for (std::size_t t = 0; t < T; ++t) weights_.embed.dequantRow(tokens[t], &x[t * H]);

    const std::size_t half = static_cast<std::size_t>(rope_.dim() / 2);
    std::vector<float> cos(T * half), sin(T * half);
    for (std::size_t t = 0; t < T; ++t) rope_.angles(start + static_cast<int>(t), &cos[t * half], &sin[t * half]);

    std::vector<float> pendingDeferred;
    for (int l = 0; l < c.numLayers; ++l) {
        const LayerWeights& lw = weights_.layers[static_cast<std::size_t>(l)];
        for (std::size_t t = 0; t < T; ++t) cpu::rmsNorm(&x[t * H], lw.inputNorm.data(), c.rmsNormEps, &normed[t * H], H);
        const AttentionStep step{c, rope_, cos.data(), sin.data(), T, start, l, cache, pool_};
        if (c.attention == AttentionKind::Mla)
            mlaAttention(step, lw.mla, normed.data(), branch.data());
        else
            gqaAttention(step, lw.gqa, normed.data(), branch.data());
        for (std::size_t i = 0; i < T * H; ++i) x[i] += branch[i];

        for (std::size_t t = 0; t < T; ++t)
            cpu::rmsNorm(&x[t * H], lw.postAttentionNorm.data(), c.rmsNormEps, &normed[t * H], H);
        feedForward(l, normed.data(), T, options.deferral, branch.data(), pendingDeferred,
                    expertSeconds ? &(*expertSeconds)[static_cast<std::size_t>(l)] : nullptr);
        for (std::size_t i = 0; i < T * H; ++i) x[i] += branch[i];
    }

    const std::size_t first = options.logits == LogitsFor::AllTokens ? 0 : T - 1;
    const std::size_t rows = T - first;
    for (std::size_t t = first; t < T; ++t) cpu::rmsNorm(&x[t * H], weights_.finalNorm.data(), c.rmsNormEps, &normed[t * H], H);
    const auto V = static_cast<std::size_t>(c.vocabSize);
    logits.resize(rows * V);
    cpu::matmul(weights_.lmHead, &normed[first * H], H, rows, logits.data(), V, pool_);
}

}  // namespace tandem::model
