#pragma once
// Picks the next token from a row of logits: greedy, or temperature / top-k / top-p sampling with a
// seeded generator so the same seed gives the same text.
#include <random>
#include <span>
#include <vector>

#include "tandem/engine.h"

namespace tandem::runtime {

class Sampler {
public:
    explicit Sampler(const SamplingOptions& options);
    int pick(std::span<const float> logits);

private:
    SamplingOptions options_;
    std::mt19937_64 rng_;
    std::vector<int> order_;
    std::vector<float> probs_;
};

// Index of the largest logit; ties go to the lowest index, as torch.argmax.
int argmax(std::span<const float> logits);

}  // namespace tandem::runtime
