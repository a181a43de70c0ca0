#pragma once
// The hybrid GPU path as the runtime sees it: the model's dense weights on the GPU, shared by the
// sessions, each of which gets a runner with its own GPU KV cache. Implemented in engine/cuda when
// built with CUDA; otherwise createGpuBackend says why there is no GPU.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cpu/pool/thread_pool.h"
#include "io/expert_layout.h"
#include "model/config.h"
#include "model/routed_experts.h"
#include "model/weights.h"
#include "runtime/model_runner.h"
#include "runtime/placement.h"

namespace tandem::runtime {

class GpuBackend {
public:
    virtual ~GpuBackend() = default;
    virtual std::unique_ptr<ModelRunner> newRunner(int capacity) = 0;
    virtual std::string deviceName() const = 0;
    // The GPU it runs on (nvidia-smi's number; a pipeline's first stage's).
    virtual int deviceNumber() const { return 0; }
    // Where the routed experts run ("all routed experts on the CPU", "48 of 48 MoE layers wholly on the
    // GPU (16.3 GB)"; runtime/placement.h).
    virtual std::string placement() const { return "all routed experts on the CPU"; }
    // The routed experts on the GPU, in layers' worth (a split layer's share counts as its fraction).
    virtual double expertLayersOnGpu() const { return 0; }
    // A pipeline by layer (issue 29): each GPU's share (ModelInfo::gpuStages); empty with one stage.
    virtual std::vector<std::string> stages() const { return {}; }
    // Per layer (ModelInfo::expertLayers): where its routed experts run.
    virtual std::string expertLayerMap(const model::ModelConfig& config) const { return cpuExpertLayerMap(config); }
};

// Gives each runner its own view of the routed experts (the GPU path's expert bridge calls them).
using ExpertsFactory = std::function<std::unique_ptr<model::QueuedRoutedExperts>()>;

// The routed experts the GPU may hold some of (runtime/placement.h): their packed layout and each MoE
// layer's bytes (runtime::PackedExperts); no layout for experts that are not packed (the reference path),
// which stay on the CPU.
struct GpuExpertsRequest {
    const io::ExpertLayout* layout = nullptr;
    std::function<const std::byte*(int layer)> layerBytes;
    // VRAM for routed experts: < 0 what is free once the rest of the model, a session's KV cache and
    // activations and a margin are counted (the default); 0 none (every routed expert on the CPU).
    std::int64_t budgetBytes = -1;
    // How often each expert was chosen so far (kept beside the store): the most used of a layer that is
    // not wholly on the GPU go there first. May be empty.
    ExpertUsage usage;
    // Where the runners count the choices they see (the layers handed to the CPU), or null.
    UsageCounter* counter = nullptr;
    // Runners (sessions) that exist at once, each with its KV cache and buffers: reserved before the
    // experts' automatic budget (EngineOptions::gpuSessions).
    int sessions = 1;
    // The GPUs to run on (EngineOptions::gpuDevices): empty, TANDEM_GPU_DEVICES or else the GPU with the most
    // memory; one, that GPU; several, a pipeline by layer over them.
    std::vector<int> devices;
    // How the runners hold their KV caches (EngineOptions::kvCache): the plan counts what each takes.
    KvCacheType kvCache = KvCacheType::Float32;
};

// Why the GPU cannot hold this model's KV cache in 8 bits, or empty where it can: launchMlaPrepare's 8-bit
// writes take a latent row of up to 1024 values and a rope row of up to 256 (a block's threads). The engine
// then keeps the GPU's cache in float32 and says so (ModelInfo::kvCacheNotice); the runner refuses it too.
inline std::string gpuInt8KvCacheLimit(const model::ModelConfig& c) {
    if (c.attention != model::AttentionKind::Mla || (c.kvLoraRank <= 1024 && c.qkRopeHeadDim <= 256)) return {};
    return "the GPU's 8-bit KV cache holds MLA latents of up to 1024 values and rope parts of up to 256 (this model's: " +
           std::to_string(c.kvLoraRank) + " and " + std::to_string(c.qkRopeHeadDim) + ")";
}

// nullptr, with `reason` set, when there is no usable GPU. Throws tandem::Error when there is one but
// the model does not fit, saying what would.
std::unique_ptr<GpuBackend> createGpuBackend(const model::ModelConfig& config, const model::ModelWeights& weights,
                                             cpu::ThreadPool& pool, int capacity, ExpertsFactory experts,
                                             const GpuExpertsRequest& gpuExperts, std::string& reason);

// Tests: while set, engines loaded from then on take their GPU backend from `factory` instead of
// createGpuBackend, so the runtime's side of a GPU (choosing it, a failure in the middle of a
// conversation) is tested on machines without one; it is given what createGpuBackend would be (the
// capacity, and the request: budget, sessions). An empty function restores createGpuBackend.
using GpuBackendFactory = std::function<std::unique_ptr<GpuBackend>(const model::ModelConfig&, const model::ModelWeights&,
                                                                    cpu::ThreadPool&, int capacity, ExpertsFactory,
                                                                    const GpuExpertsRequest&)>;
void setGpuBackendFactoryForTests(GpuBackendFactory factory);

}  // namespace tandem::runtime
