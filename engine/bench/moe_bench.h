#pragma once
// `tandem-cli bench-moe`: one MoE layer of a real model's shape with random weights and random
// routing, timed on the expert pool, next to the machine's memory bandwidth measured in the same run
// by streaming reads interleaved with the layer runs (about one pass per 0.1 s of layers), so that a
// machine shared with others is sampled alike for both. Figures, never assertions.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cpu/packed_format.h"
#include "cpu/moe/moe_layer.h"
#include "cpu/pool/memory_bandwidth.h"
#include "cpu/pool/worker_pool.h"

namespace tandem::cpu {

struct MoeShape {
    std::string_view name;
    int hidden, inter, experts, topK;
};

std::span<const MoeShape> moeShapes();
const MoeShape* findMoeShape(std::string_view name);

struct MoeBenchOptions {
    MoeShape shape{};
    ExpertType type = ExpertType::INT4;
    std::vector<int> tokens{1};
    int threads = 0;                 // 0: one per physical core
    KernelChoice kernels = KernelChoice::Auto;
    int gemmMinRows = 0;             // > 0 overrides the measured threshold
    int expertsInMemory = 0;         // 0: every expert, or as many as fit in 60% of available memory
    double secondsPerPoint = 2.0;    // measuring time per token count
    int deferred = 0;                // > 0: each layer runs as the GPU path's two parts (the first
                                     // topK - deferred slots, then the rest), queued together with the
                                     // caller joining, as the expert bridge does with Expert Deferral
    bool profilePhases = false;      // time the layer's phases on every thread (MoeBenchPoint::phases)
    std::uint64_t seed = 1;
};

struct MoeBenchPoint {
    int tokens = 0;
    int iterations = 0;
    double secondsPerLayer = 0;      // median over iterations
    double weightBytes = 0;          // mean bytes of distinct expert weights per layer
    double weightsGbps = 0;          // weightBytes / secondsPerLayer
    double bandwidthGbps = 0;        // median of the streaming-read passes interleaved with the layers
    double flops = 0;                // 2 * 3 * hidden * inter per (token, expert)
    double tflops = 0;
    double activeExperts = 0;        // mean
    double gemmExperts = 0;          // mean
    // With profilePhases: thread-seconds per layer in each phase (mean), and the threads' time per
    // layer (participants x mean wall time), of which the rest was spent idle after finishing early.
    MoePhaseSeconds phases;
    double threadSeconds = 0;
};

struct MoeBenchReport {
    Isa isa = Isa::Scalar;
    std::string topology;
    int threads = 0;
    int nodes = 0;
    bool pinned = false;
    int expertsInMemory = 0;
    int layerCopies = 0;             // layers timed in turn so that their experts come from memory
    double layerBytes = 0;           // all experts of the layer, packed
    double packSeconds = 0;
    double bandwidthBestGbps = 0;    // best streaming-read pass of the run
    double bandwidthBufferBytes = 0;
    DispatchLatency dispatch;
    std::vector<MoeBenchPoint> points;
};

// progress receives short lines ("packing 256 experts ...") for a human watching.
MoeBenchReport runMoeBench(const MoeBenchOptions& options, const std::function<void(const std::string&)>& progress);

// The GEMV/GEMM switch: the layer timed with each kernel kind forced, the tokens chosen so every
// expert gets `rows` rows (round-robin routing).
struct SweepPoint {
    int rowsPerExpert = 0;
    double gemvSeconds = 0, gemmSeconds = 0;
};
std::vector<SweepPoint> sweepGemmThreshold(const MoeBenchOptions& options, const std::vector<int>& rowsPerExpert,
                                           const std::function<void(const std::string&)>& progress);

// The AMX tile unit's throughput on this machine (amx_peak.h), one thread and every pool thread at
// once, in operations per second: the measured ceiling of the AMX kernels. Throws tandem::Error
// naming what is missing on a CPU without AMX.
struct TilePeakPoint {
    std::string_view test;
    double oneThread = 0, allThreads = 0;
};
std::vector<TilePeakPoint> measureTilePeak(int threads);

// The selected level's GEMM kernels (options.kernels Gemv: its GEMV kernels) alone (kernel_probe.cpp):
// gate/up and down of the options' shape and type for `rows` activation rows, over one expert (cached)
// and over copies of it that do not fit in the caches, on one thread and then on every pool thread at
// once, in operations per second per thread (2 per multiply-add). secondsPerPoint is each
// measurement's length.
struct KernelProbePoint {
    int rows = 0, experts = 0, threads = 0;
    double gateUpOneThread = 0, downOneThread = 0;
    double gateUpGbps = 0, downGbps = 0;  // expert bytes read per second by the one thread
    double gateUpAllThreads = 0, downAllThreads = 0;  // summed over the threads
};
std::vector<KernelProbePoint> probeKernels(const MoeBenchOptions& options, const std::vector<int>& rows);

}  // namespace tandem::cpu
