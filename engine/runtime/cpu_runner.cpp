#include "runtime/model_runner.h"

#include <chrono>

#include "tandem/error.h"

namespace tandem::runtime {

void finishProfile(DecodeProfile& p, double wallSeconds, double waitSeconds, double expertSeconds) {
    if (p.steps == 0 || wallSeconds <= 0) return;
    const double perStepMs = 1000.0 / static_cast<double>(p.steps);
    p.stepMs = wallSeconds * perStepMs;
    p.expertPoolBusyFraction = std::min(1.0, expertSeconds / wallSeconds);
    if (p.graphLaunches > 0) p.gpuBusyFraction = std::max(0.0, 1.0 - waitSeconds / wallSeconds);
    for (auto& l : p.layers) {
        l.gpuMs *= perStepMs;
        l.overlapMs *= perStepMs;
        l.waitMs *= perStepMs;
        l.cpuExpertsMs *= perStepMs;
    }
}

namespace {

class CpuRunner : public ModelRunner {
public:
    CpuRunner(model::Transformer& transformer, int capacity, KvCacheType kvCache)
        : transformer_(transformer), cache_(transformer.makeCache(capacity, kvCache)) {}

    void forward(std::span<const int> tokens, int start, const model::ForwardOptions& options,
                 std::vector<float>& logits) override {
        const bool step = tokens.size() == 1;
        const auto t0 = std::chrono::steady_clock::now();
        transformer_.forward(tokens, start, cache_, options, logits, step ? &expertSeconds_ : nullptr);
        if (step) {
            ++steps_;
            wallSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
    }

    // One pass of runners.size() tokens (Transformer::forwardBatch). The step counts in every runner's
    // profile, with the whole batch's time: each sequence waited that long for its token.
    void decodeBatch(std::span<ModelRunner* const> runners, std::span<const int> tokens, std::span<const int> positions,
                     const model::ForwardOptions& options, std::span<std::vector<float>* const> logits) override {
        std::vector<CpuRunner*> batch;
        std::vector<model::KvCache*> caches;
        for (ModelRunner* r : runners) {
            auto* cpu = dynamic_cast<CpuRunner*>(r);
            if (!cpu || &cpu->transformer_ != &transformer_)
                throw Error("a decode batch takes the CPU runners of one engine only");
            batch.push_back(cpu);
            caches.push_back(&cpu->cache_);
        }
        std::vector<double> expertSeconds;
        const auto t0 = std::chrono::steady_clock::now();
        transformer_.forwardBatch(tokens, positions, caches, options, logits, &expertSeconds);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (CpuRunner* r : batch) {
            ++r->steps_;
            r->wallSeconds_ += wall;
            r->expertSeconds_.resize(expertSeconds.size(), 0.0);
            for (std::size_t l = 0; l < expertSeconds.size(); ++l) r->expertSeconds_[l] += expertSeconds[l];
        }
    }

    DecodeProfile takeProfile() override {
        DecodeProfile p;
        p.steps = steps_;
        double experts = 0;
        for (std::size_t l = 0; l < expertSeconds_.size(); ++l) {
            if (expertSeconds_[l] == 0) continue;
            p.layers.push_back({static_cast<int>(l), 0.0, 0.0, 0.0, expertSeconds_[l]});
            experts += expertSeconds_[l];
        }
        finishProfile(p, wallSeconds_, 0.0, experts);
        steps_ = 0;
        wallSeconds_ = 0;
        expertSeconds_.assign(expertSeconds_.size(), 0.0);
        return p;
    }

private:
    model::Transformer& transformer_;
    model::KvCache cache_;
    long steps_ = 0;
    double wallSeconds_ = 0;
    std::vector<double> expertSeconds_;  // per layer
};

}  // namespace

std::unique_ptr<ModelRunner> makeCpuRunner(model::Transformer& transformer, int capacity, KvCacheType kvCache) {
    return std::make_unique<CpuRunner>(transformer, capacity, kvCache);
}

}  // namespace tandem::runtime
