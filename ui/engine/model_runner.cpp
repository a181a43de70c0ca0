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
        return session_->generate(conversation, options, onToken);
    }
    void setDeferredExperts(int count) override { session_->setDeferral(count); }
    int deferredExperts() const override { return session_->deferral(); }
    // The engine reports no pool, GPU or per-layer figures yet; map them here when it does.
    EngineTelemetry telemetry() const override { return {}; }

private:
    std::unique_ptr<tandem::Engine> engine_;
    std::unique_ptr<tandem::Session> session_;
};

}  // namespace

tandem::EngineOptions engineOptionsFor(const LoadRequest& request) {
    tandem::EngineOptions options;
    options.threads = request.threads;
    options.contextLength = request.contextLength;
    return options;
}

std::unique_ptr<ModelRunner> loadEngineRunner(const LoadRequest& request) {
    return std::make_unique<EngineRunner>(request);
}

}  // namespace tandem::ui
