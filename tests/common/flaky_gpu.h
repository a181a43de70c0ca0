#pragma once
// A stand-in GPU for tests on machines without one (runtime::setGpuBackendFactoryForTests): its runners
// run the CPU path until their Nth forward pass, then throw the way the CUDA backend reports a device
// error. While a FlakyGpu lives, engines loaded with Device::Auto or Gpu get it.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "model/routed_experts.h"
#include "model/transformer.h"
#include "runtime/gpu_backend.h"
#include "runtime/model_runner.h"
#include "tandem/error.h"

namespace tandem::test {

// The stand-in's runners alive now and the most at once (a session each: what a real GPU plan reserves).
struct RunnerCount {
    std::atomic<int> live{0}, most{0};
};

class FlakyRunner : public runtime::ModelRunner {
public:
    FlakyRunner(const model::ModelConfig& config, const model::ModelWeights& weights, cpu::ThreadPool& pool, int capacity,
                const runtime::ExpertsFactory& experts, int failOn, std::shared_ptr<RunnerCount> count = nullptr)
        : experts_(experts()), transformer_(config, weights, *experts_, pool), cpu_(runtime::makeCpuRunner(transformer_, capacity)),
          failOn_(failOn), count_(std::move(count)) {
        if (!count_) return;
        const int live = ++count_->live;
        for (int most = count_->most; live > most && !count_->most.compare_exchange_weak(most, live);) {
        }
    }
    ~FlakyRunner() override {
        if (count_) --count_->live;
    }
    void forward(std::span<const int> tokens, int start, const model::ForwardOptions& options, std::vector<float>& logits) override {
        if (++calls_ == failOn_) throw Error("CUDA error: an illegal memory access was encountered (simulated)");
        cpu_->forward(tokens, start, options, logits);
    }
    DecodeProfile takeProfile() override { return cpu_->takeProfile(); }

private:
    std::unique_ptr<model::RoutedExperts> experts_;
    model::Transformer transformer_;
    std::unique_ptr<runtime::ModelRunner> cpu_;
    int failOn_, calls_ = 0;
    std::shared_ptr<RunnerCount> count_;
};

class FlakyBackend : public runtime::GpuBackend {
public:
    FlakyBackend(const model::ModelConfig& config, const model::ModelWeights& weights, cpu::ThreadPool& pool,
                 runtime::ExpertsFactory experts, int failOn, std::vector<std::string> stages = {})
        : config_(config), weights_(weights), pool_(pool), experts_(std::move(experts)), failOn_(failOn),
          stages_(std::move(stages)) {}
    std::unique_ptr<runtime::ModelRunner> newRunner(int capacity) override {
        return std::make_unique<FlakyRunner>(config_, weights_, pool_, capacity, experts_, failOn_, count);
    }
    std::string deviceName() const override { return "Stand-in GPU"; }
    int deviceNumber() const override { return device; }
    int device = 0;  // what deviceNumber reports (FlakyGpu::device)
    std::shared_ptr<RunnerCount> count;  // FlakyGpu::runners
    std::vector<std::string> stages() const override { return stages_; }

private:
    const model::ModelConfig& config_;
    const model::ModelWeights& weights_;
    cpu::ThreadPool& pool_;
    runtime::ExpertsFactory experts_;
    int failOn_;
    std::vector<std::string> stages_;  // what stages() reports: a pipeline by layer (issue 29)
};

class FlakyGpu {
public:
    // The stand-in's runners fail on their failOn-th forward pass (1: the first); `stages`: the pipeline
    // the backend reports (GpuBackend::stages).
    explicit FlakyGpu(int failOn, std::vector<std::string> stages = {}) {
        runtime::setGpuBackendFactoryForTests([this, failOn, stages](const model::ModelConfig& c, const model::ModelWeights& w,
                                                                     cpu::ThreadPool& p, int capacity, runtime::ExpertsFactory e,
                                                                     const runtime::GpuExpertsRequest& request) {
            lastCapacity = capacity;
            lastSessions = request.sessions;
            lastDevices = request.devices;
            lastKvCache = request.kvCache;
            if (mostSessions != 0 && request.sessions > mostSessions)
                throw Error("the stand-in GPU's plan for " + std::to_string(request.sessions) + " sessions does not fit");
            auto backend = std::make_unique<FlakyBackend>(c, w, p, std::move(e), failOn, stages);
            // The GPU it says it runs on: the one asked for, else `device` (the engine's own choice).
            backend->device = request.devices.size() == 1 && request.devices[0] >= 0 ? request.devices[0] : device;
            backend->count = runners;
            return backend;
        });
    }
    // What the last engine loaded asked of its GPU: positions a session holds, sessions at once, the GPUs,
    // the KV cache's type.
    mutable int lastCapacity = 0;
    mutable int lastSessions = 0;
    mutable std::vector<int> lastDevices;
    mutable KvCacheType lastKvCache = KvCacheType::Float32;
    // The GPU the stand-in reports running on when none is asked for (the engine's choice by memory).
    int device = 0;
    // The most sessions its plan holds (more throws as createGpuBackend does when they do not fit); 0: any,
    // -1: none at all.
    int mostSessions = 0;
    // Its runners (sessions) alive and the most at once, over every engine loaded while it lives.
    std::shared_ptr<RunnerCount> runners = std::make_shared<RunnerCount>();
    ~FlakyGpu() { runtime::setGpuBackendFactoryForTests({}); }
    FlakyGpu(const FlakyGpu&) = delete;
    FlakyGpu& operator=(const FlakyGpu&) = delete;
};

}  // namespace tandem::test
