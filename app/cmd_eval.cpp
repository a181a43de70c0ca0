// tandem-cli eval: prefill + greedy (or teacher-forced) decode, every logits row written out (the golden
// tests use this form), and on request the router's choice scores at every position.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>
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

// The router's choice scores of every position run, [positions][MoE layers][experts], gathered from the
// session's routing observer: a forward pass reports layer by layer, all of its tokens at once.
class RoutingRecorder {
public:
    explicit RoutingRecorder(tandem::Session& session) {
        session.setRoutingObserver([this](int layer, std::size_t tokens, int experts, const float* choice) {
            pass_.push_back({layer, tokens, std::vector<float>(choice, choice + tokens * static_cast<std::size_t>(experts))});
            experts_ = experts;
        });
    }
    RoutingRecorder(const RoutingRecorder&) = delete;
    RoutingRecorder& operator=(const RoutingRecorder&) = delete;

    // After each append of `tokens` positions: this pass's layers, transposed to positions first.
    void endPass(std::size_t tokens) {
        if (pass_.empty()) throw tandem::Error("--router-out: no routing was seen; the router runs on the GPU there, use --device cpu");
        for (const auto& l : pass_)
            if (l.tokens != tokens) throw tandem::Error("--router-out: a layer routed " + std::to_string(l.tokens) + " of " + std::to_string(tokens) + " tokens");
        if (layers_ == 0) layers_ = pass_.size();
        if (pass_.size() != layers_) throw tandem::Error("--router-out: the MoE layers of two passes differ");
        const auto e = static_cast<std::size_t>(experts_);
        for (std::size_t t = 0; t < tokens; ++t)
            for (const auto& l : pass_) scores_.insert(scores_.end(), l.choice.begin() + t * e, l.choice.begin() + (t + 1) * e);
        pass_.clear();
    }

    void write(const std::filesystem::path& path) const {
        const std::filesystem::path temp = path.string() + ".partial";
        {
            std::ofstream out(temp, std::ios::binary | std::ios::trunc);
            out.write(reinterpret_cast<const char*>(scores_.data()), static_cast<std::streamsize>(scores_.size() * sizeof(float)));
            if (!out) throw tandem::Error("writing " + temp.string() + " failed (is the disk full?)");
        }
        std::filesystem::rename(temp, path);
        std::fprintf(stderr, "router scores: %zu positions x %zu MoE layers x %d experts -> %s\n",
                     scores_.size() / std::max<std::size_t>(1, layers_ * static_cast<std::size_t>(experts_)), layers_, experts_,
                     path.c_str());
    }

private:
    struct Layer {
        int layer;
        std::size_t tokens;
        std::vector<float> choice;
    };
    std::vector<Layer> pass_;
    std::vector<float> scores_;
    std::size_t layers_ = 0;
    int experts_ = 0;
};

}  // namespace

int runEval(const CommandArgs& argv) {
    const CliArgs args(argv, {"--dense", "--kv-cache", "--model", "--ids-file", "--new-tokens", "--logits-out", "--threads", "--device", "--gpu-memory", "--gpus", "--experts", "--defer",
                              "--skip", "--forced-ids", "--router-out"},
                       {"--defer-prefill"});
    const auto prompt = readIdsFile(args.required("--ids-file"));
    // Teacher forcing: step i feeds forced[i] instead of the greedy choice, so every row sees the same
    // history as the reference's (one near-tie no longer changes every row after it).
    std::vector<int> forced;
    if (const auto file = args.optional("--forced-ids")) forced = readIdsFile(*file);
    const int newTokens = args.optional("--forced-ids") && !args.optional("--new-tokens")
                              ? static_cast<int>(std::min<std::size_t>(forced.size(), std::numeric_limits<int>::max()))
                              : args.integer("--new-tokens", -1);
    if (newTokens < 0) throw tandem::Error("--new-tokens must be given and not negative");
    if (args.optional("--forced-ids") && static_cast<std::size_t>(newTokens) > forced.size())
        throw tandem::Error("--new-tokens " + std::to_string(newTokens) + " needs " + std::to_string(newTokens) +
                            " forced ids, but the --forced-ids file holds " + std::to_string(forced.size()));
    tandem::EngineOptions options = engineOptions(args);
    // The last generated token is not run, so the prompt and N new tokens need P + N - 1 positions.
    const long long positions = static_cast<long long>(prompt.size()) + std::max(newTokens - 1, 0);
    options.contextLength = static_cast<int>(std::min<long long>(positions, std::numeric_limits<int>::max()));
    auto engine = tandem::Engine::load(args.required("--model"), options);
    reportDevice(engine->info());
    if (positions > engine->info().contextLength)
        throw tandem::Error("the prompt's " + std::to_string(prompt.size()) + " tokens and " + std::to_string(newTokens) +
                            " new tokens need " + std::to_string(positions) + " positions, but this model holds at most " +
                            std::to_string(engine->info().contextLength));
    for (const int id : forced)
        if (id < 0 || id >= engine->info().vocabSize)
            throw tandem::Error("forced id " + std::to_string(id) + " is outside the model's vocabulary of " +
                                std::to_string(engine->info().vocabSize));
    auto session = engine->newSession();
    applyDeferral(args, *session);
    std::optional<RoutingRecorder> routing;
    if (args.optional("--router-out")) routing.emplace(*session);
    const std::size_t vocab = static_cast<std::size_t>(engine->info().vocabSize);

    LogitsWriter writer(args.required("--logits-out"));
    const auto& prefill = session->append(prompt, tandem::Logits::All);
    if (routing) routing->endPass(prompt.size());
    writer.write(prefill.data(), prefill.size());
    std::vector<float> last(prefill.end() - static_cast<std::ptrdiff_t>(vocab), prefill.end());

    // Printed: the greedy choice of every row (with --forced-ids, where it may differ from the token fed).
    std::vector<int> generated;
    for (int i = 0; i < newTokens; ++i) {
        writer.write(last.data(), vocab);
        const int greedy = static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin());
        generated.push_back(greedy);
        const int token = forced.empty() ? greedy : forced[static_cast<std::size_t>(i)];
        if (i + 1 < newTokens) {
            last = session->append(std::span<const int>(&token, 1));
            if (routing) routing->endPass(1);
        }
    }
    writer.commit();
    if (routing) routing->write(*args.optional("--router-out"));
    printIds(generated);
    return 0;
}
