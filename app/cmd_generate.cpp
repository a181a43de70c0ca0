// tandem-cli generate: sample a continuation of prompt ids and report the speed.
#include <cstdio>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "tandem/engine.h"

int runGenerate(const CommandArgs& argv) {
    const CliArgs args(argv, {"--dense", "--kv-cache", "--model", "--ids", "--ids-file", "--new-tokens", "--temperature", "--top-p", "--top-k",
                              "--seed", "--threads", "--context", "--min-p", "--repetition-penalty",
                              "--presence-penalty", "--frequency-penalty", "--device", "--gpu-memory", "--gpus", "--experts", "--defer", "--skip",
                              "--prompts-file"},
                       {"--defer-prefill"});
    // --prompts-file: one prompt of ids per line, each answered in a fresh session on one line of output,
    // so an evaluation over many prompts loads the model once.
    std::vector<std::vector<int>> prompts;
    if (const auto file = args.optional("--prompts-file")) {
        prompts = readPromptsFile(*file);
    } else {
        prompts.push_back(args.optional("--ids") ? parseIds(*args.optional("--ids"), "--ids")
                                                 : readIdsFile(args.required("--ids-file")));
    }
    tandem::EngineOptions options = engineOptions(args);
    std::fprintf(stderr, "loading %s ...\n", args.required("--model").c_str());
    auto engine = tandem::Engine::load(args.required("--model"), options);
    const auto& info = engine->info();
    std::fprintf(stderr, "%s: %d layers, %d experts (%d active), %.1f MB of weights, %d threads, on %s\n",
                 info.modelType.c_str(), info.numLayers, info.numExperts, info.expertsPerToken,
                 static_cast<double>(info.weightBytes) / 1e6, engine->threads(), info.device.c_str());
    reportDevice(info);

    tandem::GenerateOptions gen;
    gen.maxNewTokens = args.integer("--new-tokens", 32);
    if (gen.maxNewTokens < 0) throw tandem::Error("--new-tokens must not be negative");
    gen.sampling = info.defaultSampling;
    gen.sampling.temperature = static_cast<float>(args.number("--temperature", gen.sampling.temperature));
    gen.sampling.topP = static_cast<float>(args.number("--top-p", gen.sampling.topP));
    gen.sampling.topK = args.integer("--top-k", gen.sampling.topK);
    gen.sampling.minP = static_cast<float>(args.number("--min-p", gen.sampling.minP));
    gen.sampling.repetitionPenalty = static_cast<float>(args.number("--repetition-penalty", gen.sampling.repetitionPenalty));
    gen.sampling.presencePenalty = static_cast<float>(args.number("--presence-penalty", gen.sampling.presencePenalty));
    gen.sampling.frequencyPenalty = static_cast<float>(args.number("--frequency-penalty", gen.sampling.frequencyPenalty));
    gen.sampling.seed = static_cast<std::uint64_t>(args.integer("--seed", 0));

    tandem::GenerationStats stats;
    for (const auto& prompt : prompts) {
        auto session = engine->newSession();
        applyDeferral(args, *session);
        bool first = true;
        stats = session->generate(prompt, gen, [&](int token) {
            std::printf(first ? "%d" : " %d", token);
            std::fflush(stdout);
            first = false;
            return true;
        });
        std::printf("\n");
        std::fflush(stdout);
    }
    std::fprintf(stderr, "prompt: %d tokens at %.1f tok/s; generated: %d tokens at %.1f tok/s%s\n", stats.promptTokens,
                 stats.prefillTokensPerSecond(), stats.generatedTokens, stats.decodeTokensPerSecond(),
                 stats.stoppedAtEos ? " (end of sequence)" : "");
    const auto& d = stats.decode;
    std::fprintf(stderr,
                 "time to first token %.1f ms; decode step %.2f ms, GPU busy %.0f%%, expert pool busy %.0f%%, "
                 "%ld graph launches for %ld steps\n",
                 stats.timeToFirstTokenSeconds * 1e3, d.stepMs, d.gpuBusyFraction * 100, d.expertPoolBusyFraction * 100,
                 d.graphLaunches, d.steps);
    return 0;
}

