#pragma once
// The routed experts of every MoE layer, as the forward pass (CPU path) calls them, and in the queued
// form the GPU path's expert bridge drives. Two implementations: the packed CPU expert engine
// (runtime/packed_experts.h, the fast one, both forms) and the float32 reference over the checkpoint's
// own matrices (exact, for validation; queued through computeOnSubmit).
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

#include "cpu/pool/thread_pool.h"
#include "model/weights.h"

namespace tandem::model {

class RoutedExperts {
public:
    virtual ~RoutedExperts() = default;
    // out[t] = Σ weight · expert(x[t]) over the routing slots [firstSlot, lastSlot) of every token
    // (ids and weights are [tokens, topK], heaviest first): all slots for exact inference, the heaviest
    // for Expert Deferral's immediate part, the rest for its deferred part. An id of
    // cpu::kComputedElsewhere (-1) is a slot another device computes (the GPU's experts of a layer split
    // between the GPU and the CPU): it adds nothing here. Not for concurrent calls.
    virtual void run(int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK,
                     int firstSlot, int lastSlot, float* out) = 0;
};

// The form the GPU path's expert bridge drives (runtime/gpu/expert_bridge.h): the same computation
// queued on `lane` (lanes are independent; one computation in flight per lane), so the CPU's threads go
// from one part of a decode step to the next without waiting for each other in between.
class QueuedRoutedExperts : public RoutedExperts {
public:
    // The calling thread's share runs when it calls joinQueued(), which must follow every submit or
    // two. onFinished runs, on whichever thread finishes last, the moment the computation is done (also
    // after a failure, which wait(lane) then rethrows); it must not throw. x and out must stay valid
    // until then; ids and weights are read before submit returns.
    virtual void submit(int lane, int layer, const float* x, std::size_t tokens, const int* ids, const float* weights,
                        int topK, int firstSlot, int lastSlot, float* out, std::function<void()> onFinished) = 0;
    virtual void joinQueued() = 0;
    virtual bool done(int lane) const = 0;
    // Returns when the lane's computation has finished; rethrows its failure.
    virtual void wait(int lane) = 0;
    // The computing threads spin between calls for `d` from now instead of going to sleep
    // (cpu::ExpertPool::keepAwakeFor).
    virtual void keepAwakeFor(std::chrono::microseconds d) = 0;
};

// Experts that compute synchronously behind the queued interface: each submission runs at once on the
// submitting thread (the reference experts on the GPU path).
std::unique_ptr<QueuedRoutedExperts> computeOnSubmit(std::unique_ptr<RoutedExperts> experts);

// The reference: model::routedExperts over the checkpoint's matrices.
std::unique_ptr<RoutedExperts> makeReferenceExperts(const ModelWeights& weights, cpu::ThreadPool& pool);

}  // namespace tandem::model
