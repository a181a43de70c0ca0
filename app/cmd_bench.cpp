// tandem-cli bench: the whole model, prefill then decode, on a model folder or store (--model) or a
// synthetic model with the exact shapes of a real one (--synthetic), next to the decode ceiling of this
// machine (memory bandwidth / expert bytes per token); a llama-bench-like table (pp N, tg N) at the end.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_streams.h"
#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "tandem/engine.h"
#include "tandem/tuning.h"

namespace {

// The lent and shared machines this runs on change their memory bandwidth from one minute to the next,
// so each run's ceiling comes from streaming reads taken right before and right after it, the higher
// of the two (the conservative choice: a dip during one probe cannot inflate the percentage).
struct Machine {
    double bandwidthGbps = 0;
    double beforeGbps = 0, afterGbps = 0;
    double ceiling = 0;  // decode tok/s if reading the routed experts were all a step did
};

void report(const std::string& shape, const tandem::Engine& engine, const tandem::Session& session, const Machine& m,
            const tandem::GenerationStats& stats, int promptTokens, bool json) {
    const auto& info = engine.info();
    const auto& d = stats.decode;
    double gpu = 0, overlap = 0, wait = 0, cpu = 0;
    for (const auto& l : d.layers) {
        gpu += l.gpuMs;
        overlap += l.overlapMs;
        wait += l.waitMs;
        cpu += l.cpuExpertsMs;
    }
    const double decode = stats.decodeTokensPerSecond();
    // The rate the CPU read the routed experts at while it ran them: the kernels' own figure, next to
    // the probe's (which the ceiling uses).
    const double cpuGbps = cpu > 0 ? static_cast<double>(info.routedBytesPerToken) / (cpu * 1e-3) / 1e9 : 0.0;
    std::printf("%s, %s experts (%s kernels), %d threads, on %s, deferral %d%s%s\n", shape.c_str(), info.experts.c_str(),
                info.cpuKernels.c_str(), engine.threads(), info.device.c_str(), session.deferral(),
                info.dense == "int8" ? ", dense weights int8" : "", info.kvCache == "int8" ? ", KV cache int8" : "");
    if (info.device != "CPU" && !info.placement.empty()) std::printf("  routed experts: %s\n", info.placement.c_str());
    std::printf("  prefill   %8.1f tok/s   (%d tokens, time to first token %.2f s)\n", stats.prefillTokensPerSecond(),
                promptTokens, stats.timeToFirstTokenSeconds);
    std::printf("  decode    %8.1f tok/s   (%ld steps, %ld graph launches)\n", decode, d.steps, d.graphLaunches);
    std::printf("  ceiling   %8.1f tok/s   (%.1f GB/s measured, %.1f before and %.1f after the run / %.0f MB of routed "
                "experts per token) -> %.0f%%\n",
                m.ceiling, m.bandwidthGbps, m.beforeGbps, m.afterGbps, static_cast<double>(info.routedBytesPerToken) / 1e6,
                m.ceiling > 0 ? 100.0 * decode / m.ceiling : 0.0);
    std::printf("  step      %8.2f ms: GPU alone %.2f, GPU+CPU %.2f, GPU waiting %.2f, between steps %.2f; CPU experts %.2f "
                "(read at %.1f GB/s); GPU busy %.0f%%, expert pool busy %.0f%%\n",
                d.stepMs, gpu, overlap, wait, d.betweenStepsMs, cpu, cpuGbps, d.gpuBusyFraction * 100,
                d.expertPoolBusyFraction * 100);
    // The KV cache a decode step reads (every layer's rows of the context, the mean over the steps) and
    // what that alone would allow at the measured bandwidth; on the CPU path also with the weights a step
    // reads (cpuBytesPerToken): the roofline of a decode step at this depth.
    const double kvBytes = static_cast<double>(info.kvBytesPerPosition) * (promptTokens + 0.5 * static_cast<double>(d.steps));
    const double kvMs = m.bandwidthGbps > 0 ? kvBytes / (m.bandwidthGbps * 1e9) * 1e3 : 0.0;
    const double roofline = m.bandwidthGbps > 0 && info.cpuBytesPerToken > 0
                                ? m.bandwidthGbps * 1e9 / (kvBytes + static_cast<double>(info.cpuBytesPerToken))
                                : 0.0;
    const double positions = kvBytes / std::max<double>(1.0, static_cast<double>(info.kvBytesPerPosition));
    // On the GPU path the cache lives in the GPU's memory: the CPU's bandwidth says nothing of its time.
    if (info.device == "CPU")
        std::printf("  kv cache  %s: %.1f MB read a step (%.0f positions), %.2f ms at %.1f GB/s", info.kvCache.c_str(), kvBytes / 1e6,
                    positions, kvMs, m.bandwidthGbps);
    else
        std::printf("  kv cache  %s: %.1f MB read a step (%.0f positions), in the GPU's memory", info.kvCache.c_str(), kvBytes / 1e6,
                    positions);
    if (roofline > 0)
        std::printf("; with the %.0f MB of weights a step reads: %.1f tok/s -> %.0f%%", static_cast<double>(info.cpuBytesPerToken) / 1e6,
                    roofline, 100.0 * decode / roofline);
    std::printf("\n");
    if (!json) return;
    std::printf("{\"shape\": \"%s\", \"experts\": \"%s\", \"isa\": \"%s\", \"device\": \"%s\", \"threads\": %d, "
                "\"deferral\": %d, \"prefill_tokens_per_second\": %.3f, \"decode_tokens_per_second\": %.3f, "
                "\"ceiling_tokens_per_second\": %.3f, \"bandwidth_gbps\": %.3f, \"bandwidth_before_gbps\": %.3f, "
                "\"bandwidth_after_gbps\": %.3f, \"routed_bytes_per_token\": %llu, "
                "\"time_to_first_token_seconds\": %.4f, \"step_ms\": %.4f, \"gpu_busy\": %.4f, \"expert_pool_busy\": %.4f, "
                "\"gpu_alone_ms\": %.4f, \"waiting_ms\": %.4f, \"between_steps_ms\": %.4f, \"cpu_experts_ms\": %.6f, "
                "\"cpu_experts_gbps\": %.3f, \"graph_launches\": %ld, \"steps\": %ld, \"placement\": \"%s\", \"prompt_tokens\": %d, "
                "\"kv_cache\": \"%s\", \"kv_bytes_per_step\": %.0f, \"roofline_with_kv_tokens_per_second\": %.3f}\n",
                shape.c_str(), info.experts.c_str(), info.cpuKernels.c_str(), info.device.c_str(), engine.threads(),
                session.deferral(), stats.prefillTokensPerSecond(), decode, m.ceiling, m.bandwidthGbps, m.beforeGbps,
                m.afterGbps, static_cast<unsigned long long>(info.routedBytesPerToken), stats.timeToFirstTokenSeconds, d.stepMs,
                d.gpuBusyFraction, d.expertPoolBusyFraction, gpu, wait, d.betweenStepsMs, cpu, cpuGbps, d.graphLaunches, d.steps,
                info.device == "CPU" ? "CPU" : info.placement.c_str(), promptTokens, info.kvCache.c_str(), kvBytes, roofline);
}

// "512,2048" -> {512, 2048}.
std::vector<int> commaList(const std::string& text, const std::string& what) {
    std::string list = text;
    for (char& c : list) c = c == ',' ? ' ' : c;
    return parseIds(list, what);
}

// One line of the table.
struct Row {
    int deferral;
    std::string test;  // "pp512", "tg128"
    double tokensPerSecond;
};

void printTable(const std::string& model, const tandem::Engine& engine, const std::vector<Row>& rows) {
    const auto& info = engine.info();
    // Where the routed experts run: the CPU, or on the GPU path as the placement plan put them
    // (--gpu-memory; "12 of 48 MoE layers wholly on the GPU (4.08 GB)").
    const std::string placement = !info.numExperts ? "-" : info.device == "CPU" ? "CPU" : info.placement;
    std::printf("\n| model | experts | device | threads | routed experts on | deferral | test | t/s |\n");
    std::printf("|---|---|---|---:|---|---:|---|---:|\n");
    for (const Row& r : rows)
        std::printf("| %s | %s | %s | %d | %s | %d | %s | %.2f |\n", model.c_str(), info.experts.c_str(), info.device.c_str(),
                    engine.threads(), placement.c_str(), r.deferral, r.test.c_str(), r.tokensPerSecond);
}

}  // namespace

int runBench(const CommandArgs& argv) {
    const CliArgs args(argv, {"--dense", "--kv-cache", "--synthetic", "--model", "--experts", "--prompt", "--gen", "--defer", "--threads", "--device", "--gpu-memory", "--gpus",
                              "--seed", "--context", "--depth", "--streams"},
                       {"--json", "--no-warmup"});
    const auto synthetic = args.optional("--synthetic");
    const auto modelDir = args.optional("--model");
    if (synthetic.has_value() == modelDir.has_value())
        throw tandem::Error("bench needs either --model DIR|STORE or --synthetic SHAPE");
    const std::vector<int> prompts = commaList(args.optional("--prompt").value_or("512"), "--prompt");
    const int genTokens = args.integer("--gen", 128);
    for (const int p : prompts)
        if (p < 1) throw tandem::Error("--prompt sizes must be at least 1");
    if (genTokens < 2) throw tandem::Error("--gen must be at least 2");
    // --depth 8192,16384: decode after that many tokens of context (a random prompt whose prefill is not
    // reported), as llama-bench's -d.
    const std::vector<int> depths = args.optional("--depth") ? commaList(*args.optional("--depth"), "--depth") : std::vector<int>{};
    for (const int d : depths)
        if (d < 1) throw tandem::Error("--depth sizes must be at least 1");
    // --defer 0,2 runs the same model with each deferral: it is a per-session setting.
    const std::vector<int> deferrals = commaList(args.optional("--defer").value_or("0"), "--defer");

    tandem::EngineOptions options = engineOptions(args, synthetic ? "int4" : "auto");
    int longest = *std::max_element(prompts.begin(), prompts.end());
    for (const int d : depths) longest = std::max(longest, d);
    options.contextLength = longest + genTokens + 2;  // --streams: a warm-up step before genTokens
    std::unique_ptr<tandem::Engine> engine;
    std::string model;
    if (synthetic) {
        std::fprintf(stderr, "building %s with random weights ...\n", synthetic->c_str());
        engine = tandem::Engine::synthetic(*synthetic, options, static_cast<std::uint64_t>(args.integer("--seed", 1)));
        model = *synthetic + " (synthetic)";
    } else {
        engine = tandem::Engine::load(*modelDir, options);
        model = std::filesystem::path(*modelDir).filename().string();
        if (model.empty()) model = std::filesystem::path(*modelDir).parent_path().filename().string();
    }
    if (options.contextLength > engine->info().contextLength)
        throw tandem::Error("the largest --prompt (or --depth) and --gen need " + std::to_string(options.contextLength) +
                            " positions, but this model holds at most " + std::to_string(engine->info().contextLength));
    const std::string& shape = synthetic ? *synthetic : model;
    reportDevice(engine->info());
    if (const std::string tuning = tandem::tuning().differences(); !tuning.empty())
        std::printf("tuning: %s\n", tuning.c_str());

    if (const auto streams = args.optional("--streams")) {
        // --streams 1,4,8: each count of sessions decoded together, on the first --prompt size.
        StreamsBench bench;
        bench.shape = shape;
        bench.streams = commaList(*streams, "--streams");
        for (const int s : bench.streams)
            if (s < 1) throw tandem::Error("--streams counts must be at least 1");
        bench.promptTokens = prompts.front();
        bench.genSteps = genTokens;
        bench.warmup = !args.flag("--no-warmup");
        bench.json = args.flag("--json");
        for (const int d : deferrals) {  // --defer 0,1: every stream count at each deferral, in turn
            bench.deferral = d;
            runStreamsBench(*engine, bench);
        }
        return 0;
    }

    std::mt19937 rng(7);
    std::uniform_int_distribution<int> token(0, engine->info().vocabSize - 1);
    tandem::GenerateOptions gen;
    gen.maxNewTokens = genTokens;
    gen.stopAtEos = false;
    std::vector<Row> rows;
    // One measured run: a fresh session, the prompt, then genTokens of decode after it.
    const auto measure = [&](const std::vector<int>& prompt, int defer) {
        auto session = engine->newSession();
        session->setDeferral(defer);
        std::fprintf(stderr, "measuring memory bandwidth ...\n");
        Machine machine;
        machine.beforeGbps = engine->measureMemoryBandwidth();
        std::fprintf(stderr, "prefill %zu tokens, decode %d, deferral %d ...\n", prompt.size(), genTokens, defer);
        const auto stats = session->generate(prompt, gen, [](int) { return true; });
        std::fprintf(stderr, "measuring memory bandwidth again ...\n");
        machine.afterGbps = engine->measureMemoryBandwidth();
        machine.bandwidthGbps = std::max(machine.beforeGbps, machine.afterGbps);
        if (const auto bytes = engine->info().routedBytesPerToken)
            machine.ceiling = machine.bandwidthGbps * 1e9 / static_cast<double>(bytes);
        report(shape, *engine, *session, machine, stats, static_cast<int>(prompt.size()), args.flag("--json"));
        return stats;
    };
    for (const int promptTokens : prompts) {
        std::vector<int> prompt(static_cast<std::size_t>(promptTokens));
        for (int& t : prompt) t = token(rng);
        if (!args.flag("--no-warmup")) {
            // As llama-bench does: the same prompt once, untimed, so that what a first pass pays once (the
            // GPU's kernels loaded, cuBLAS's choices, the store's pages read in) is not counted.
            std::fprintf(stderr, "warm-up: prefill %d tokens, decode 2 ...\n", promptTokens);
            tandem::GenerateOptions warm = gen;
            warm.maxNewTokens = 2;
            auto session = engine->newSession();
            session->setDeferral(deferrals.front());
            session->generate(prompt, warm, [](int) { return true; });
        }
        for (const int defer : deferrals) {
            const auto stats = measure(prompt, defer);
            rows.push_back({defer, "pp" + std::to_string(promptTokens), stats.prefillTokensPerSecond()});
            // Decode after the prompt: llama-bench calls this depth "tg N @ dP".
            rows.push_back({defer, "tg" + std::to_string(genTokens) + " @ d" + std::to_string(promptTokens),
                            stats.decodeTokensPerSecond()});
        }
    }
    for (const int depth : depths) {
        std::vector<int> context(static_cast<std::size_t>(depth));
        for (int& t : context) t = token(rng);
        for (const int defer : deferrals)
            rows.push_back({defer, "tg" + std::to_string(genTokens) + " @ d" + std::to_string(depth),
                            measure(context, defer).decodeTokensPerSecond()});
    }
    // Decode from an empty context (one token), as llama-bench's "tg N" runs it.
    for (const int defer : deferrals) {
        const auto stats = measure({token(rng)}, defer);
        rows.push_back({defer, "tg" + std::to_string(genTokens), stats.decodeTokensPerSecond()});
    }
    printTable(model, *engine, rows);
    return 0;
}
