// tandem-cli convert: a Hugging Face MoE checkpoint into a packed model store, and its verification
// (cli_verify.h).
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "cli_args.h"
#include "cli_common.h"
#include "cli_verify.h"
#include "commands.h"
#include "tandem/byte_size.h"
#include "tandem/convert.h"
#include "tandem/error.h"
#include "tandem/store_check.h"

namespace {

using tandem::ConvertProgress;

// On a terminal one line redrawn in place a few times a second; elsewhere (a log, a test) one line per
// finished layer.
class ProgressLine {
public:
    ProgressLine() : terminal_(::isatty(STDERR_FILENO) == 1) {}
    ~ProgressLine() {
        if (drawn_ && terminal_) std::fputc('\n', stderr);
    }

    void operator()(const ConvertProgress& p) {
        const bool layerDone = p.layer != lastLayer_;
        if (terminal_ ? (p.seconds - lastDrawn_ < 0.2 && !layerDone) : !layerDone) return;
        lastLayer_ = p.layer;
        lastDrawn_ = p.seconds;
        const double fraction = p.bytesTotal ? static_cast<double>(p.bytesWritten) / static_cast<double>(p.bytesTotal) : 1.0;
        const double speed = p.seconds > 0 ? static_cast<double>(p.bytesWritten) / p.seconds : 0.0;
        std::string eta = "--:--";
        if (speed > 0) eta = formatDuration(static_cast<double>(p.bytesTotal - std::min(p.bytesTotal, p.bytesWritten)) / speed);
        std::fprintf(stderr, "%sconvert: %3.0f%%  layer %d/%d%s  %s of %s written  %.0f MB/s  ETA %s%s",
                     terminal_ ? "\r" : "", 100 * fraction, p.layer, p.layers,
                     p.resumedLayers ? (" (" + std::to_string(p.resumedLayers) + " kept)").c_str() : "",
                     tandem::formatBytes(p.bytesWritten).c_str(), tandem::formatBytes(p.bytesTotal).c_str(), speed / 1e6, eta.c_str(),
                     terminal_ ? "\x1b[K" : "\n");
        std::fflush(stderr);
        drawn_ = true;
    }

private:
    bool terminal_;
    bool drawn_ = false;
    int lastLayer_ = -1;
    double lastDrawn_ = -1;
};

}  // namespace

int runConvert(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model", "--out", "--experts", "--dense", "--threads"}, {"--verify"});
    const std::string out = args.required("--out");
    // --verify alone checks a store that exists already.
    if (args.flag("--verify") && !args.optional("--model")) return verifyStoreNow(out);

    tandem::ConvertRequest request;
    request.model = args.required("--model");
    request.out = out;
    const std::string experts = args.required("--experts");
    if (experts != "bf16" && experts != "int8" && experts != "int4" && experts != "mxfp4")
        throw tandem::Error("--experts must be bf16, int8, int4 or mxfp4");
    request.experts = parseExperts(experts);
    const std::string dense = args.optional("--dense").value_or("checkpoint");
    if (dense == "int8") request.dense = tandem::StoreDense::Int8;
    else if (dense == "bf16") request.dense = tandem::StoreDense::Bf16;
    else if (dense != "checkpoint") throw tandem::Error("--dense must be checkpoint, int8 or bf16, not '" + dense + "'");
    request.threads = args.integer("--threads", 0);

    tandem::ConvertOutcome result;
    {
        ProgressLine progress;
        result = tandem::convertModel(request, [&](const ConvertProgress& p) {
            progress(p);
            return true;
        });
    }
    if (result.upToDate) {
        std::printf("convert: %s already holds this conversion; nothing to do\n", result.store.c_str());
        if (!args.flag("--verify") && tandem::checkStore(result.store).state == tandem::StoreState::Unverified)
            std::fprintf(stderr, "note: it has not been verified; --verify reads it in full now (chat, generate and eval "
                                 "do before they use it)\n");
    } else {
        std::printf("convert: wrote %s: %d layer%s packed", result.store.c_str(), result.packedLayers,
                    result.packedLayers == 1 ? "" : "s");
        if (result.resumedLayers) std::printf(", %d kept from the interrupted run", result.resumedLayers);
        if (result.denseResumed) std::printf(", model.safetensors kept");
        std::printf(", %s in %.1f s (%.0f MB/s)\n", tandem::formatBytes(result.bytesWritten).c_str(), result.seconds,
                    result.seconds > 0 ? static_cast<double>(result.bytesWritten) / result.seconds / 1e6 : 0.0);
    }
    if (!result.recordProblem.empty()) std::fprintf(stderr, "note: %s\n", result.recordProblem.c_str());
    return args.flag("--verify") ? verifyStoreNow(result.store.string()) : 0;
}
