#pragma once
// The decoder stack of every supported architecture on the CPU: embeddings, layers of attention
// (GQA or MLA) and feed-forward (dense or mixture of experts), the final norm and the lm_head.
#include <span>
#include <vector>

#include "cpu/thread_pool.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/weights.h"
#include "runtime/kv_cache.h"

namespace tandem::model {

enum class LogitsFor { LastToken, AllTokens };

class Transformer {
public:
    Transformer(const ModelConfig& config, const ModelWeights& weights, cpu::ThreadPool& pool);

    // Runs `tokens` at positions start .. start + n - 1, appending them to `cache`, and writes the logits
    // ([1 or n, vocab] row-major) to `logits`.
    void forward(std::span<const int> tokens, int start, runtime::KvCache& cache, LogitsFor which,
                 std::vector<float>& logits);

    // A cache shaped for this model.
    runtime::KvCache makeCache(int capacity) const;

private:
    const ModelConfig& config_;
    const ModelWeights& weights_;
    cpu::ThreadPool& pool_;
    Rope rope_;
};

}  // namespace tandem::model
