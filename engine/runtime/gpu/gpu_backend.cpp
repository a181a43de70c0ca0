// The hybrid GPU path behind runtime::GpuBackend: finds a usable GPU, checks that the model fits,
// uploads the dense weights and hands out per-session runners.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/expert_budget.h"
#include "cuda/cublas_loader.h"
#include "cuda/device_scope.h"
#include "runtime/gpu/gpu_experts.h"
#include "runtime/gpu/gpu_runner.h"
#include "runtime/gpu/gpu_weights.h"
#include "tandem/byte_size.h"
#include "tandem/tuning.h"
#include "model/rope.h"
#include "runtime/gpu_backend.h"
#include "runtime/stage_plan.h"

namespace tandem::runtime {

namespace {

// f() with `device` current (-1: the current one), for what a member initializer allocates there.
template <class F>
auto onDevice(int device, F f) {
    const cuda::DeviceScope scope(device);
    return f();
}

// Prompt tokens a chunk takes at least; larger chunks (up to kMaxPrefillChunk) when memory allows.
constexpr int kPrefillChunk = 512;
constexpr int kMaxPrefillChunk = 2048;

// A pipeline by layer (issue 29): the stages run one after another for each chunk of tokens, each
// from the residual rows of the one before (GpuRunner::receiveFrom); the last one's logits are the
// pass's. Each stage has its own stream, buffers, KV cache of its layers, expert bridge and decode graph,
// as it would on a GPU of its own. Batched decode steps run the sequences one after another.
class PipelineRunner : public ModelRunner {
public:
    explicit PipelineRunner(std::vector<std::unique_ptr<cuda::GpuRunner>> stages) : stages_(std::move(stages)) {}

    void forward(std::span<const int> tokens, int start, const model::ForwardOptions& options,
                 std::vector<float>& logits) override {
        const bool all = options.logits == model::LogitsFor::AllTokens;
        const auto chunk = static_cast<std::size_t>(stages_.front()->chunkLimit(all));
        if (tokens.size() <= chunk) {  // a decode step, a short prompt: the last stage writes the logits
            for (std::size_t s = 0; s < stages_.size(); ++s)
                stages_[s]->forward(tokens, start, options, s + 1 == stages_.size() ? logits : scratch_);
            return;
        }
        std::vector<float> rows;
        std::vector<float> out;
        for (std::size_t done = 0; done < tokens.size();) {
            const std::size_t n = std::min(chunk, tokens.size() - done);
            for (std::size_t s = 0; s < stages_.size(); ++s)
                stages_[s]->forward(tokens.subspan(done, n), start + static_cast<int>(done), options,
                                    s + 1 == stages_.size() ? rows : scratch_);
            if (all)
                out.insert(out.end(), rows.begin(), rows.end());
            else if (done + n == tokens.size())
                out = rows;
            done += n;
        }
        logits = std::move(out);
    }

    DecodeProfile takeProfile() override {
        // The stages' steps run one after another: a step is the sum of theirs, each stage's layers its own.
        DecodeProfile p;
        double wall = 0, busy = 0, pool = 0, firstGap = 0, laterSteps = 0;
        for (const auto& stage : stages_) {
            const DecodeProfile s = stage->takeProfile();
            // The first stage's GPU is idle between its steps while the later stages run and while the
            // host samples: only the latter is "between steps".
            if (&stage == &stages_.front())
                firstGap = s.betweenStepsMs;
            else
                laterSteps += s.stepMs;
            p.steps = std::max(p.steps, s.steps);
            p.graphLaunches += s.graphLaunches;
            wall += s.stepMs;
            busy += s.gpuBusyFraction * s.stepMs;
            pool += s.expertPoolBusyFraction * s.stepMs;
            p.layers.insert(p.layers.end(), s.layers.begin(), s.layers.end());
        }
        p.stepMs = wall;
        p.betweenStepsMs = std::max(0.0, firstGap - laterSteps);
        if (wall > 0) {
            p.gpuBusyFraction = busy / wall;
            p.expertPoolBusyFraction = pool / wall;
        }
        return p;
    }

private:
    std::vector<std::unique_ptr<cuda::GpuRunner>> stages_;
    std::vector<float> scratch_;  // what the stages before the last return (nothing they compute)
};

class CudaBackend : public GpuBackend {
public:
    // `plan`: the routed experts of the one GPU (one entry), or of each stage of a pipeline (one a stage).
    // `device`: the one GPU's CUDA number (-1: the current one, GPU 0); a pipeline's stages name their own.
    CudaBackend(const model::ModelConfig& config, const model::ModelWeights& weights, cpu::ThreadPool& pool,
                ExpertsFactory experts, std::string name, const GpuExpertsRequest& request, std::vector<StageExperts> plan,
                int prefillChunk, std::string expertNote, std::vector<StagePlan> stages = {},
                std::vector<std::string> stagesText = {}, bool stagesOnTheirGpus = false, int device = -1)
        : config_(config), experts_(std::move(experts)), rope_(config), name_(std::move(name)), prefillChunk_(prefillChunk),
          kvCache_(request.kvCache), expertNote_(std::move(expertNote)),
          usage_(request.counter), stages_(std::move(stages)), stagesText_(std::move(stagesText)),
          stagesOnTheirGpus_(stagesOnTheirGpus), device_(device),
          gpuWeights_(stages_.size() > 1 ? cuda::GpuWeights{} : onDevice(device_, [&] {
              return cuda::uploadWeights(config, weights, rope_.inverseFrequencies(), pool);
          })),
          gpuExperts_(stages_.size() <= 1 && request.layout ? onDevice(device_, [&] {
              return cuda::uploadExperts(config, *request.layout, request.layerBytes, std::move(plan.front().placement));
          })
                                                            : cuda::noGpuExperts(config)) {
        if (stages_.size() > 1 && plan.size() != stages_.size()) throw std::logic_error("CudaBackend: one expert plan a stage");
        // A pipeline: each stage's own part of the dense weights and its own routed experts, on its GPU.
        if (stages_.size() > 1)
            for (std::size_t i = 0; i < stages_.size(); ++i) {
                const StagePlan& s = stages_[i];
                const cuda::DeviceScope onDevice(stageDevice(s));
                stageWeights_.push_back(std::make_unique<cuda::GpuWeights>(cuda::uploadWeights(
                    config, weights, rope_.inverseFrequencies(), pool, {s.firstLayer, s.endLayer})));
                stageExperts_.push_back(std::make_unique<cuda::GpuExperts>(
                    request.layout ? cuda::uploadExperts(config, *request.layout, request.layerBytes, std::move(plan[i].placement))
                                   : cuda::noGpuExperts(config)));
                if (plan[i].streams && request.layout)
                    cuda::enableStreaming(*stageExperts_.back(), config, *request.layout, request.layerBytes, s.firstLayer, s.endLayer);
            }
        else if (plan.front().streams && request.layout)
            cuda::enableStreaming(gpuExperts_, config, *request.layout, request.layerBytes);  // host memory: any GPU
        for (std::size_t i = 0; i < std::max<std::size_t>(1, stageExperts_.size()); ++i) {
            cuda::GpuExperts& g = stageExperts_.empty() ? gpuExperts_ : *stageExperts_[i];
            if (g.streamLayerBytes == 0 || tuning().gpuStreamCpuPercent >= 0) continue;
            // The cost model of the CPU's share of streamed layers, at the chunk sizes prompts use.
            const cuda::DeviceScope onDevice(stageExperts_.empty() ? device_ : stageDevice(stages_[i]));
            std::vector<int> sizes{std::max(1, tuning().gpuStreamMinTokens)};
            for (const int t : {kPrefillChunk, prefillChunk})
                if (t > sizes.back()) sizes.push_back(t);
            const auto cpu = experts_();
            cuda::measureStreamCost(g, config, *cpu, sizes);
        }
    }

    ~CudaBackend() override {
        for (std::size_t s = 0; s < stageWeights_.size(); ++s) {  // each stage's weights and experts freed on its GPU
            const cuda::DeviceScope onDevice(stageDevice(stages_[s]));
            stageWeights_[s].reset();
            if (s < stageExperts_.size()) stageExperts_[s].reset();
        }
        const cuda::DeviceScope onDevice(device_);  // the one GPU's, freed there
        gpuWeights_ = cuda::GpuWeights{};
        gpuExperts_ = cuda::GpuExperts{};
    }

    std::unique_ptr<ModelRunner> newRunner(int capacity) override {
        if (stages_.size() > 1) {
            // A pipeline by layer: a runner per stage, each over its stage's weights.
            std::vector<std::unique_ptr<cuda::GpuRunner>> parts;
            for (std::size_t s = 0; s < stages_.size(); ++s) {
                const cuda::GpuStage stage{stages_[s].firstLayer, stages_[s].endLayer, stageDevice(stages_[s])};
                parts.push_back(std::make_unique<cuda::GpuRunner>(config_, experts_(), *stageWeights_[s], *stageExperts_[s], rope_,
                                                                  capacity, prefillChunk_, usage_, stage, kvCache_));
                if (s > 0) parts.back()->receiveFrom(*parts[s - 1]);
            }
            return std::make_unique<PipelineRunner>(std::move(parts));
        }
        // Each runner drives a view of the batcher, which passes its work to the runner's own experts
        // outside batched decode steps (GpuRunner::decodeBatch).
        auto runner = std::make_unique<cuda::GpuRunner>(config_, batcher_.view(experts_()), gpuWeights_, gpuExperts_, rope_,
                                                        capacity, prefillChunk_, usage_, cuda::GpuStage{0, -1, device_}, kvCache_);
        runner->setBatcher(&batcher_);
        return runner;
    }
    std::string deviceName() const override { return name_; }
    int deviceNumber() const override {
        if (stagesOnTheirGpus_ && !stages_.empty()) return stages_.front().device;
        return std::max(0, device_);
    }
    std::vector<std::string> stages() const override { return stagesText_; }
    std::string placement() const override {
        std::string text = mergedPlacement().describe(config_);
        // Prompt streaming as the one GPU has it, or the first stage that streams (a pipeline's stages
        // differ only by their GPU's link), else the first stage's note on why not.
        const cuda::GpuExperts* shown = stageExperts_.empty() ? &gpuExperts_ : stageExperts_.front().get();
        for (const auto& g : stageExperts_)
            if (g->streamLayerBytes > 0) {
                shown = g.get();
                break;
            }
        if (shown->streamLayerBytes > 0) {
            text += "; prompts of " + std::to_string(tuning().gpuStreamMinTokens) +
                    "+ tokens stream the others through the GPU";
            const int share = tuning().gpuStreamCpuPercent;
            if (share >= 0)
                text += ", the CPU computing " + std::to_string(share) + "% of their experts";
            else if (shown->streamCost.linkBytesPerSecond > 0)
                text += ", the CPU computing a share of their experts where that is faster (" +
                        shown->streamCost.describe() + ")";
        }
        else if (!shown->streamNote.empty())
            text += "; " + shown->streamNote;
        if (!expertNote_.empty()) text += " (" + expertNote_ + ")";
        return text;
    }
    double expertLayersOnGpu() const override {
        return config_.numExperts > 0 ? static_cast<double>(mergedPlacement().gpuExperts) / config_.numExperts : 0.0;
    }
    std::string expertLayerMap(const model::ModelConfig& config) const override {
        std::string map = cpuExpertLayerMap(config);
        for (int l = 0; l < static_cast<int>(map.size()); ++l) {
            const cuda::GpuExperts& g = expertsOf(l);
            if (g.wholeLayer(l))
                map[static_cast<std::size_t>(l)] = 'G';
            else if (g.holdsSome(l))
                map[static_cast<std::size_t>(l)] = 'P';
            else if (g.streams(l))
                map[static_cast<std::size_t>(l)] = 'S';
        }
        return map;
    }

private:
    // The routed experts that layer `layer` has on the GPU: its stage's, or the one GPU's.
    const cuda::GpuExperts& expertsOf(int layer) const {
        for (std::size_t s = 0; s < stageExperts_.size(); ++s)
            if (layer >= stages_[s].firstLayer && layer < stages_[s].endLayer) return *stageExperts_[s];
        return gpuExperts_;
    }
    // The one GPU's placement, or the stages' together.
    ExpertPlacement mergedPlacement() const {
        if (stageExperts_.empty()) return gpuExperts_.placement;
        std::vector<ExpertPlacement> parts;
        for (const auto& g : stageExperts_) parts.push_back(g->placement);
        return mergePlacements(config_, parts);
    }

    const model::ModelConfig& config_;
    ExpertsFactory experts_;
    model::Rope rope_;
    std::string name_;
    int prefillChunk_;
    KvCacheType kvCache_;  // the runners' KV caches (EngineOptions::kvCache)
    std::string expertNote_;  // why no routed expert is on the GPU, where a kind of experts keeps them off
    UsageCounter* usage_;
    std::vector<StagePlan> stages_;  // a pipeline by layer (issue 29); empty or one: a single runner
    std::vector<std::string> stagesText_;
    // The stages on the GPUs their plan names (several GPUs), or all on the one GPU (TANDEM_GPU_STAGES:
    // the plan's GPUs are logical).
    bool stagesOnTheirGpus_ = false;
    int stageDevice(const StagePlan& s) const { return stagesOnTheirGpus_ ? s.device : device_; }
    int device_ = -1;  // the one GPU's CUDA number (logical stages' too); -1: the current one (GPU 0)
    cuda::GpuWeights gpuWeights_;    // every layer's, with one stage
    std::vector<std::unique_ptr<cuda::GpuWeights>> stageWeights_;  // each stage's own, with several
    cuda::GpuExperts gpuExperts_;    // the one GPU's routed experts (none with several stages)
    std::vector<std::unique_ptr<cuda::GpuExperts>> stageExperts_;  // each stage's own, on its GPU
    ExpertBatcher batcher_{experts_(), config_.hiddenSize};  // after experts_: its combined computations' experts
};

// The model's stages over `gpus`: its layers' dense weights and KV cache at `capacity` positions, the
// embedding on the first GPU and the head (as large, bf16) on the last.
std::vector<StagePlan> planModelStages(const model::ModelConfig& config, int capacity, const std::vector<GpuMemory>& gpus,
                                       KvCacheType kvCache) {
    const std::uint64_t table = static_cast<std::uint64_t>(config.vocabSize) * static_cast<std::uint64_t>(config.hiddenSize) * 2;
    return planStages(layerCosts(config, capacity, kvCache), table, table, gpus);
}

// describeStages' lines, one per GPU (ModelInfo::gpuStages).
std::vector<std::string> stageLines(const std::vector<StagePlan>& stages, const std::vector<GpuMemory>& gpus) {
    std::vector<std::string> lines;
    const std::string text = describeStages(stages, gpus);
    for (std::size_t from = 0; from <= text.size();) {
        const std::size_t to = std::min(text.find('\n', from), text.size());
        lines.push_back(text.substr(from, to - from));
        from = to + 1;
    }
    return lines;
}

// A pipeline's stages over `gpus` (their usable bytes) and each stage's routed experts: the layers' dense
// weights and every session's KV cache at `capacity` positions shared out by planStages, then each stage's
// budget for experts of its own layers (stageExpertBudgets, less `scratchBytes` for its runners' expert
// scratch) and its placement (planStageExperts); `text` is describeStages' line for each, with its experts.
struct PipelinePlan {
    std::vector<StagePlan> stages;
    std::vector<StageExperts> experts;
    std::vector<std::string> text;
};
PipelinePlan planPipeline(const model::ModelConfig& config, int capacity, int sessions, const std::vector<GpuMemory>& gpus,
                          const GpuExpertsRequest& request, std::uint64_t scratchBytes) {
    PipelinePlan plan;
    const auto positions = static_cast<int>(std::min<std::int64_t>(std::numeric_limits<int>::max(),
                                                                   std::int64_t{capacity} * std::max(1, sessions)));
    plan.stages = planModelStages(config, positions, gpus, request.kvCache);
    if (request.layout && request.layerBytes && request.budgetBytes != 0 && config.numExperts > 0) {
        // What each stage's layers' experts take, all of them on its GPU.
        const std::uint64_t layerBytes = cuda::gpuExpertBytes(*request.layout) * static_cast<std::uint64_t>(config.numExperts);
        std::vector<std::uint64_t> needs;
        for (const StagePlan& s : plan.stages) {
            needs.push_back(0);
            for (int l = s.firstLayer; l < s.endLayer; ++l) needs.back() += config.isMoeLayer(l) ? layerBytes : 0;
        }
        const std::vector<std::uint64_t> budgets = stageExpertBudgets(plan.stages, gpus, request.budgetBytes, scratchBytes, needs);
        plan.experts = planStageExperts(config, plan.stages, budgets, cuda::gpuExpertBytes(*request.layout), request.usage,
                                        tuning().gpuStreamMinTokens > 0);
    } else {
        plan.experts.assign(plan.stages.size(), StageExperts{planPlacement(config, {}), false});
    }
    plan.text = stageLines(plan.stages, gpus);
    for (std::size_t i = 0; i < plan.text.size() && i < plan.experts.size(); ++i)
        plan.text[i] += "; routed experts: " + plan.experts[i].placement.describe(config);
    return plan;
}

// Why `devices` cannot be used on a machine with `count` GPUs, or "" when they can.
std::string missingGpu(const std::vector<int>& devices, int count) {
    for (const int d : devices) {
        if (d < 0)  // kEveryGpu beside other numbers: a caller's mistake
            return "GPU " + std::to_string(d) + " was chosen, but GPUs are numbered from 0";
        if (d >= count)
            return "GPU " + std::to_string(d) + " was chosen, but this machine has " + std::to_string(count) +
                   (count == 1 ? " GPU (GPU 0)" : " GPUs (GPU 0 to " + std::to_string(count - 1) + ")");
    }
    return "";
}

// The pipeline over `devices` (issue 29): each GPU's free memory, less its runners' activations
// (`runnerBytes`, every session's) and the headroom, is what planPipeline shares out; the stages run on
// their GPUs, each with the routed experts of its own layers that its memory holds, and consecutive ones
// reach each other's memory directly where the GPUs allow it (else CUDA copies through the host).
std::unique_ptr<GpuBackend> severalGpus(const model::ModelConfig& config, const model::ModelWeights& weights,
                                        cpu::ThreadPool& pool, int capacity, ExpertsFactory experts,
                                        const GpuExpertsRequest& request, const std::vector<int>& devices, int chunk,
                                        std::uint64_t runnerBytes, std::uint64_t scratchBytes, std::string expertNote) {
    std::vector<GpuMemory> gpus;
    std::string names;
    for (const int d : devices) {
        cudaDeviceProp prop{};
        TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
        if (prop.major < 8)
            throw Error(std::string("GPU ") + std::to_string(d) + " (" + prop.name +
                        ") is older than the Ampere generation Tandem needs (bf16)");
        const cuda::DeviceScope onDevice(d);
        if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess) cudaGetLastError();  // already set up
        std::size_t free = 0, total = 0;
        TANDEM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
        const std::uint64_t reserved = runnerBytes + kGpuHeadroomBytes;
        gpus.push_back({d, free > reserved ? free - reserved : 0, prop.name});
        names += (names.empty() ? "" : " + ") + std::string(prop.name);
    }
    PipelinePlan plan = planPipeline(config, capacity, request.sessions, gpus, request, scratchBytes);
    const std::vector<StagePlan>& stages = plan.stages;
    for (std::size_t i = 1; i < stages.size(); ++i) {
        int reachable = 0;
        TANDEM_CUDA_CHECK(cudaDeviceCanAccessPeer(&reachable, stages[i].device, stages[i - 1].device));
        if (!reachable) continue;
        const cuda::DeviceScope onDevice(stages[i].device);
        const cudaError_t e = cudaDeviceEnablePeerAccess(stages[i - 1].device, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) TANDEM_CUDA_CHECK(e);
        cudaGetLastError();
    }
    return std::make_unique<CudaBackend>(config, weights, pool, std::move(experts), names, request, std::move(plan.experts),
                                         chunk, std::move(expertNote), std::move(plan.stages), std::move(plan.text), true);
}

}  // namespace

std::unique_ptr<GpuBackend> createGpuBackend(const model::ModelConfig& config, const model::ModelWeights& weights,
                                             cpu::ThreadPool& pool, int capacity, ExpertsFactory experts,
                                             const GpuExpertsRequest& request, std::string& reason) {
    // MXFP4 experts (gpt-oss) go to the GPU like INT4's: its expert kernels read each nibble as its e2m1
    // value (fp4Pair) with the block's E8M0 scale as bf16. Checked on the H200 (2026-12-04):
    // check_gpu_experts' MXFP4 cases against float64, and tiny-gpt-oss --experts mxfp4 against its golden
    // within the GPU tolerance. TANDEM_GPU_MXFP4=0 keeps them on the CPU's MXFP4 kernels (through the
    // bridge), for A/B runs; the placement says so.
    GpuExpertsRequest gpuExperts = request;
    std::string expertNote;
    const char* mxfp4 = std::getenv("TANDEM_GPU_MXFP4");
    if (gpuExperts.layout && gpuExperts.layout->type == io::ExpertType::MXFP4 && mxfp4 && std::string(mxfp4) == "0") {
        gpuExperts.layout = nullptr;
        gpuExperts.layerBytes = nullptr;
        expertNote = "TANDEM_GPU_MXFP4=0 keeps the mxfp4 experts on the CPU";
    }
    int count = 0;
    const cudaError_t probe = cudaGetDeviceCount(&count);
    if (probe != cudaSuccess || count == 0) {
        if (probe == cudaSuccess || probe == cudaErrorNoDevice)
            reason = "no NVIDIA GPU was found";
        else if (probe == cudaErrorInsufficientDriver)
            reason = "no NVIDIA driver new enough for CUDA " + std::to_string(CUDART_VERSION / 1000) +
                     " was found (install or update the NVIDIA driver to use the GPU)";
        else
            reason = std::string("the NVIDIA driver is not usable (") + cudaGetErrorString(probe) + ")";
        cudaGetLastError();
        return nullptr;
    }
    if (const std::string& missing = cuda::cublasMissing(); !missing.empty()) {
        reason = missing;
        return nullptr;
    }
    // The GPUs chosen (EngineOptions::gpuDevices, else TANDEM_GPU_DEVICES, else below: the GPU with the most
    // memory); the first one's memory sizes the prompt chunk below.
    std::vector<int> devices = !gpuExperts.devices.empty() ? gpuExperts.devices : tuning().gpuDevices;
    if (devices == std::vector<int>{kEveryGpu}) {  // every GPU, in order
        devices.clear();
        for (int d = 0; d < count; ++d) devices.push_back(d);
    }
    if (std::string missing = missingGpu(devices, count); !missing.empty()) {
        reason = std::move(missing);
        return nullptr;
    }
    // None chosen: the GPU with the most memory (the first of equals). GPUs are numbered by PCI bus
    // (numberGpusAsNvidiaSmi), where CUDA's own order put the fastest first.
    int device = devices.empty() ? 0 : devices.front();
    if (devices.empty()) {
        std::size_t most = 0;
        for (int d = 0; d < count; ++d)
            if (cudaDeviceProp p{}; cudaGetDeviceProperties(&p, d) == cudaSuccess && p.totalGlobalMem > most) {
                most = p.totalGlobalMem;
                device = d;
            }
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess || prop.major < 8) {
        reason = std::string("the GPU ") + prop.name + " is older than the Ampere generation Tandem needs (bf16)";
        return nullptr;
    }
    // This thread's CUDA work below runs on that GPU (GPU 0 is every thread's own already); the backend
    // and its runners keep to it (CudaBackend's device).
    const int scoped = device == 0 ? -1 : device;
    const cuda::DeviceScope onDevice(scoped);
    const std::string name = std::string(prop.name) + (device == 0 ? "" : " (GPU " + std::to_string(device) + ")");
    // The engine thread polls the stream while it serves the expert bridge (GpuRunner::finishStream);
    // where the runtime still waits (uploads), let it sleep, not spin on a core the expert pool needs.
    if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess) cudaGetLastError();  // already set up
    if (device == 0) TANDEM_CUDA_CHECK(cudaSetDevice(0));
    std::size_t freeBytes = 0, totalBytes = 0;
    TANDEM_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));

    const std::uint64_t weightBytes = cuda::gpuWeightBytes(config, weights);
    const bool eightBit = cuda::hasEightBitWeights(config, weights);
    const auto deviceBytes = [&](int contextTokens, int chunkTokens, const cuda::GpuExpertLayout* layout = nullptr) {
        return cuda::GpuRunner::deviceBytes(config, eightBit, contextTokens, chunkTokens, layout, gpuExperts.kvCache);
    };
    // Every session that may exist at once has its runner: its KV cache and buffers (serve --batch).
    const std::uint64_t sessions = static_cast<std::uint64_t>(std::max(1, gpuExperts.sessions));
    // The prompt's chunk, before the experts' budget: larger chunks read the weights (and, streaming, copy
    // the CPU's experts) fewer times per token; each costs activation memory, which may take at most a
    // sixteenth of what is free beside the weights and the sessions' 512-token buffers.
    int chunk = kPrefillChunk;
    if (tuning().gpuPrefillChunk > 0) {
        chunk = tuning().gpuPrefillChunk;
    } else {
        const std::uint64_t base = deviceBytes(capacity, kPrefillChunk);
        const std::uint64_t used = weightBytes + base * sessions + kGpuHeadroomBytes;
        for (int c = kMaxPrefillChunk; c > kPrefillChunk && chunk == kPrefillChunk; c /= 2)
            if (used < freeBytes && (deviceBytes(capacity, c) - base) * sessions * 16 <= freeBytes - used)
                chunk = c;
    }
    // What computing routed experts on the GPU adds to a runner's buffers, every session's.
    std::uint64_t scratch = 0;
    if (gpuExperts.layout) {
        const cuda::GpuExpertLayout layout = cuda::gpuExpertLayout(*gpuExperts.layout);
        scratch = (deviceBytes(capacity, chunk, &layout) - deviceBytes(capacity, chunk)) * sessions;
    }
    // A pipeline's runners beside their activations: the 8-bit cache's float32 rows (layerCosts has its codes).
    const std::uint64_t floatRows = cuda::GpuRunner::floatRowsBytes(config, capacity, gpuExperts.kvCache);
    // Several GPUs: the layers as a pipeline over them.
    if (devices.size() > 1)
        return severalGpus(config, weights, pool, capacity, std::move(experts), gpuExperts, devices, chunk,
                           (deviceBytes(0, chunk) + floatRows) * sessions, scratch, std::move(expertNote));
    const std::uint64_t sessionBytes = deviceBytes(capacity, chunk) * sessions;
    if (weightBytes + sessionBytes + kGpuHeadroomBytes > freeBytes) {
        std::string message = "the model's GPU part needs " + tandem::formatBytes(weightBytes) + " for weights and " +
                              tandem::formatBytes(sessionBytes) + " for " +
                              (sessions > 1 ? std::to_string(sessions) + " sessions' " : std::string("a ")) +
                              std::to_string(capacity) + "-token context" + (sessions > 1 ? "s" : "") +
                              ", but the GPU has " + tandem::formatBytes(freeBytes) + " free.";
        if (weightBytes + kGpuHeadroomBytes < freeBytes) {
            const std::uint64_t perToken = deviceBytes(2, chunk) -
                                           deviceBytes(1, chunk);
            const std::uint64_t spare = freeBytes - weightBytes - kGpuHeadroomBytes -
                                        std::min(freeBytes - weightBytes - kGpuHeadroomBytes,
                                                 deviceBytes(0, chunk) * sessions);
            message += " A context of up to " + std::to_string(perToken ? spare / (perToken * sessions) : 0) + " tokens" +
                       (sessions > 1 ? " each" : "") + " would fit.";
        } else {
            message += " Run on the CPU only, or use a GPU with more memory.";
        }
        throw Error(message);
    }

    // Issue 29's pipeline on this one GPU (TANDEM_GPU_STAGES=N): N logical GPUs, each an Nth of what is free
    // beside the headroom, less its runners' activations; the layers split by the stage plan
    // (runtime/stage_plan.h), each stage's weights and routed experts uploaded on their own, as on GPUs of
    // their own.
    if (const int n = std::min(tuning().gpuStages, config.numLayers); n > 1) {
        const std::uint64_t share = (freeBytes - kGpuHeadroomBytes) / static_cast<std::uint64_t>(n);  // fits: checked above
        const std::uint64_t runners = (deviceBytes(0, chunk) + floatRows) * sessions;
        std::vector<GpuMemory> logical;
        for (int i = 0; i < n; ++i)
            logical.push_back({i, share > runners ? share - runners : 0,
                               std::string(prop.name) + ", stage " + std::to_string(i + 1) + " of " + std::to_string(n) + " on GPU " +
                                   std::to_string(device)});
        PipelinePlan plan = planPipeline(config, capacity, gpuExperts.sessions, logical, gpuExperts, scratch);
        return std::make_unique<CudaBackend>(config, weights, pool, std::move(experts), name, gpuExperts, std::move(plan.experts),
                                             chunk, std::move(expertNote), std::move(plan.stages), std::move(plan.text), false, scoped);
    }

    // The routed experts' share (runtime/placement.h): whole MoE layers, from the last, within the budget.
    ExpertPlacement placement = planPlacement(config, {});
    bool stream = false;
    if (gpuExperts.layout && gpuExperts.layerBytes && gpuExperts.budgetBytes != 0 && config.numExperts > 0) {
        const cuda::GpuExpertLayout layout = cuda::gpuExpertLayout(*gpuExperts.layout);
        const std::uint64_t withExperts = deviceBytes(capacity, chunk, &layout) * sessions;
        const std::uint64_t used = weightBytes + withExperts + kGpuHeadroomBytes;
        const std::uint64_t budget = gpuExperts.budgetBytes > 0 ? static_cast<std::uint64_t>(gpuExperts.budgetBytes)
                                                                : automaticExpertBudget(freeBytes, used);
        if (budget > 0 && used + budget > freeBytes)
            throw Error("the routed experts were given " + tandem::formatBytes(budget) + " of GPU memory, but only " +
                        tandem::formatBytes(used < freeBytes ? freeBytes - used : 0) +
                        " is free besides the rest of the model and the context; give them less (--gpu-memory)");
        // Prefill streaming (gpu_experts.h): two staging layers out of the budget, when not every layer fits.
        const std::uint64_t layerSize = cuda::gpuExpertBytes(*gpuExperts.layout) * static_cast<std::uint64_t>(config.numExperts);
        const ExpertBudget split = splitExpertBudget(budget, layerSize, config.moeLayerCount(), tuning().gpuStreamMinTokens > 0);
        stream = split.stagingBytes > 0;
        PlacementRequest request;
        request.expertBytes = cuda::gpuExpertBytes(*gpuExperts.layout);
        request.budgetBytes = split.layersBytes;
        request.usage = gpuExperts.usage;
        placement = planPlacement(config, request);
    }
    std::vector<StageExperts> plan;
    plan.push_back({std::move(placement), stream});
    return std::make_unique<CudaBackend>(config, weights, pool, std::move(experts), name, gpuExperts, std::move(plan), chunk,
                                         std::move(expertNote), std::vector<StagePlan>{}, std::vector<std::string>{}, false, scoped);
}

}  // namespace tandem::runtime
