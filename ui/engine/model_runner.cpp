#include "ui/engine/model_runner.h"

namespace tandem::ui {
namespace {

// One engine and the one session the app chats through: switching conversations re-prefills, which
// the session does by keeping only the shared prefix of its cache.
class EngineRunner : public ModelRunner {
public:
    explicit EngineRunner(const LoadRequest& request)
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
            // Fractions of the layer's wall time as the GPU lives it (working, then waiting); the CPU's
            // experts overlap the GPU's work. On the CPU path the experts are the whole of it.
            const double wall = layer.gpuMs + layer.waitMs > 0 ? layer.gpuMs + layer.waitMs : layer.cpuExpertsMs;
            if (wall > 0) t.layerSplit.append({layer.gpuMs / wall, layer.cpuExpertsMs / wall, layer.waitMs / wall});
        }
        return t;
    }

private:
    mutable tandem::DecodeProfile recent_;
    std::unique_ptr<tandem::Engine> engine_;
    std::unique_ptr<tandem::Session> session_;
};

}  // namespace

tandem::EngineOptions engineOptionsFor(const LoadRequest& request) {
    tandem::EngineOptions options;
    options.threads = request.threads;
    options.contextLength = request.contextLength;
    options.device = request.gpuDevice < 0 ? tandem::Device::Cpu : tandem::Device::Auto;
    return options;
}

std::unique_ptr<ModelRunner> loadEngineRunner(const LoadRequest& request) {
    return std::make_unique<EngineRunner>(request);
}

}  // namespace tandem::ui
