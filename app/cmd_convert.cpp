// tandem-cli convert: a Hugging Face MoE checkpoint into a packed model store, and its verification.
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "cli_args.h"
#include "cli_common.h"
#include "io/byte_size.h"
#include "commands.h"
#include "io/packed_store.h"
#include "runtime/convert_model.h"
#include "tandem/error.h"

namespace {

using tandem::runtime::ConvertProgress;

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
                     tandem::io::formatBytes(p.bytesWritten).c_str(), tandem::io::formatBytes(p.bytesTotal).c_str(), speed / 1e6, eta.c_str(),
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

int verifyStore(const std::string& dir) {
    const tandem::io::PackedStore store(dir);
    int lastPercent = -1;
    const auto damage = store.findDamage([&](double fraction) {
        const int percent = static_cast<int>(100 * fraction);
        if (percent / 10 == lastPercent / 10) return;
        lastPercent = percent;
        std::fprintf(stderr, "verify: %3d%%\n", percent);
    });
    for (const auto& line : damage) std::fprintf(stderr, "verify: DAMAGED %s\n", line.c_str());
    if (!damage.empty()) {
        std::fprintf(stderr, "verify: %zu damaged file%s in %s; convert the model again\n", damage.size(),
                     damage.size() == 1 ? "" : "s", dir.c_str());
        return 1;
    }
    std::printf("verify: %s is intact (%zu expert files and %s checked)\n", dir.c_str(), store.moeLayers().size(),
                tandem::io::kStoreDenseName);
    return 0;
}

}  // namespace

int runConvert(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model", "--out", "--experts", "--threads"}, {"--verify"});
    const std::string out = args.required("--out");
    // --verify alone checks a store that exists already.
    if (args.flag("--verify") && !args.optional("--model")) return verifyStore(out);

    tandem::runtime::ConvertOptions options;
    options.model = args.required("--model");
    options.out = out;
    const auto type = tandem::cpu::parseExpertType(args.required("--experts"));
    if (!type) throw tandem::Error("--experts must be bf16, int8 or int4");
    options.experts = *type;
    options.threads = args.integer("--threads", 0);

    tandem::runtime::ConvertResult result;
    {
        ProgressLine progress;
        result = tandem::runtime::convertModel(options, [&](const ConvertProgress& p) { progress(p); });
    }
    if (result.upToDate) {
        std::printf("convert: %s already holds this conversion; nothing to do\n", result.store.c_str());
    } else {
        std::printf("convert: wrote %s: %d layer%s packed", result.store.c_str(), result.packedLayers,
                    result.packedLayers == 1 ? "" : "s");
        if (result.resumedLayers) std::printf(", %d kept from the interrupted run", result.resumedLayers);
        if (result.denseResumed) std::printf(", %s kept", tandem::io::kStoreDenseName);
        std::printf(", %s in %.1f s (%.0f MB/s)\n", tandem::io::formatBytes(result.bytesWritten).c_str(), result.seconds,
                    result.seconds > 0 ? static_cast<double>(result.bytesWritten) / result.seconds / 1e6 : 0.0);
    }
    return args.flag("--verify") ? verifyStore(result.store.string()) : 0;
}
