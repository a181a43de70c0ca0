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
    // Fills weights_ with each token's unnormalized probability, 1 for the most likely; returns their sum.
    float weigh(std::span<const float> logits);
    // With top-k or top-p, puts the tokens they keep in candidates_, most likely first, and returns true.
    bool keepCandidates(float total);

    struct Candidate {
        float weight;  // unnormalized probability, 1 for the most likely token
        int token;
    };

    SamplingOptions options_;
    std::mt19937_64 rng_;
    std::vector<float> adjusted_;
    std::vector<float> weights_;
    std::vector<Candidate> candidates_;
};

// Index of the largest logit; ties go to the lowest index, as torch.argmax.
int argmax(std::span<const float> logits);

}  // namespace tandem::runtime
