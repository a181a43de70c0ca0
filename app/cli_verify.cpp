#include "cli_verify.h"

#include <chrono>
#include <cstdio>
#include <unistd.h>

#include "cli_common.h"
#include "tandem/byte_size.h"
#include "tandem/error.h"
#include "tandem/store_check.h"

namespace {

// On a terminal one line redrawn in place a few times a second; elsewhere (a log, a test) a line every
// 10%.
class VerifyProgress {
public:
    explicit VerifyProgress(std::uint64_t bytes) : bytes_(bytes), terminal_(::isatty(STDERR_FILENO) == 1) {}
    ~VerifyProgress() {
        if (drawn_ && terminal_) std::fputc('\n', stderr);
    }

    bool operator()(double fraction) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        const int percent = static_cast<int>(100 * fraction);
        if (terminal_ ? seconds - lastDrawn_ < 0.2 && fraction < 1.0 : percent / 10 == lastPercent_ / 10) return true;
        lastPercent_ = percent;
        lastDrawn_ = seconds;
        const double done = fraction * static_cast<double>(bytes_);
        const double speed = seconds > 0 ? done / seconds : 0.0;
        const std::string eta = speed > 0 ? formatDuration((static_cast<double>(bytes_) - done) / speed) : "--:--";
        std::fprintf(stderr, "%sverify: %3d%%  %s of %s read  %.0f MB/s  ETA %s%s", terminal_ ? "\r" : "", percent,
                     tandem::formatBytes(static_cast<std::uint64_t>(done)).c_str(), tandem::formatBytes(bytes_).c_str(),
                     speed / 1e6, eta.c_str(), terminal_ ? "\x1b[K" : "\n");
        std::fflush(stderr);
        drawn_ = true;
        return true;
    }

private:
    std::uint64_t bytes_;
    bool terminal_;
    bool drawn_ = false;
    int lastPercent_ = -10;
    double lastDrawn_ = -1;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

tandem::StoreCheck verifyWithProgress(const std::string& dir, std::uint64_t bytes) {
    tandem::StoreCheck result;
    {
        VerifyProgress progress(bytes);
        result = tandem::verifyStore(dir, [&](double f) { return progress(f); });
    }
    if (!result.recordProblem.empty()) std::fprintf(stderr, "note: %s\n", result.recordProblem.c_str());
    return result;
}

}  // namespace

CommandArgs verifyModelFirst(const CommandArgs& args) {
    CommandArgs rest;
    bool noVerify = false;
    std::string model;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--no-verify") {
            noVerify = true;
            continue;
        }
        if (args[i] == "--model" && i + 1 < args.size()) model = args[i + 1];
        if (args[i].rfind("--model=", 0) == 0) model = args[i].substr(8);
        rest.push_back(args[i]);
    }
    if (model.empty()) return rest;  // the command says what is missing
    const tandem::StoreCheck check = tandem::checkStore(model);
    if (check.state == tandem::StoreState::Damaged) throw tandem::Error(check.message);
    if (check.state != tandem::StoreState::Unverified) return rest;
    if (noVerify) {
        std::fprintf(stderr, "note: %s is not verified (%s); it runs without being read in full (--no-verify)\n",
                     model.c_str(), check.message.c_str());
        return rest;
    }
    std::fprintf(stderr, "verify: %s; reading all %s of it once before it is used (--no-verify skips this)\n",
                 check.message.c_str(), tandem::formatBytes(check.bytes).c_str());
    const tandem::StoreCheck result = verifyWithProgress(model, check.bytes);
    if (result.state == tandem::StoreState::Damaged) throw tandem::Error(result.message);
    std::fprintf(stderr, "verify: %s is intact\n", model.c_str());
    return rest;
}

int verifyStoreNow(const std::string& dir) {
    const tandem::StoreCheck check = tandem::checkStore(dir);
    if (check.state == tandem::StoreState::NotAStore)
        throw tandem::Error(dir + " is not a Tandem store: it has no tandem-store.json");
    const tandem::StoreCheck result = verifyWithProgress(dir, check.bytes);
    if (result.state == tandem::StoreState::Damaged) {
        for (const auto& line : result.damage) std::fprintf(stderr, "verify: DAMAGED %s\n", line.c_str());
        std::fprintf(stderr, "verify: %zu damaged file%s in %s. %s\n", result.damage.size(), result.damage.size() == 1 ? "" : "s",
                     dir.c_str(), result.advice.c_str());
        return 1;
    }
    std::printf("verify: %s is intact (%s read%s)\n", dir.c_str(), tandem::formatBytes(check.bytes).c_str(),
                result.recordProblem.empty() ? ", recorded in tandem-verified.json" : "");
    return 0;
}
