#pragma once
// A model the engine thread has loaded: the slice of tandem::Engine/Session the worker uses, as an
// interface. The real engine implements it (loadEngineModel), and tests wrap it to hold a load or an
// answer at a chosen point and watch the UI stay responsive.
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "tandem/engine.h"
#include "ui/worker/engine_types.h"

namespace tandem::ui {

class AppServerState;  // app_server.cpp: what the app's server keeps on a model between requests

// Hardware figures the engine reports about its recent work; empty until the engine measures them.
struct EngineTelemetry {
    std::optional<double> expertPoolBusy;  // 0..1 over the last decode steps
    std::optional<double> gpuBusy;         // 0..1
    QList<LayerSplit> layerSplit;          // of the last answer
};

class LoadedModel {
public:
    virtual ~LoadedModel() = default;
    virtual const tandem::ModelInfo& info() const = 0;
    virtual int threads() const = 0;
    virtual tandem::GenerationStats generate(std::span<const int> conversation, const tandem::GenerateOptions& options,
                                             const std::function<bool(int)>& onToken) = 0;
    virtual void setDeferredExperts(int count) = 0;
    virtual int deferredExperts() const = 0;
    virtual EngineTelemetry telemetry() const = 0;
    // The engine under the chat's session, on which the app's server opens sessions of its own (null: the
    // server answers through generate(), one request at a time).
    virtual tandem::Engine* engine() { return nullptr; }
    // What the app's server keeps on this model between its requests (its kept sessions): held here, and
    // only here, so that it goes before the engine its sessions belong to.
    virtual std::shared_ptr<AppServerState> serverState() const { return nullptr; }
    virtual void setServerState(std::shared_ptr<AppServerState> state) { (void)state; }
};

// Loads a model; throws tandem::Error (or std::exception) with a message for the user.
using ModelLoader = std::function<std::unique_ptr<LoadedModel>(const LoadRequest&)>;

tandem::EngineOptions engineOptionsFor(const LoadRequest& request);
std::unique_ptr<LoadedModel> loadEngineModel(const LoadRequest& request);

}  // namespace tandem::ui
