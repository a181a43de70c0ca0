#pragma once
// The feed-forward blocks: a dense SwiGLU MLP, and the mixture of experts (router, routed experts,
// shared experts). Both read normalized hidden states [T, hidden] and write [T, hidden].
#include <cstddef>

#include "cpu/thread_pool.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem::model {

// out = down(silu(gate(x)) * up(x)) for each of the tokens.
void denseMlp(const MlpWeights& w, const float* x, std::size_t tokens, float* out, cpu::ThreadPool& pool);

void mixtureOfExperts(const ModelConfig& config, const MoeWeights& w, const float* x, std::size_t tokens, float* out,
                      cpu::ThreadPool& pool);

}  // namespace tandem::model
