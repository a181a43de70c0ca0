// tandem-cli bench-moe: time one MoE layer of a real model's shape on the CPU expert engine.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_args.h"
#include "commands.h"
#include "bench/kernel_check.h"
#include "bench/moe_bench.h"
#include "tandem/error.h"

namespace {

using namespace tandem::cpu;

std::vector<int> parseTokenList(const std::string& text) {
    std::vector<int> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        try {
            std::size_t used = 0;
            const int n = std::stoi(item, &used);
            if (used == item.size() && n > 0) {
                out.push_back(n);
                continue;
            }
        } catch (const std::exception&) {
        }
        throw tandem::Error("--tokens expects positive counts separated by commas, not '" + text + "'");
    }
    if (out.empty()) throw tandem::Error("--tokens expects at least one count");
    return out;
}

std::string shapeNames() {
    std::string s;
    for (const auto& shape : moeShapes()) {
        if (!s.empty()) s += '|';
        s += shape.name;
    }
    return s;
}

// Runs the kernel and whole-layer checks of the selected ISA; prints one line each; returns failures.
int verify(int threads, bool quiet) {
    ExpertPool pool(PoolOptions::fromEnvironment(threads));
    const Isa isa = selectedIsa();
    auto checks = checkKernels(kernelsFor(isa), 11);
    for (auto& c : checkMoeLayer(pool, isa, 12)) checks.push_back(c);
    int failures = 0;
    double worst = 0;
    for (const auto& c : checks) {
        failures += !c.passed();
        worst = std::max(worst, c.error / c.tolerance);
        if (!quiet || !c.passed())
            std::fprintf(stderr, "verify %-58s error %.2e (tolerance %.0e) %s\n", c.name.c_str(), c.error, c.tolerance,
                         c.passed() ? "ok" : "FAILED");
    }
    std::fprintf(stderr, "verify: %zu checks of the %s kernels against the scalar kernels, %d failed, worst at %.0f%% of its tolerance\n",
                 checks.size(), std::string(isaName(isa)).c_str(), failures, 100 * worst);
    return failures;
}

// The real-shape check (bench/kernel_check.h) of the selected ISA at --shape for one expert type: "ci"
// (every expert with 1 row, three with 1..64, the layer's decode) or "full" (every expert with 1..64).
int verifyShape(const MoeShape& shape, ExpertType type, const std::string& plan, int threads, int expertsInMemory) {
    const int experts = expertsInMemory > 0 ? std::min(expertsInMemory, shape.experts) : shape.experts;
    const std::string name(shape.name);
    RealShapePlan p;
    if (plan == "ci")
        p = RealShapePlan::ci(name, shape.hidden, shape.inter, experts, shape.topK);
    else if (plan == "full")
        p = RealShapePlan::full(name, shape.hidden, shape.inter, experts, shape.topK);
    else
        throw tandem::Error("--verify-shape must be ci or full");
    ThreadPool pool(threads);
    const Isa isa = selectedIsa();
    const auto checks = checkRealShape(pool, isa, type, p, 21, [](const std::string& line) { std::fprintf(stderr, "verify-shape: %s\n", line.c_str()); });
    int failures = 0;
    double worst = 0;
    for (const auto& c : checks) {
        failures += !c.passed();
        worst = std::max(worst, c.error / c.tolerance);
        std::printf("verify %-90s error %.2e (tolerance %.0e) %s\n", c.name.c_str(), c.error, c.tolerance, c.passed() ? "ok" : "FAILED");
    }
    std::printf("verify-shape %s: %zu checks of the %s %s kernels against the scalar kernels at %s widths (%d experts), %d failed, "
                "worst at %.0f%% of its tolerance\n",
                plan.c_str(), checks.size(), std::string(isaName(isa)).c_str(), std::string(expertTypeName(type)).c_str(), name.c_str(),
                experts, failures, 100 * worst);
    return failures;
}

}  // namespace

int runBenchMoe(const CommandArgs& argv) {
    const CliArgs args(argv,
                       {"--shape", "--experts", "--tokens", "--threads", "--kernels", "--gemm-min-rows", "--experts-in-memory",
                        "--seconds", "--sweep", "--defer", "--verify-shape"},
                       {"--json", "--verify", "--tile-peak", "--phases", "--kernel-probe"});
    if (args.flag("--tile-peak")) {
        const int threads = args.integer("--threads", 0);
        const auto points = measureTilePeak(threads);
        std::printf("AMX tile unit, operations per second (2 per multiply-add)\n%-40s %12s %14s\n", "test", "one thread", "all threads");
        for (const auto& p : points)
            std::printf("%-40s %8.2f TOP/s %10.2f TOP/s\n", std::string(p.test).c_str(), p.oneThread / 1e12, p.allThreads / 1e12);
        return 0;
    }
    const std::string shapeName = args.required("--shape");
    const MoeShape* shape = findMoeShape(shapeName);
    if (!shape) throw tandem::Error("unknown --shape '" + shapeName + "'; choose " + shapeNames());
    const auto type = parseExpertType(args.required("--experts"));
    if (!type) throw tandem::Error("--experts must be bf16, int8, int4 or mxfp4");
    MoeBenchOptions o;
    o.shape = *shape;
    o.type = *type;
    o.tokens = parseTokenList(args.optional("--tokens").value_or("1"));
    o.threads = args.integer("--threads", 0);
    o.gemmMinRows = args.integer("--gemm-min-rows", 0);
    o.expertsInMemory = args.integer("--experts-in-memory", 0);
    o.secondsPerPoint = args.number("--seconds", 2.0);
    o.deferred = args.integer("--defer", 0);
    o.profilePhases = args.flag("--phases");
    if (o.deferred < 0 || o.deferred >= shape->topK)
        throw tandem::Error("--defer must be between 0 and " + std::to_string(shape->topK - 1) + " for this shape");
    const std::string kernels = args.optional("--kernels").value_or("auto");
    if (kernels == "gemv")
        o.kernels = KernelChoice::Gemv;
    else if (kernels == "gemm")
        o.kernels = KernelChoice::Gemm;
    else if (kernels != "auto")
        throw tandem::Error("--kernels must be auto, gemv or gemm");
    const bool json = args.flag("--json");
    auto progress = [](const std::string& line) { std::fprintf(stderr, "bench-moe: %s\n", line.c_str()); };

    const int failures = args.flag("--verify") ? verify(o.threads, json) : 0;
    if (const auto plan = args.optional("--verify-shape"))
        return verifyShape(*shape, o.type, *plan, o.threads, o.expertsInMemory) + failures > 0 ? 1 : 0;

    if (const auto sweep = args.optional("--sweep")) {
        const auto rows = parseTokenList(*sweep);
        const auto points = sweepGemmThreshold(o, rows, progress);
        std::printf("rows/expert  gemv s/layer  gemm s/layer  faster\n");
        int threshold = 0;
        for (const auto& p : points) {
            std::printf("%11d  %12.6f  %12.6f  %s\n", p.rowsPerExpert, p.gemvSeconds, p.gemmSeconds, p.gemmSeconds < p.gemvSeconds ? "gemm" : "gemv");
            if (p.gemmSeconds >= p.gemvSeconds) threshold = 0;
            else if (!threshold) threshold = p.rowsPerExpert;
        }
        std::printf("GEMM is faster from %d rows per expert on (%s kernels)\n", threshold, std::string(isaName(selectedIsa())).c_str());
        return failures ? 1 : 0;
    }

    if (args.flag("--kernel-probe")) {
        const auto points = tandem::cpu::probeKernels(o, o.tokens);
        std::printf("%s %s %s kernels (%s), TOP/s per thread (2 per multiply-add): one thread alone, then every thread at once; "
                    "GB/s of weights read by the one thread\n",
                    std::string(shape->name).c_str(), std::string(expertTypeName(o.type)).c_str(),
                    o.kernels == KernelChoice::Gemv ? "GEMV" : "GEMM", std::string(isaName(selectedIsa())).c_str());
        std::printf("%6s %8s %8s %14s %10s %14s %10s %12s %9s\n", "rows", "experts", "threads", "gate/up alone", "down alone",
                    "gate/up shared", "down shared", "gate/up GB/s", "down GB/s");
        for (const auto& p : points)
            std::printf("%6d %8d %8d %14.3f %10.3f %14.3f %10.3f %12.1f %9.1f\n", p.rows, p.experts, p.threads, p.gateUpOneThread / 1e12,
                        p.downOneThread / 1e12, p.gateUpAllThreads / p.threads / 1e12, p.downAllThreads / p.threads / 1e12,
                        p.gateUpGbps, p.downGbps);
        return failures ? 1 : 0;
    }

    const MoeBenchReport r = runMoeBench(o, progress);
    const ExpertLayout layout = ExpertLayout::make(o.type, o.shape.hidden, o.shape.inter);
    std::printf("bench-moe %s: %d experts %dx%d, top-%d, %s experts (%.2f MB each; %d packed in %.1f s, as %d layer%s in turn)\n",
                std::string(shape->name).c_str(), shape->experts, shape->inter, shape->hidden, shape->topK,
                std::string(expertTypeName(o.type)).c_str(), static_cast<double>(layout.dataBytes) / 1e6, r.expertsInMemory,
                r.packSeconds, r.layerCopies, r.layerCopies == 1 ? "" : "s");
    std::printf("cpu: %s kernels, %s%s\n", std::string(isaName(r.isa)).c_str(), r.topology.c_str(), r.pinned ? ", pinned" : ", NOT pinned");
    std::printf("expert pool dispatch: %.1f us with workers spinning, %.1f us from sleep\n", r.dispatch.spinningMicros,
                r.dispatch.sleepingMicros);
    std::printf("memory bandwidth: streaming reads of %.0f MiB interleaved with the layers; best pass %.1f GB/s\n",
                r.bandwidthBufferBytes / (1 << 20), r.bandwidthBestGbps);
    std::printf("tokens      s/layer  weights GB/s  bandwidth GB/s  of bandwidth  TFLOP/s  experts (GEMM)\n");
    for (const auto& p : r.points)
        std::printf("%6d  %11.6f  %12.1f  %14.1f  %11.0f%%  %7.3f  %6.1f (%.1f)\n", p.tokens, p.secondsPerLayer, p.weightsGbps,
                    p.bandwidthGbps, 100 * p.weightsGbps / p.bandwidthGbps, p.tflops, p.activeExperts, p.gemmExperts);
    auto phaseShares = [](const MoeBenchPoint& p) {
        const MoePhaseSeconds& s = p.phases;
        const double t = p.threadSeconds;
        const double idle = t - (s.convertX + s.gateUp + s.convertAct + s.down + s.reduce + s.barriers);
        return nlohmann::json{{"convert_x", s.convertX / t}, {"gate_up", s.gateUp / t},   {"convert_act", s.convertAct / t},
                              {"down", s.down / t},          {"reduce", s.reduce / t},    {"barriers", s.barriers / t},
                              {"other", idle / t}};
    };
    if (o.profilePhases) {
        std::printf("share of the threads' time per layer: convert x, gate/up, convert act, down, reduce, barriers, other (idle after finishing, the caller's preparation, wake-up)\n");
        for (const auto& p : r.points) {
            const auto s = phaseShares(p);
            std::printf("%6d  %5.1f%% %5.1f%% %5.1f%% %5.1f%% %5.1f%% %5.1f%% %5.1f%%\n", p.tokens, 100 * s["convert_x"].get<double>(),
                        100 * s["gate_up"].get<double>(), 100 * s["convert_act"].get<double>(), 100 * s["down"].get<double>(),
                        100 * s["reduce"].get<double>(), 100 * s["barriers"].get<double>(), 100 * s["other"].get<double>());
        }
    }
    if (json)
        for (const auto& p : r.points) {
            nlohmann::json j = {
                {"shape", shape->name},
                {"experts", expertTypeName(o.type)},
                {"tokens", p.tokens},
                {"seconds_per_layer", p.secondsPerLayer},
                {"weights_gbps", p.weightsGbps},
                {"bandwidth_gbps", p.bandwidthGbps},
                {"bandwidth_best_gbps", r.bandwidthBestGbps},
                {"bandwidth_fraction", p.weightsGbps / p.bandwidthGbps},
                {"tflops", p.tflops},
                {"isa", isaName(r.isa)},
                {"threads", r.threads},
                {"deferred", o.deferred},
                {"numa_nodes", r.nodes},
                {"weight_bytes", p.weightBytes},
                {"layer_bytes", r.layerBytes},
                {"active_experts", p.activeExperts},
                {"gemm_experts", p.gemmExperts},
                {"experts_in_memory", r.expertsInMemory},
                {"layer_copies", r.layerCopies},
                {"iterations", p.iterations},
                {"dispatch_us_spinning", r.dispatch.spinningMicros},
                {"dispatch_us_sleeping", r.dispatch.sleepingMicros},
                {"verify_failures", failures},
            };
            if (o.profilePhases) j["phases"] = phaseShares(p);
            std::printf("%s\n", j.dump().c_str());
        }
    return failures ? 1 : 0;
}
