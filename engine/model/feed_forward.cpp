#include "model/feed_forward.h"

#include <vector>

#include "cpu/matmul.h"
#include "cpu/ops.h"
#include "model/router.h"

namespace tandem::model {

void denseMlp(const MlpWeights& w, const float* x, std::size_t tokens, float* out, cpu::ThreadPool& pool) {
    const auto hidden = static_cast<std::size_t>(w.gate.cols);
    const auto inner = static_cast<std::size_t>(w.gate.rows);
    std::vector<float> gate(tokens * inner), up(tokens * inner);
    cpu::matmul(w.gate, x, hidden, tokens, gate.data(), inner, pool);
    cpu::matmul(w.up, x, hidden, tokens, up.data(), inner, pool);
    cpu::siluMul(gate.data(), up.data(), gate.size());
    cpu::matmul(w.down, gate.data(), inner, tokens, out, hidden, pool);
}

void mixtureOfExperts(const ModelConfig& c, const MoeWeights& w, const float* x, std::size_t tokens, float* out,
                      cpu::ThreadPool& pool) {
    const auto hidden = static_cast<std::size_t>(c.hiddenSize);
    const auto experts = static_cast<std::size_t>(c.numExperts);
    const auto k = static_cast<std::size_t>(c.router.topK);

    std::vector<float> logits(tokens * experts);
    cpu::matmul(w.router, x, hidden, tokens, logits.data(), experts, pool);
    std::vector<int> ids(tokens * k);
    std::vector<float> weights(tokens * k);
    for (std::size_t t = 0; t < tokens; ++t)
        routeToken(c.router, &logits[t * experts], c.numExperts, w.correctionBias.empty() ? nullptr : w.correctionBias.data(),
                   &ids[t * k], &weights[t * k]);

    // Tokens grouped by expert, so each expert's weights are read once for all of its tokens.
    std::vector<std::vector<std::size_t>> slotsOf(experts);
    for (std::size_t slot = 0; slot < tokens * k; ++slot) slotsOf[static_cast<std::size_t>(ids[slot])].push_back(slot);

    if (w.shared)
        denseMlp(*w.shared, x, tokens, out, pool);
    else
        std::fill_n(out, tokens * hidden, 0.0f);

    std::vector<float> gathered, result;
    for (std::size_t e = 0; e < experts; ++e) {
        const auto& slots = slotsOf[e];
        if (slots.empty()) continue;
        gathered.resize(slots.size() * hidden);
        result.resize(slots.size() * hidden);
        for (std::size_t i = 0; i < slots.size(); ++i)
            std::copy_n(x + (slots[i] / k) * hidden, hidden, &gathered[i * hidden]);
        denseMlp(w.experts[e], gathered.data(), slots.size(), result.data(), pool);
        for (std::size_t i = 0; i < slots.size(); ++i)
            cpu::axpy(weights[slots[i]], &result[i * hidden], out + (slots[i] / k) * hidden, hidden);
    }
}

}  // namespace tandem::model
