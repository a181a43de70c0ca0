#pragma once
// The feed-forward blocks: a dense SwiGLU MLP, and the mixture of experts (router, routed experts,
// shared experts). Both read normalized hidden states [T, hidden] and write [T, hidden].
#include <cstddef>

#include "cpu/pool/thread_pool.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem::model {

// out = down(silu(gate(x)) * up(x)) for each of the tokens.
void denseMlp(const MlpWeights& w, const float* x, std::size_t tokens, float* out, cpu::ThreadPool& pool);

// Routes every token (ids and weights [tokens, topK], heaviest first); with `choice` ([tokens,
// numExperts]) also the scores the choice ranked (routeToken).
void routeTokens(const ModelConfig& config, const MoeWeights& w, const float* x, std::size_t tokens, int* ids,
                 float* weights, cpu::ThreadPool& pool, float* choice = nullptr);

// out = Σ weight · expert(x) over the routing slots [firstSlot, lastSlot) of every token: all slots for
// exact inference, the heaviest ones for Expert Deferral's immediate part, the rest for its deferred part.
void routedExperts(const MoeWeights& w, const float* x, std::size_t tokens, const int* ids, const float* weights,
                   int topK, int firstSlot, int lastSlot, float* out, cpu::ThreadPool& pool);

}  // namespace tandem::model
