#pragma once
// Models with the exact shapes of real ones and random weights, built in memory: what the benchmarks
// run when the real checkpoint (hundreds of GB) is not on the machine. Same code path as a loaded model.
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cpu/expert_pack.h"
#include "cpu/pool/thread_pool.h"
#include "model/config.h"
#include "model/weights.h"

namespace tandem::model {

// "deepseek-v2-lite", "qwen3-30b-a3b", "deepseek-v3-4l" (DeepSeek-V3's dimensions, 1 dense + 3 MoE
// layers), "tiny" (for tests). Throws tandem::Error for an unknown name.
ModelConfig syntheticConfig(const std::string& name);
std::vector<std::string> syntheticModelNames();

// Random weights (uniform, std 0.02; norms 1) for every tensor of the config, as bf16. The routed experts
// are left out: they are packed straight from randomExpertRows, never held as bf16.
class SyntheticWeights {
public:
    SyntheticWeights(const ModelConfig& config, std::uint64_t seed, cpu::ThreadPool& pool);
    const ModelWeights& weights() const { return weights_; }
    std::uint64_t bytes() const { return bytes_; }

private:
    WeightMatrix matrix(std::int64_t rows, std::int64_t cols);
    std::vector<float> ones(std::int64_t n) const { return std::vector<float>(static_cast<std::size_t>(n), 1.0f); }
    MlpWeights mlp(std::int64_t inner);

    const ModelConfig& config_;
    cpu::ThreadPool& pool_;
    std::uint64_t seed_;
    std::uint64_t bytes_ = 0;
    std::deque<std::unique_ptr<std::uint16_t[]>> storage_;
    ModelWeights weights_;
};

// Random rows (same distribution) of routed expert `expert` of `layer`, a pure function of the seed:
// gate and up rows of `hidden` values, down rows of `inter`.
cpu::ExpertRows randomExpertRows(std::uint64_t seed, int layer, int expert, int hidden, int inter);

}  // namespace tandem::model
