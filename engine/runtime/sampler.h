#pragma once
// Picks the next token from a row of logits: penalties for tokens already in the context, then greedy,
// or temperature / top-k / top-p / min-p sampling with a seeded generator so the same seed gives the
// same text.
#include <random>
#include <span>
#include <vector>

#include "tandem/engine.h"

namespace tandem::runtime {

class Sampler {
public:
    explicit Sampler(const SamplingOptions& options);
    // `context`: the tokens the penalties look at.
    int pick(std::span<const float> logits, std::span<const int> context = {});

private:
    bool penalizes() const;
    // Copies the logits with the repetition, presence and frequency penalties applied.
    std::span<const float> penalized(std::span<const float> logits, std::span<const int> context);
    // The candidates that survive top-k, top-p and min-p in order_, their unnormalized probabilities
    // in probs_; returns how many.
    int keepCandidates(std::span<const float> logits);

    SamplingOptions options_;
    std::mt19937_64 rng_;
    std::vector<float> adjusted_;
    std::vector<int> order_;
    std::vector<float> probs_;
};

// Index of the largest logit; ties go to the lowest index, as torch.argmax.
int argmax(std::span<const float> logits);

}  // namespace tandem::runtime
