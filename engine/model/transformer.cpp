#include "model/transformer.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "cpu/dense/matmul.h"
#include "cpu/dense/ops.h"
#include "model/attention.h"
#include "model/feed_forward.h"
#include "model/forward.h"
#include "tandem/error.h"

namespace tandem::model {

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, RoutedExperts& experts,
                         cpu::ThreadPool& pool)
    : config_(config), weights_(weights), experts_(experts), pool_(pool), rope_(config) {}

model::KvCache Transformer::makeCache(int capacity, KvCacheType type) const {
    const ModelConfig& c = config_;
    // Int8 groups (a scale each): MLA's latent row and rope row whole, GQA's rows per key head.
    if (c.attention == AttentionKind::Mla)
        return KvCache(c.numLayers, {c.kvLoraRank, c.qkRopeHeadDim}, capacity, type, {c.kvLoraRank, c.qkRopeHeadDim});
    const int kvDim = c.numKvHeads * c.headDim;
    return KvCache(c.numLayers, {kvDim, kvDim}, capacity, type, {c.headDim, c.headDim});
}

// One forward pass (model/forward.h) over `tokens` at positions start.. of one cache, or over a decode
// batch: token t the next of its own sequence, at positions[t] of *caches[t]. Every row's work but
// attention is the same either way (norms, projections and experts see T rows); the activations of the
// run, and the deferred experts' output waiting for the layer they join.
class Transformer::Pass : public ForwardPass {
public:
    Pass(const Transformer& t, std::span<const int> tokens, int start, KvCache& cache, const ForwardOptions& options,
         std::vector<float>& logits, std::vector<double>* expertSeconds)
        : t_(t), c_(t.config_), tokens_(tokens), start_(start), cache_(cache), options_(options), logits_(&logits),
          expertSeconds_(expertSeconds), T_(tokens.size()), H_(static_cast<std::size_t>(c_.hiddenSize)), x_(T_ * H_),
          normed_(T_ * H_), branch_(T_ * H_) {}

    Pass(const Transformer& t, std::span<const int> tokens, std::span<const int> positions, std::span<KvCache* const> caches,
         const ForwardOptions& options, std::span<std::vector<float>* const> logits, std::vector<double>* expertSeconds)
        : t_(t), c_(t.config_), tokens_(tokens), start_(0), cache_(*caches.front()), positions_(positions), caches_(caches),
          options_(options), batchLogits_(logits), expertSeconds_(expertSeconds), T_(tokens.size()),
          H_(static_cast<std::size_t>(c_.hiddenSize)), x_(T_ * H_), normed_(T_ * H_), branch_(T_ * H_) {}

    void embed() override {
        if (caches_.empty())
            cache_.reserve(start_ + static_cast<int>(T_));
        else
            for (std::size_t t = 0; t < T_; ++t) caches_[t]->reserve(positions_[t] + 1);
        for (std::size_t t = 0; t < T_; ++t) t_.weights_.embed.dequantRow(tokens_[t], &x_[t * H_]);
        const std::size_t half = static_cast<std::size_t>(t_.rope_.dim() / 2);
        cos_.resize(T_ * half);
        sin_.resize(T_ * half);
        for (std::size_t t = 0; t < T_; ++t) t_.rope_.angles(position(t), &cos_[t * half], &sin_[t * half]);
    }

    void attentionBlock(const LayerPlan& layer) override {
        const LayerWeights& lw = t_.weights_.layers[static_cast<std::size_t>(layer.index)];
        normalize(lw.inputNorm);
        AttentionStep step{c_, layer, t_.rope_, cos_.data(), sin_.data(), T_, start_, cache_, t_.pool_};
        if (!caches_.empty()) {
            step.positions = positions_.data();
            step.caches = caches_.data();
        }
        if (layer.attention == AttentionKind::Mla)
            mlaAttention(step, lw.mla, normed_.data(), branch_.data());
        else
            gqaAttention(step, lw.gqa, normed_.data(), branch_.data());
        addBranch();
    }

    void feedForwardBlock(const LayerPlan& layer) override {
        const LayerWeights& lw = t_.weights_.layers[static_cast<std::size_t>(layer.index)];
        normalize(lw.postAttentionNorm);
        const std::size_t n = T_ * H_;
        float* branch = branch_.data();
        std::vector<float> deferredOut;
        if (layer.moe) {
            const int k = c_.router.topK;
            const Deferral& deferral = options_.deferral;
            const int deferred = deferredExperts(layer, k, deferral.deferred);
            std::vector<int> ids(T_ * static_cast<std::size_t>(k));
            std::vector<float> weights(ids.size()), routed(n);
            const RoutingObserver* observer = options_.routing && *options_.routing ? options_.routing : nullptr;
            std::vector<float> choice(observer ? T_ * static_cast<std::size_t>(c_.numExperts) : 0);
            routeTokens(c_, *lw.moe, normed_.data(), T_, ids.data(), weights.data(), t_.pool_, observer ? choice.data() : nullptr);
            if (observer) (*observer)(layer.index, T_, c_.numExperts, choice.data());
            if (lw.moe->shared)
                denseMlp(*lw.moe->shared, normed_.data(), T_, branch, t_.pool_);
            else
                std::fill_n(branch, n, 0.0f);
            const auto t0 = std::chrono::steady_clock::now();
            t_.experts_.run(layer.index, normed_.data(), T_, ids.data(), weights.data(), k, 0, k - deferred, routed.data());
            for (std::size_t i = 0; i < n; ++i) branch[i] += routed[i];
            if (deferred > 0 && !deferral.skip) {
                deferredOut.resize(n);
                t_.experts_.run(layer.index, normed_.data(), T_, ids.data(), weights.data(), k, k - deferred, k,
                                deferredOut.data());
            }
            if (expertSeconds_)
                (*expertSeconds_)[static_cast<std::size_t>(layer.index)] +=
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        } else {
            denseMlp(*lw.dense, normed_.data(), T_, branch, t_.pool_);
        }
        // The previous layer's deferred experts (if it deferred any) join this layer's output.
        if (layer.deferredFrom >= 0 && !pending_.empty())
            for (std::size_t i = 0; i < n; ++i) branch[i] += pending_[i];
        pending_ = std::move(deferredOut);
        addBranch();
    }

    // A decode batch wants every row, each into its sequence's logits.
    void head() override {
        const bool every = options_.logits == LogitsFor::AllTokens || !caches_.empty();
        const std::size_t first = every ? 0 : T_ - 1;
        const std::size_t rows = T_ - first;
        for (std::size_t t = first; t < T_; ++t)
            cpu::rmsNorm(&x_[t * H_], t_.weights_.finalNorm.data(), c_.rmsNormEps, &normed_[t * H_], H_);
        const auto V = static_cast<std::size_t>(c_.vocabSize);
        std::vector<float> batch;
        std::vector<float>& logits = logits_ ? *logits_ : batch;
        logits.resize(rows * V);
        cpu::matmul(t_.weights_.lmHead, &normed_[first * H_], H_, rows, logits.data(), V, t_.pool_);
        for (std::size_t t = 0; t < batchLogits_.size(); ++t)
            batchLogits_[t]->assign(batch.begin() + static_cast<std::ptrdiff_t>(t * V),
                                    batch.begin() + static_cast<std::ptrdiff_t>((t + 1) * V));
    }

private:
    int position(std::size_t t) const { return caches_.empty() ? start_ + static_cast<int>(t) : positions_[t]; }
    void normalize(const std::vector<float>& weight) {
        for (std::size_t t = 0; t < T_; ++t) cpu::rmsNorm(&x_[t * H_], weight.data(), c_.rmsNormEps, &normed_[t * H_], H_);
    }
    void addBranch() {
        for (std::size_t i = 0; i < T_ * H_; ++i) x_[i] += branch_[i];
    }

    const Transformer& t_;
    const ModelConfig& c_;
    std::span<const int> tokens_;
    int start_;
    KvCache& cache_;
    std::span<const int> positions_;      // a decode batch's; empty for one sequence's run
    std::span<KvCache* const> caches_;   // the same
    const ForwardOptions& options_;
    std::vector<float>* logits_ = nullptr;                  // one sequence's run
    std::span<std::vector<float>* const> batchLogits_;      // a decode batch: one row each
    std::vector<double>* expertSeconds_;
    std::size_t T_, H_;
    std::vector<float> x_, normed_, branch_, cos_, sin_;
    std::vector<float> pending_;  // the deferred experts' output, for the layer they join
};

void Transformer::forward(std::span<const int> tokens, int start, KvCache& cache, const ForwardOptions& options,
                          std::vector<float>& logits, std::vector<double>* expertSeconds) {
    if (tokens.empty()) throw Error("nothing to run: no tokens were given");
    if (expertSeconds) expertSeconds->resize(static_cast<std::size_t>(config_.numLayers), 0.0);
    Pass pass(*this, tokens, start, cache, options, logits, expertSeconds);
    runForward(config_, pass);
}

void Transformer::forwardBatch(std::span<const int> tokens, std::span<const int> positions, std::span<KvCache* const> caches,
                               const ForwardOptions& options, std::span<std::vector<float>* const> logits,
                               std::vector<double>* expertSeconds) {
    if (tokens.empty()) throw Error("nothing to run: no tokens were given");
    if (positions.size() != tokens.size() || caches.size() != tokens.size() || logits.size() != tokens.size())
        throw Error("a decode batch needs a position, a cache and logits for each of its tokens");
    if (expertSeconds) expertSeconds->resize(static_cast<std::size_t>(config_.numLayers), 0.0);
    Pass pass(*this, tokens, positions, caches, options, logits, expertSeconds);
    runForward(config_, pass);
}

}  // namespace tandem::model
