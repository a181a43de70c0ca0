#pragma once
// What a session runs tokens through: the model on one device together with that conversation's KV
// cache, wherever the cache lives. The CPU reference path and the hybrid GPU path implement it.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "tandem/engine.h"

namespace tandem::runtime {

class ModelRunner {
public:
    virtual ~ModelRunner() = default;
    // Runs tokens at positions start .. start + n - 1 (overwriting any cached rows from `start` on) and
    // writes the requested logits rows.
    virtual void forward(std::span<const int> tokens, int start, const model::ForwardOptions& options,
                         std::vector<float>& logits) = 0;
    // Timings of the single-token steps since the last call, summed; DecodeProfile::finish averages.
    virtual DecodeProfile takeProfile() = 0;
};

// Turns the sums a runner collected into means per step and fractions of the wall time.
void finishProfile(DecodeProfile& profile, double wallSeconds, double waitSeconds, double expertSeconds);

std::unique_ptr<ModelRunner> makeCpuRunner(model::Transformer& transformer, int capacity);

}  // namespace tandem::runtime
