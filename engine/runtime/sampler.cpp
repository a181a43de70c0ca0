#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem::runtime {

int argmax(std::span<const float> logits) {
    return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}

int Sampler::pick(std::span<const float> logits) {
    if (options_.temperature <= 0.0f) return argmax(logits);

    const int n = static_cast<int>(logits.size());
    order_.resize(static_cast<std::size_t>(n));
    std::iota(order_.begin(), order_.end(), 0);
    const auto byLogit = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    int kept = options_.topK > 0 ? std::min(options_.topK, n) : n;
    std::partial_sort(order_.begin(), order_.begin() + kept, order_.end(), byLogit);

    probs_.resize(static_cast<std::size_t>(kept));
    const float maxLogit = logits[order_[0]];
    float sum = 0.0f;
    for (int i = 0; i < kept; ++i) {
        probs_[i] = std::exp((logits[order_[i]] - maxLogit) / options_.temperature);
        sum += probs_[i];
    }
    // Smallest prefix whose probability reaches top_p (at least one token).
    if (options_.topP < 1.0f) {
        float cumulative = 0.0f;
        for (int i = 0; i < kept; ++i) {
            cumulative += probs_[i] / sum;
            if (cumulative >= options_.topP) {
                kept = i + 1;
                break;
            }
        }
        sum = std::accumulate(probs_.begin(), probs_.begin() + kept, 0.0f);
    }
    std::uniform_real_distribution<float> uniform(0.0f, sum);
    const float r = uniform(rng_);
    float cumulative = 0.0f;
    for (int i = 0; i < kept; ++i) {
        cumulative += probs_[i];
        if (r < cumulative) return order_[i];
    }
    return order_[kept - 1];
}

}  // namespace tandem::runtime
