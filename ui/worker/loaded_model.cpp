#include "ui/worker/loaded_model.h"

namespace tandem::ui {
namespace {

// One engine and the one session the app chats through: switching conversations re-prefills, which
// the session does by keeping only the shared prefix of its cache.
class EngineModel : public LoadedModel {
public:
    explicit EngineModel(const LoadRequest& request)
        : engine_(tandem::Engine::load(request.modelDir.toStdString(), engineOptionsFor(request))),
          session_(engine_->newSession()) {}

    const tandem::ModelInfo& info() const override { return engine_->info(); }
    int threads() const override { return engine_->threads(); }
    tandem::GenerationStats generate(std::span<const int> conversation, const tandem::GenerateOptions& options,
                                     const std::function<bool(int)>& onToken) override {
        auto stats = session_->generate(conversation, options, onToken);
        if (stats.decode.steps > 0) recent_ = stats.decode;  // the steps since the last live reading
        return stats;
    }
    void setDeferredExperts(int count) override { session_->setDeferral(count); }
    int deferredExperts() const override { return session_->deferral(); }
    // Called while an answer streams (on the engine thread) and after it: the most recent decode steps
    // (since the previous reading, or the last ones measured if there were none since).
    EngineTelemetry telemetry() const override {
        if (tandem::DecodeProfile fresh = session_->takeDecodeProfile(); fresh.steps > 0) recent_ = std::move(fresh);
        const tandem::DecodeProfile& p = recent_;
        EngineTelemetry t;
        if (p.steps == 0) return t;
        t.expertPoolBusy = p.expertPoolBusyFraction;
        if (p.graphLaunches > 0) t.gpuBusy = p.gpuBusyFraction;
        for (const auto& layer : p.layers) {
            // Fractions of the layer's wall time: the GPU alone, the CPU's experts (while the GPU runs
            // the shared ones), the GPU waiting. On the CPU path the experts are all that is measured.
            const double wall = layer.gpuMs + layer.overlapMs + layer.waitMs;
            if (wall > 0)
                t.layerSplit.append({layer.gpuMs / wall, layer.overlapMs / wall, layer.waitMs / wall});
            else if (layer.cpuExpertsMs > 0)
                t.layerSplit.append({0.0, 1.0, 0.0});
        }
        return t;
    }
    tandem::Engine* engine() override { return engine_.get(); }
    std::shared_ptr<AppServerState> serverState() const override { return serverState_; }
    void setServerState(std::shared_ptr<AppServerState> state) override { serverState_ = std::move(state); }

private:
    mutable tandem::DecodeProfile recent_;
    std::unique_ptr<tandem::Engine> engine_;
    std::unique_ptr<tandem::Session> session_;
    std::shared_ptr<AppServerState> serverState_;  // declared last: its sessions go before the engine
};

}  // namespace

tandem::EngineOptions engineOptionsFor(const LoadRequest& request) {
    tandem::EngineOptions options;
    options.threads = request.threads;
    options.contextLength = request.contextLength;
    options.device = request.gpuDevice == -1 ? tandem::Device::Cpu : tandem::Device::Auto;
    // Settings' GPU: one chosen by number is asked for by number (0, the default, chooses none and leaves the
    // engine's own: the GPU with the most memory, or TANDEM_GPU_DEVICES); every GPU as the engine's kEveryGpu.
    if (const int gpu = chosenGpuNumber(request.gpuDevice); gpu >= 0) options.gpuDevices = {gpu};
    if (request.gpuDevice == kEveryGpuDevice) options.gpuDevices = {tandem::kEveryGpu};
    options.gpuExpertMemory =
        request.gpuExpertMemoryGb < 0 ? -1 : static_cast<std::int64_t>(request.gpuExpertMemoryGb) * 1'000'000'000;
    options.dense = request.int8Dense ? tandem::DensePrecision::Int8 : tandem::DensePrecision::Checkpoint;
    options.kvCache = request.int8KvCache ? tandem::KvCacheType::Int8 : tandem::KvCacheType::Float32;
    options.gpuSessions = std::max(1, request.gpuSessions);
    return options;
}

std::unique_ptr<LoadedModel> loadEngineModel(const LoadRequest& request) {
    return std::make_unique<EngineModel>(request);
}

}  // namespace tandem::ui
