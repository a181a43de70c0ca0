#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>

#include "tandem/error.h"

namespace tandem::runtime {

int argmax(std::span<const float> logits) {
    return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
    const auto check = [](bool ok, const char* what) {
        if (!ok) throw Error(std::string("invalid sampling setting: ") + what);
    };
    check(options.temperature >= 0.0f, "temperature must not be negative");
    check(options.topP > 0.0f && options.topP <= 1.0f, "top-p must be in (0, 1]");
    check(options.topK >= 0, "top-k must not be negative");
    check(options.minP >= 0.0f && options.minP <= 1.0f, "min-p must be in [0, 1]");
    check(options.repetitionPenalty > 0.0f, "the repetition penalty must be positive");
    check(options.penaltyWindow >= 0, "the penalty window must not be negative");
}

bool Sampler::penalizes() const {
    return options_.repetitionPenalty != 1.0f || options_.presencePenalty != 0.0f || options_.frequencyPenalty != 0.0f;
}

std::span<const float> Sampler::penalized(std::span<const float> logits, std::span<const int> context) {
    if (!penalizes() || context.empty()) return logits;
    if (options_.penaltyWindow > 0 && context.size() > static_cast<std::size_t>(options_.penaltyWindow))
        context = context.last(static_cast<std::size_t>(options_.penaltyWindow));
    std::unordered_map<int, int> counts;
    for (const int t : context)
        if (t >= 0 && static_cast<std::size_t>(t) < logits.size()) ++counts[t];
    adjusted_.assign(logits.begin(), logits.end());
    for (const auto& [token, n] : counts) {
        float& l = adjusted_[static_cast<std::size_t>(token)];
        l = l > 0 ? l / options_.repetitionPenalty : l * options_.repetitionPenalty;
        l -= options_.presencePenalty + options_.frequencyPenalty * static_cast<float>(n);
    }
    return adjusted_;
}

int Sampler::keepCandidates(std::span<const float> logits) {
    const int n = static_cast<int>(logits.size());
    const float maxLogit = *std::max_element(logits.begin(), logits.end());
    const float invTemperature = 1.0f / options_.temperature;
    // Weights relative to the most likely token (whose weight is 1). Filters in transformers' order:
    // top-k, top-p, min-p; the most likely token always survives.
    const auto weight = [&](int token) { return std::exp((logits[token] - maxLogit) * invTemperature); };
    const auto moreLikely = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };

    order_.resize(static_cast<std::size_t>(n));
    std::iota(order_.begin(), order_.end(), 0);
    if (options_.topK > 0 && static_cast<std::size_t>(options_.topK) < order_.size()) {
        std::nth_element(order_.begin(), order_.begin() + options_.topK, order_.end(), moreLikely);
        order_.resize(static_cast<std::size_t>(options_.topK));
    }
    if (options_.topP < 1.0f) {
        float total = 0.0f;
        for (const int t : order_) total += weight(t);
        // Sort only as far as the nucleus reaches: fully sorting 150k logits per token would cost more
        // than everything else the sampler does.
        std::size_t sorted = std::min<std::size_t>(order_.size(), 256);
        for (;;) {
            std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(sorted), order_.end(), moreLikely);
            float cumulative = 0.0f;
            std::size_t nucleus = 0;
            while (nucleus < sorted && cumulative < options_.topP * total) cumulative += weight(order_[nucleus++]);
            if (cumulative >= options_.topP * total || sorted == order_.size()) {
                order_.resize(std::max<std::size_t>(nucleus, 1));
                break;
            }
            sorted = std::min(order_.size(), sorted * 4);
        }
    }
    if (options_.minP > 0.0f)
        order_.erase(std::remove_if(order_.begin(), order_.end(), [&](int t) { return weight(t) < options_.minP; }),
                     order_.end());
    probs_.resize(order_.size());
    for (std::size_t i = 0; i < order_.size(); ++i) probs_[i] = weight(order_[i]);
    return static_cast<int>(order_.size());
}

int Sampler::pick(std::span<const float> logits, std::span<const int> context) {
    logits = penalized(logits, context);
    if (options_.temperature <= 0.0f) return argmax(logits);

    const int kept = keepCandidates(logits);
    const float sum = std::accumulate(probs_.begin(), probs_.begin() + kept, 0.0f);
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
