#pragma once
// The forward pass (model/forward.h) on the CPU: embeddings, layers of attention (GQA or MLA) and
// feed-forward (dense or mixture of experts), the final norm and the lm_head.
#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "cpu/pool/thread_pool.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/routed_experts.h"
#include "model/weights.h"
#include "model/kv_cache.h"
#include "tandem/engine.h"

namespace tandem::model {

enum class LogitsFor { LastToken, AllTokens };

// Expert Deferral: of each token's k routed experts, the `deferred` lowest-weighted ones of layer l are
// not waited for; their output joins layer l+1's MoE output. Only a layer followed by a MoE layer
// defers (so never the last).
// With `skip`, those experts are dropped instead (the baseline deferral is measured against).
struct Deferral {
    int deferred = 0;
    bool skip = false;
};

using tandem::RoutingObserver;  // tandem/engine.h

struct ForwardOptions {
    LogitsFor logits = LogitsFor::LastToken;
    Deferral deferral;
    const RoutingObserver* routing = nullptr;  // sees the routers' choice scores (the CPU path only)
};

class Transformer {
public:
    Transformer(const ModelConfig& config, const ModelWeights& weights, RoutedExperts& experts, cpu::ThreadPool& pool);

    // Runs `tokens` at positions start .. start + n - 1, appending them to `cache`, and writes the logits
    // ([1 or n, vocab] row-major) to `logits`.
    // With `expertSeconds`, the time spent in each layer's routed experts is added to it.
    void forward(std::span<const int> tokens, int start, model::KvCache& cache, const ForwardOptions& options,
                 std::vector<float>& logits, std::vector<double>* expertSeconds = nullptr);

    // One decode step of several sequences together (a decode batch, issue 27): tokens[i] at position
    // positions[i] of *caches[i], its logits row [vocab] into *logits[i]. Norms, projections, the dense
    // and shared MLPs and the lm_head run as one product of tokens.size() rows, each token attends to its own
    // cache, and the routed experts run as one call of tokens.size() tokens, so an expert several sequences
    // chose is read once for all of them. Each row equals its sequence's forward() of one token (up to
    // the order of float additions). options.routing sees tokens.size() rows, in order.
    void forwardBatch(std::span<const int> tokens, std::span<const int> positions, std::span<KvCache* const> caches,
                      const ForwardOptions& options, std::span<std::vector<float>* const> logits,
                      std::vector<double>* expertSeconds = nullptr);

    // A cache shaped for this model, float32 or int8 (a scale per key head; MLA: per latent and rope row).
    model::KvCache makeCache(int capacity, KvCacheType type = KvCacheType::Float32) const;

private:
    class Pass;

    const ModelConfig& config_;
    const ModelWeights& weights_;
    RoutedExperts& experts_;
    cpu::ThreadPool& pool_;
    Rope rope_;
};

}  // namespace tandem::model
