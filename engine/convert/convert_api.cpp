// tandem::convertModel: the public face of convert::convertModel, with cancel.
#include "convert/convert_model.h"
#include "convert/expert_precision.h"
#include "model/config.h"
#include "tandem/convert.h"

namespace tandem {

namespace {

// Thrown from the progress callback to stop the converter where it is; convertModel treats an
// exception from the callback like Ctrl-C and keeps OUT.partial for the next run to resume.
struct StopRequested {};

// Auto: the experts as the checkpoint holds them where a packed type does so exactly (gpt-oss's MXFP4,
// compressed-tensors int4), else bf16.
ExpertPrecision autoPrecision(const std::filesystem::path& model) {
    if (!std::filesystem::is_directory(model) || !std::filesystem::is_regular_file(model / "config.json")) return ExpertPrecision::BF16;
    const model::ModelConfig c = model::loadModelConfig(model);
    if (c.mxfp4Experts) return ExpertPrecision::MXFP4;
    if (c.packedInt4Group > 0) return ExpertPrecision::INT4;
    return ExpertPrecision::BF16;
}

}  // namespace

ConvertOutcome convertModel(const ConvertRequest& request, const std::function<bool(const ConvertProgress&)>& onProgress) {
    convert::ConvertOptions options;
    options.model = request.model;
    options.out = request.out;
    options.threads = request.threads;
    const auto type = convert::packedType(request.experts == ExpertPrecision::Auto ? autoPrecision(request.model) : request.experts);
    if (!type) throw Error("a store holds its routed experts packed: choose bf16, int8, int4 or mxfp4");
    options.experts = *type;
    options.dense = request.dense == StoreDense::Int8 ? "int8" : request.dense == StoreDense::Bf16 ? "bf16" : "checkpoint";

    ConvertOutcome outcome;
    try {
        const convert::ConvertResult result = convert::convertModel(options, [&](const convert::ConvertProgress& p) {
            if (!onProgress) return;
            const ConvertProgress progress{p.layer, p.layers, p.resumedLayers, p.bytesWritten, p.bytesTotal, p.seconds};
            if (!onProgress(progress)) throw StopRequested{};
        });
        outcome.upToDate = result.upToDate;
        outcome.packedLayers = result.packedLayers;
        outcome.resumedLayers = result.resumedLayers;
        outcome.denseResumed = result.denseResumed;
        outcome.bytesWritten = result.bytesWritten;
        outcome.seconds = result.seconds;
        outcome.store = result.store;
        outcome.recordProblem = result.recordProblem;
    } catch (const StopRequested&) {
        outcome.cancelled = true;
        outcome.store = request.out;
    }
    return outcome;
}

}  // namespace tandem
