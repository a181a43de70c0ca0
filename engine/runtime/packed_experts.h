#pragma once
// The routed experts of every MoE layer in the CPU expert engine's packed layout (io/expert_layout.h):
// packed at load from a checkpoint's matrices, or used in place from a packed store's mapped files.
// Runners evaluate them on the engine's thread pool (model::RoutedExperts).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "io/expert_layout.h"
#include "cpu/expert_pack.h"
#include "cpu/moe/packed_layer.h"
#include "cpu/pool/thread_pool.h"
#include "model/config.h"
#include "model/routed_experts.h"
#include "model/weights.h"

namespace tandem::runtime {

class PackedExperts {
public:
    // Packs every MoE layer's experts from the checkpoint (in parallel on the pool).
    PackedExperts(const model::ModelConfig& config, const model::ModelWeights& weights, io::ExpertType type,
                  cpu::ThreadPool& pool);
    // Packs every MoE layer's experts from rowsOf(layer, expert) (synthetic models: random rows).
    PackedExperts(const model::ModelConfig& config, io::ExpertType type, cpu::ThreadPool& pool,
                  const std::function<cpu::ExpertRows(int layer, int expert)>& rowsOf);
    // Experts packed already: bytesOf(layer) gives a MoE layer's experts back to back.
    PackedExperts(const model::ModelConfig& config, const io::ExpertLayout& layout,
                  const std::function<const std::byte*(int layer)>& bytesOf, cpu::ThreadPool& pool);

    io::ExpertType type() const { return layout_.type; }
    const io::ExpertLayout& layout() const { return layout_; }
    // A MoE layer's experts back to back as packed (expert e at e * layout().expertBytes), where the CPU
    // kernels were given them: what the GPU copies for the experts it holds (runtime/gpu/gpu_experts.h).
    const std::byte* layerBytes(int layer) const { return bytes_[static_cast<std::size_t>(layer)]; }
    // Bytes the kernels read for one expert.
    std::uint64_t expertDataBytes() const { return layout_.dataBytes; }
    // Bytes of packed experts in memory (0 when they are read from mapped files).
    std::uint64_t ownedBytes() const;

    // Gives each MoE layer its experts' biases and gated activation (gpt-oss) from the loaded weights; a
    // layer with neither keeps the plain SiLU path.
    void setEpilogues(const model::ModelWeights& weights);

    // A runner for one thread's calls: the engine thread's, or the GPU path's expert bridge.
    std::unique_ptr<model::QueuedRoutedExperts> newRunner();

private:
    // Packs every MoE layer's experts with pack(layer, expert, dst) (in parallel on the pool).
    PackedExperts(const model::ModelConfig& config, io::ExpertType type, cpu::ThreadPool& pool,
                  const std::function<void(int layer, int expert, std::byte* dst)>& pack);

    const model::ModelConfig& config_;
    cpu::ThreadPool& pool_;
    io::ExpertLayout layout_;
    std::vector<std::unique_ptr<cpu::PackedMoeLayer>> layers_;  // per layer; null for dense ones
    std::vector<cpu::NodeMemory> memory_;
    std::vector<const std::byte*> bytes_;  // per layer; null for dense ones
};

}  // namespace tandem::runtime
