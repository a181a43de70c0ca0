#include "runtime/packed_experts.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "cpu/expert_pack.h"
#include "cpu/int4_repack.h"
#include "cpu/moe/moe_layer.h"
#include "tandem/error.h"

namespace tandem::runtime {

namespace {

class PackedRunner : public model::QueuedRoutedExperts {
public:
    PackedRunner(const std::vector<std::unique_ptr<cpu::PackedMoeLayer>>& layers, int hidden, cpu::ExpertPool& pool)
        : layers_(layers), hidden_(static_cast<std::size_t>(hidden)), pool_(pool), runner_(pool) {}

    void run(int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK, int firstSlot,
             int lastSlot, float* out) override {
        if (const auto input = prepare(layer, x, tokens, ids, weights, topK, firstSlot, lastSlot, out, ids_, weights_))
            runner_.run(*packed(layer), *input);
    }

    void submit(int lane, int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK,
                int firstSlot, int lastSlot, float* out, std::function<void()> onFinished) override {
        while (lanes_.size() <= static_cast<std::size_t>(lane)) lanes_.push_back(std::make_unique<Lane>(pool_));
        Lane& l = *lanes_[static_cast<std::size_t>(lane)];
        if (const auto input = prepare(layer, x, tokens, ids, weights, topK, firstSlot, lastSlot, out, l.ids, l.weights))
            l.runner.enqueueJoined(*packed(layer), *input, std::move(onFinished));
        else if (onFinished)
            onFinished();
    }

    void joinQueued() override { pool_.joinQueued(); }

    bool done(int lane) const override {
        return static_cast<std::size_t>(lane) >= lanes_.size() || lanes_[static_cast<std::size_t>(lane)]->runner.done();
    }

    void wait(int lane) override {
        if (static_cast<std::size_t>(lane) < lanes_.size()) lanes_[static_cast<std::size_t>(lane)]->runner.wait();
    }

    void keepAwakeFor(std::chrono::microseconds d) override { pool_.keepAwakeFor(d); }

private:
    struct Lane {
        explicit Lane(cpu::ExpertPool& pool) : runner(pool) {}
        cpu::MoeRunner runner;
        std::vector<int> ids;
        std::vector<float> weights;
    };

    const cpu::PackedMoeLayer* packed(int layer) const {
        const auto* p = static_cast<std::size_t>(layer) < layers_.size() ? layers_[static_cast<std::size_t>(layer)].get()
                                                                          : nullptr;
        if (!p) throw Error("layer " + std::to_string(layer) + " has no packed routed experts");
        return p;
    }

    // The kernels' input, which sets out (zeroed by the pool), or nothing (out zeroed here) when there is
    // nothing to compute. The kernels take
    // [tokens, slots] routing: the requested columns are picked out into idsPart / weightsPart.
    std::optional<cpu::MoeInput> prepare(int layer, const float* x, std::size_t tokens, const int* ids,
                                         const float* weights, int topK, int firstSlot, int lastSlot, float* out,
                                         std::vector<int>& idsPart, std::vector<float>& weightsPart) const {
        const int slots = lastSlot - firstSlot;
        if (slots <= 0 || tokens == 0) {
            std::fill_n(out, tokens * hidden_, 0.0f);
            return std::nullopt;
        }
        packed(layer);
        if (slots != topK) {
            idsPart.resize(tokens * static_cast<std::size_t>(slots));
            weightsPart.resize(idsPart.size());
            for (std::size_t t = 0; t < tokens; ++t)
                for (int s = 0; s < slots; ++s) {
                    idsPart[t * slots + s] = ids[t * topK + firstSlot + s];
                    weightsPart[t * slots + s] = weights[t * topK + firstSlot + s];
                }
            ids = idsPart.data();
            weights = weightsPart.data();
        }
        // The pool zeroes out (in parallel, beside its first phase): a 2048-token prompt chunk's rows are
        // 16 MB for Qwen3, milliseconds for one thread before the pool could start.
        return cpu::MoeInput{x, hidden_, static_cast<int>(tokens), ids, weights, slots, out, hidden_, true};
    }

    const std::vector<std::unique_ptr<cpu::PackedMoeLayer>>& layers_;
    std::size_t hidden_;
    cpu::ExpertPool& pool_;
    cpu::MoeRunner runner_;
    std::vector<int> ids_;
    std::vector<float> weights_;
    std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace

PackedExperts::PackedExperts(const model::ModelConfig& c, io::ExpertType type, cpu::ThreadPool& pool,
                             const std::function<void(int, int, std::byte*)>& pack)
    : config_(c), pool_(pool), layout_(io::ExpertLayout::make(type, c.hiddenSize, c.moeIntermediateSize)),
      layers_(static_cast<std::size_t>(c.numLayers)), bytes_(static_cast<std::size_t>(c.numLayers), nullptr) {
    for (int l = 0; l < c.numLayers; ++l) {
        if (!c.isMoeLayer(l)) continue;
        auto& memory = memory_.emplace_back(static_cast<std::size_t>(c.numExperts) * layout_.expertBytes, -1);
        std::byte* base = memory.data();
        bytes_[static_cast<std::size_t>(l)] = base;
        pool.parallelFor(static_cast<std::size_t>(c.numExperts), 1, [&](std::size_t e0, std::size_t e1) {
            for (std::size_t e = e0; e < e1; ++e) pack(l, static_cast<int>(e), base + e * layout_.expertBytes);
        });
        layers_[static_cast<std::size_t>(l)] =
            std::make_unique<cpu::PackedMoeLayer>(layout_, c.numExperts, base, pool.experts().topology());
    }
}

PackedExperts::PackedExperts(const model::ModelConfig& c, io::ExpertType type, cpu::ThreadPool& pool,
                             const std::function<cpu::ExpertRows(int, int)>& rowsOf)
    : PackedExperts(c, type, pool, [&](int layer, int expert, std::byte* dst) {
          cpu::packExpert(layout_, rowsOf(layer, expert), dst);
      }) {}

// compressed-tensors int4 experts go into INT4 as they are (cpu/int4_repack.h).
PackedExperts::PackedExperts(const model::ModelConfig& c, const model::ModelWeights& weights, io::ExpertType type,
                             cpu::ThreadPool& pool)
    : PackedExperts(c, type, pool, [&](int layer, int expert, std::byte* dst) {
          const auto& moe = weights.layers[static_cast<std::size_t>(layer)].moe;
          if (!moe || moe->experts.size() != static_cast<std::size_t>(c.numExperts))
              throw Error("layer " + std::to_string(layer) + " has no routed experts to pack");
          const auto& m = moe->experts[static_cast<std::size_t>(expert)];
          try {
              cpu::packCheckpointExpert(layout_, m.gate, m.up, m.down, dst);
          } catch (const Error& e) {
              throw Error("layer " + std::to_string(layer) + ", expert " + std::to_string(expert) + ": " + e.what());
          }
      }) {}

PackedExperts::PackedExperts(const model::ModelConfig& c, const io::ExpertLayout& layout,
                             const std::function<const std::byte*(int)>& bytesOf, cpu::ThreadPool& pool)
    : config_(c), pool_(pool), layout_(layout), layers_(static_cast<std::size_t>(c.numLayers)),
      bytes_(static_cast<std::size_t>(c.numLayers), nullptr) {
    for (int l = 0; l < c.numLayers; ++l)
        if (c.isMoeLayer(l)) {
            bytes_[static_cast<std::size_t>(l)] = bytesOf(l);
            layers_[static_cast<std::size_t>(l)] =
                std::make_unique<cpu::PackedMoeLayer>(layout_, c.numExperts, bytes_[static_cast<std::size_t>(l)],
                                                      pool.experts().topology());
        }
}

void PackedExperts::setEpilogues(const model::ModelWeights& weights) {
    for (std::size_t l = 0; l < layers_.size() && l < weights.layers.size(); ++l) {
        const auto& moe = weights.layers[l].moe;
        if (!layers_[l] || !moe) continue;
        if (moe->gateBias.empty() && moe->upBias.empty() && moe->downBias.empty() &&
            moe->activation == model::ExpertActivation::Silu)
            continue;
        cpu::MoeExpertEpilogue e;
        e.activation = moe->activation == model::ExpertActivation::ClampedSwiglu ? cpu::GatedActivation::ClampedSwiglu
                                                                                 : cpu::GatedActivation::SiluMul;
        e.alpha = moe->swigluAlpha;
        e.limit = moe->swigluLimit;
        e.gateBias = moe->gateBias;
        e.upBias = moe->upBias;
        e.downBias = moe->downBias;
        layers_[l]->setEpilogue(e);
    }
}

std::uint64_t PackedExperts::ownedBytes() const {
    std::uint64_t n = 0;
    for (const auto& m : memory_) n += m.size();
    return n;
}

std::unique_ptr<model::QueuedRoutedExperts> PackedExperts::newRunner() {
    return std::make_unique<PackedRunner>(layers_, config_.hiddenSize, pool_.experts());
}

}  // namespace tandem::runtime
