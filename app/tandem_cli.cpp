// tandem-cli: the engine from the command line.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_args.h"
#include "tandem/engine.h"

namespace {

constexpr const char* kUsage = R"(usage: tandem-cli COMMAND [options]

commands:
  eval      --model DIR --ids-file FILE --new-tokens N --logits-out FILE [--threads N]
            Prefill the prompt ids in FILE, then decode N tokens greedily. Writes every logits row
            (prompt positions, then one row per generated token) as little-endian float32 to the
            --logits-out file and prints the generated ids.
  generate  --model DIR (--ids "ID ..." | --ids-file FILE) [--new-tokens N] [--temperature T]
            [--top-p P] [--top-k K] [--seed S] [--threads N] [--context N]
            Generate from prompt ids, printing ids as they come and the speed at the end.

  --help    this text
)";

std::vector<int> parseIds(const std::string& text, const std::string& where) {
    std::istringstream in(text);
    std::vector<int> ids;
    std::string word;
    while (in >> word) {
        try {
            std::size_t used = 0;
            const long v = std::stol(word, &used);
            if (used != word.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(word);
            ids.push_back(static_cast<int>(v));
        } catch (const std::exception&) {
            throw tandem::Error(where + ": '" + word + "' is not a token id");
        }
    }
    if (ids.empty()) throw tandem::Error(where + " holds no token ids");
    return ids;
}

std::vector<int> readIdsFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw tandem::Error("cannot read " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return parseIds(s.str(), path);
}

// Writes next to the destination and renames, so a failed run never leaves a partial file behind.
class LogitsWriter {
public:
    explicit LogitsWriter(std::filesystem::path path) : path_(std::move(path)), temp_(path_.string() + ".partial") {
        out_.open(temp_, std::ios::binary | std::ios::trunc);
        if (!out_) throw tandem::Error("cannot write " + temp_.string());
    }
    ~LogitsWriter() {
        if (!committed_) {
            out_.close();
            std::error_code ignored;
            std::filesystem::remove(temp_, ignored);
        }
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

void printIds(const std::vector<int>& ids) {
    for (std::size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
}

int runEval(const std::vector<std::string>& argv) {
    const CliArgs args(argv, {"--model", "--ids-file", "--new-tokens", "--logits-out", "--threads"});
    const auto prompt = readIdsFile(args.required("--ids-file"));
    const int newTokens = args.integer("--new-tokens", -1);
    if (newTokens < 0) throw tandem::Error("--new-tokens must be given and not negative");
    tandem::EngineOptions options;
    options.threads = args.integer("--threads", 0);
    options.contextLength = static_cast<int>(prompt.size()) + newTokens;
    auto engine = tandem::Engine::load(args.required("--model"), options);
    auto session = engine->newSession();
    const std::size_t vocab = static_cast<std::size_t>(engine->info().vocabSize);

    LogitsWriter writer(args.required("--logits-out"));
    const auto& prefill = session->append(prompt, tandem::Logits::All);
    writer.write(prefill.data(), prefill.size());
    std::vector<float> last(prefill.end() - static_cast<std::ptrdiff_t>(vocab), prefill.end());

    tandem::GenerateOptions greedy;
    greedy.maxNewTokens = newTokens;
    greedy.stopAtEos = false;
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

int runGenerate(const std::vector<std::string>& argv) {
    const CliArgs args(argv, {"--model", "--ids", "--ids-file", "--new-tokens", "--temperature", "--top-p", "--top-k",
                              "--seed", "--threads", "--context"});
    const auto prompt = args.optional("--ids") ? parseIds(*args.optional("--ids"), "--ids")
                                               : readIdsFile(args.required("--ids-file"));
    tandem::EngineOptions options;
    options.threads = args.integer("--threads", 0);
    options.contextLength = args.integer("--context", options.contextLength);
    std::fprintf(stderr, "loading %s ...\n", args.required("--model").c_str());
    auto engine = tandem::Engine::load(args.required("--model"), options);
    const auto& info = engine->info();
    std::fprintf(stderr, "%s: %d layers, %d experts (%d active), %.1f MB of weights, %d threads\n",
                 info.modelType.c_str(), info.numLayers, info.numExperts, info.expertsPerToken,
                 static_cast<double>(info.weightBytes) / 1e6, engine->threads());

    tandem::GenerateOptions gen;
    gen.maxNewTokens = args.integer("--new-tokens", 32);
    gen.sampling = info.defaultSampling;
    gen.sampling.temperature = static_cast<float>(args.number("--temperature", gen.sampling.temperature));
    gen.sampling.topP = static_cast<float>(args.number("--top-p", gen.sampling.topP));
    gen.sampling.topK = args.integer("--top-k", gen.sampling.topK);
    gen.sampling.seed = static_cast<std::uint64_t>(args.integer("--seed", 0));

    auto session = engine->newSession();
    bool first = true;
    const auto stats = session->generate(prompt, gen, [&](int token) {
        std::printf(first ? "%d" : " %d", token);
        std::fflush(stdout);
        first = false;
        return true;
    });
    std::printf("\n");
    std::fprintf(stderr, "prompt: %d tokens at %.1f tok/s; generated: %d tokens at %.1f tok/s%s\n", stats.promptTokens,
                 stats.prefillTokensPerSecond(), stats.generatedTokens, stats.decodeTokensPerSecond(),
                 stats.stoppedAtEos ? " (end of sequence)" : "");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> rest(argv + std::min(argc, 2), argv + argc);
    const std::string command = argc > 1 ? argv[1] : "";
    try {
        if (command == "eval") return runEval(rest);
        if (command == "generate") return runGenerate(rest);
        if (command == "--help" || command == "-h" || command == "help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        std::fputs(command.empty() ? "tandem-cli: no command given\n\n" : ("tandem-cli: unknown command '" + command + "'\n\n").c_str(), stderr);
        std::fputs(kUsage, stderr);
        return 2;
    } catch (const tandem::Error& e) {
        std::fprintf(stderr, "tandem-cli: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "tandem-cli: out of memory; try a smaller model, a shorter context or fewer threads\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tandem-cli: internal error: %s\n", e.what());
        return 1;
    }
}
