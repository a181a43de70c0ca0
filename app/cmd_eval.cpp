// tandem-cli eval: prefill + greedy decode, every logits row written out (the golden tests use this form).
#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <unistd.h>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "tandem/engine.h"

namespace {

// The partial file Ctrl-C (or SIGTERM) removes on its way out: unlink and _exit are async-signal-safe.
char interruptedPartial[4096];
extern "C" void removePartialAndExit(int signal) {
    if (interruptedPartial[0]) ::unlink(interruptedPartial);
    ::_exit(128 + signal);
}

// Writes next to the destination and renames, so a failed or interrupted run never leaves a partial file
// behind.
class LogitsWriter {
public:
    explicit LogitsWriter(std::filesystem::path path) : path_(std::move(path)), temp_(path_.string() + ".partial") {
        if (temp_.string().size() < sizeof interruptedPartial) {
            std::memcpy(interruptedPartial, temp_.c_str(), temp_.string().size() + 1);
            std::signal(SIGINT, removePartialAndExit);
            std::signal(SIGTERM, removePartialAndExit);
        }
        out_.open(temp_, std::ios::binary | std::ios::trunc);
        if (!out_) throw tandem::Error("cannot write " + temp_.string());
    }
    ~LogitsWriter() {
        if (!committed_) {
            out_.close();
            std::error_code ignored;
            std::filesystem::remove(temp_, ignored);
        }
        std::signal(SIGINT, SIG_DFL);
        std::signal(SIGTERM, SIG_DFL);
        interruptedPartial[0] = '\0';
    }
    void write(const float* data, std::size_t count) {
        // The format is little-endian float32, which is the host layout on every platform we build for.
        out_.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
        if (!out_) throw tandem::Error("writing " + temp_.string() + " failed (is the disk full?)");
    }
    void commit() {
        out_.close();
        if (!out_) throw tandem::Error("writing " + temp_.string() + " failed (is the disk full?)");
        std::filesystem::rename(temp_, path_);
        committed_ = true;
    }

private:
    std::filesystem::path path_, temp_;
    std::ofstream out_;
    bool committed_ = false;
};

}  // namespace

int runEval(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model", "--ids-file", "--new-tokens", "--logits-out", "--threads", "--device", "--experts", "--defer",
                              "--skip"},
                       {"--defer-prefill"});
    const auto prompt = readIdsFile(args.required("--ids-file"));
    const int newTokens = args.integer("--new-tokens", -1);
    if (newTokens < 0) throw tandem::Error("--new-tokens must be given and not negative");
    tandem::EngineOptions options;
    options.threads = args.integer("--threads", 0);
    // The last generated token is not run, so the prompt and N new tokens need P + N - 1 positions.
    const long long positions = static_cast<long long>(prompt.size()) + std::max(newTokens - 1, 0);
    options.contextLength = static_cast<int>(std::min<long long>(positions, std::numeric_limits<int>::max()));
    options.device = parseDevice(args.optional("--device").value_or("auto"));
    options.experts = parseExperts(args.optional("--experts").value_or("auto"));
    auto engine = tandem::Engine::load(args.required("--model"), options);
    reportDevice(engine->info());
    if (positions > engine->info().contextLength)
        throw tandem::Error("the prompt's " + std::to_string(prompt.size()) + " tokens and " + std::to_string(newTokens) +
                            " new tokens need " + std::to_string(positions) + " positions, but this model holds at most " +
                            std::to_string(engine->info().contextLength));
    auto session = engine->newSession();
    applyDeferral(args, *session);
    const std::size_t vocab = static_cast<std::size_t>(engine->info().vocabSize);

    LogitsWriter writer(args.required("--logits-out"));
    const auto& prefill = session->append(prompt, tandem::Logits::All);
    writer.write(prefill.data(), prefill.size());
    std::vector<float> last(prefill.end() - static_cast<std::ptrdiff_t>(vocab), prefill.end());

    std::vector<int> generated;
    for (int i = 0; i < newTokens; ++i) {
        writer.write(last.data(), vocab);
        const int token = static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin());
        generated.push_back(token);
        if (i + 1 < newTokens) last = session->append(std::span<const int>(&token, 1));
    }
    writer.commit();
    printIds(generated);
    return 0;
}

