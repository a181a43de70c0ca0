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

    // One decode step of several sequences together (issue 27): tokens[i] at position positions[i] of
    // runners[i]'s cache; logits[i] receives that sequence's [vocab] row. `runners` are runners of one
    // engine (the same kind as this one, which is runners[0]). A runner that can reads each routed expert
    // once for every sequence that chose it (the CPU path: one MoE call of runners.size() tokens); this
    // default runs the sequences one after another.
    virtual void decodeBatch(std::span<ModelRunner* const> runners, std::span<const int> tokens,
                             std::span<const int> positions, const model::ForwardOptions& options,
                             std::span<std::vector<float>* const> logits) {
        for (std::size_t i = 0; i < runners.size(); ++i)
            runners[i]->forward(tokens.subspan(i, 1), positions[i], options, *logits[i]);
    }
};

// Turns the sums a runner collected into means per step and fractions of the wall time.
void finishProfile(DecodeProfile& profile, double wallSeconds, double waitSeconds, double expertSeconds);

// A runner of the CPU path with its own KV cache of `capacity` positions, float32 or int8.
std::unique_ptr<ModelRunner> makeCpuRunner(model::Transformer& transformer, int capacity,
                                           KvCacheType kvCache = KvCacheType::Float32);

}  // namespace tandem::runtime
