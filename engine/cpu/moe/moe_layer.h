#pragma once
// The routed experts of one MoE layer on the CPU: for T tokens with their top-k routing, accumulates
//   out[t] += sum_j weight[t][j] * expert_{id[t][j]}(x[t])
// where expert(x) = down(SiLU(gate x) * up x), or with the layer's biases and activation
// (PackedMoeLayer::setEpilogue: gpt-oss) down(act(gate x + bg, up x + bu)) + bd. This is what the model's feed-forward block calls, and
// what the GPU path submits asynchronously (submit, then wait or poll) while it works on other things.
//
// One evaluation is one pool job in five phases separated by spin barriers:
//   A  every (token, expert) row's input converted to the kernels' format (bf16 hi + lo or float32,
//      or int8 + scale: activation_quant.h)
//   B  per node: gate/up panels of the active experts -> SiLU(gate)*up, jobs of (expert, panel range)
//   C  the intermediate rows converted to the kernels' format (float32 ones are read as they are)
//   D  per node: down, jobs of output row ranges looping over the active experts, so no two threads
//      ever add into the same output row; node 0 adds into `out`, other nodes into partial rows
//   E  (several nodes) the partial rows added into `out`
// Each expert uses the GEMV kernels when few tokens chose it and the GEMM (AMX) kernels from the
// measured threshold on (ExpertKernels::gemmMinRows).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cpu/kernels/expert_kernels.h"
#include "cpu/moe/packed_layer.h"
#include "cpu/pool/worker_pool.h"

namespace tandem::cpu {

// An expert id that is no row here: the slot's expert is computed elsewhere (the GPU's share of a layer
// split between the GPU and the CPU, runtime/placement.h), so the slot adds nothing to `out`.
inline constexpr int kComputedElsewhere = -1;

struct MoeInput {
    const float* x = nullptr;        // [tokens, hidden], row stride xStride floats
    std::size_t xStride = 0;
    int tokens = 0;
    const int* expertIds = nullptr;  // [tokens, topK]; kComputedElsewhere: a slot another device computes
    const float* weights = nullptr;  // [tokens, topK]
    int topK = 0;
    float* out = nullptr;            // [tokens, hidden], row stride outStride floats; added into
    std::size_t outStride = 0;
    // out is set, not added into: the pool zeroes its rows first (in phase A, beside the conversions),
    // rather than the caller before the job starts.
    bool zeroOut = false;
};

enum class KernelChoice { Auto, Gemv, Gemm };

struct MoeOptions {
    std::optional<Isa> isa;              // default: selectedIsa() (TANDEM_CPU_ISA or the best)
    KernelChoice kernels = KernelChoice::Auto;
    int gemmMinRows = 0;                 // > 0: overrides the ISA's measured GEMV/GEMM threshold
    bool profilePhases = false;          // time every phase and barrier on every thread (phaseSeconds)
};

// Thread-seconds spent in each phase, summed over the participants and over the runs since the last
// reset (MoeOptions::profilePhases). A layer's wall time times its participants, minus these, is the
// time outside the phases: threads idle after finishing early, the caller's prepare() and the wake-up.
struct MoePhaseSeconds {
    double convertX = 0, gateUp = 0, convertAct = 0, down = 0, reduce = 0, barriers = 0;
};

struct MoeStats {
    int activeExperts = 0;
    int gemmExperts = 0;
    int rows = 0;  // tokens x topK
};

class MoeRunner {
public:
    // Throws tandem::Error if options.isa cannot run here.
    explicit MoeRunner(ExpertPool& pool, const MoeOptions& options = {});
    ~MoeRunner();  // waits for a submission still running
    MoeRunner(const MoeRunner&) = delete;
    MoeRunner& operator=(const MoeRunner&) = delete;

    // Checks the input (throws tandem::Error for an expert id out of range, a layer laid out for another
    // pool, or a submission still in flight), then evaluates the layer.
    void run(const PackedMoeLayer& layer, const MoeInput& input);
    // The same, returning at once; x, ids, weights, out and the layer must stay valid until wait()
    // returns or done() says true. One submission at a time per runner: use two runners to overlap two
    // layers (Expert Deferral).
    void submit(const PackedMoeLayer& layer, const MoeInput& input);
    // The same with the calling thread taking part: its share runs when it calls the pool's
    // joinQueued() (ExpertPool::enqueueJoined). onFinished runs, on whichever thread finishes last, as
    // soon as the layer is done (also after a failure, which wait() then rethrows); it must not throw.
    void enqueueJoined(const PackedMoeLayer& layer, const MoeInput& input, std::function<void()> onFinished);
    bool done() const;
    void wait();

    Isa isa() const { return kernels_->isa; }
    const MoeStats& lastStats() const { return stats_; }
    MoePhaseSeconds phaseSeconds() const;
    void resetPhaseSeconds();

private:
    class Job;
    void prepare(const PackedMoeLayer& layer, const MoeInput& input, bool callerJoins);
    // A prepared job with no rows is not run: a zeroOut input's rows are zeroed here instead.
    void zeroIfIdle(const MoeInput& input) const;

    ExpertPool& pool_;
    MoeOptions options_;
    const ExpertKernels* kernels_;
    std::unique_ptr<Job> job_;
    std::optional<ExpertPool::Ticket> ticket_;
    MoeStats stats_;
};

}  // namespace tandem::cpu
