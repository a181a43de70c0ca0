// tandem::convertModel: the public face of convert::convertModel, with cancel.
#include "convert/convert_model.h"
#include "convert/expert_precision.h"
#include "tandem/convert.h"

namespace tandem {

namespace {

// Thrown from the progress callback to stop the converter where it is; convertModel treats an
// exception from the callback like Ctrl-C and keeps OUT.partial for the next run to resume.
struct StopRequested {};

}  // namespace

ConvertOutcome convertModel(const ConvertRequest& request, const std::function<bool(const ConvertProgress&)>& onProgress) {
    convert::ConvertOptions options;
    options.model = request.model;
    options.out = request.out;
    options.threads = request.threads;
    const auto type = convert::packedType(request.experts == ExpertPrecision::Auto ? ExpertPrecision::BF16 : request.experts);
    if (!type) throw Error("a store holds its routed experts packed: choose bf16, int8 or int4");
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
