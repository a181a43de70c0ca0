// tandem-cli tokenize / detokenize / bench-tokenizer: the model's tokenizer.json from the command line.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "tandem/tokenizer.h"

namespace {

std::string readAllStdin() {
    std::ostringstream s;
    s << std::cin.rdbuf();
    return s.str();
}

bool onlyWhitespace(const std::string& text) {
    return text.find_first_not_of(" \t\r\n\v\f") == std::string::npos;
}

}  // namespace

int runTokenize(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model"}, {"--add-special"});
    const auto tokenizer = tandem::text::Tokenizer::load(args.required("--model"));
    std::ios::sync_with_stdio(false);
    printIds(tokenizer.encode(readAllStdin(), args.flag("--add-special")));
    return 0;
}

int runDetokenize(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model"});
    const auto tokenizer = tandem::text::Tokenizer::load(args.required("--model"));
    const std::string input = readAllStdin();
    if (onlyWhitespace(input)) return 0;  // no ids: the text is empty
    const std::string text = tokenizer.decode(parseIds(input, "standard input"), false);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

int runBenchTokenizer(const CommandArgs& argv) {
    const CliArgs args(argv, {"--model", "--file", "--megabytes"});
    const std::string file = args.optional("--file").value_or("/usr/share/common-licenses/GPL-3");
    const int megabytes = args.integer("--megabytes", 8);
    if (megabytes <= 0) throw tandem::Error("--megabytes must be at least 1");
    const auto tokenizer = tandem::text::Tokenizer::load(args.required("--model"));

    std::ifstream in(file, std::ios::binary);
    if (!in) throw tandem::Error("cannot read " + file + "; pass an English text with --file");
    const std::string sample((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (sample.empty()) throw tandem::Error(file + " is empty; pass an English text with --file");
    std::string text;
    const std::size_t target = static_cast<std::size_t>(megabytes) * 1000 * 1000;
    while (text.size() < target) text += sample;

    // Each run encodes the whole text on this one thread. The first run also fills the per-word cache,
    // as the first pages of any long prompt do; the best run shows the steady state.
    const double mb = static_cast<double>(text.size()) / 1e6;
    double first = 0, best = 0;
    std::size_t tokens = 0;
    for (int run = 0; run < 3; ++run) {
        const auto start = std::chrono::steady_clock::now();
        tokens = tokenizer.encode(text, false).size();
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double speed = mb / seconds;
        if (run == 0) first = speed;
        best = std::max(best, speed);
    }
    std::printf("encoded %.2f MB of %s (%zu tokens) on one thread: %.1f MB/s (best of 3 runs; first run %.1f MB/s)\n",
                mb, file.c_str(), tokens, best, first);
    return 0;
}
