#pragma once
// The routed experts of every MoE layer, as the forward pass (CPU path) and the GPU path's expert
// bridge call them. Two implementations: the packed CPU expert engine (runtime/packed_experts.h, the
// fast one) and the float32 reference over the checkpoint's own matrices (exact; for validation).
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
    // for Expert Deferral's immediate part, the rest for its deferred part. Not for concurrent calls.
    virtual void run(int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK,
                     int firstSlot, int lastSlot, float* out) = 0;

    // The GPU bridge's form of run(): the same computation queued on `lane` (lanes are independent; one
    // computation in flight per lane), so the CPU's threads go from one part of a decode step to the
    // next without waiting for each other in between. The calling thread's share runs when it calls
    // joinQueued(), which must follow every submit or two. onFinished runs, on whichever thread
    // finishes last, the moment the computation is done (also after a failure, which wait(lane) then
    // rethrows); it must not throw. x and out must stay valid until then; ids and weights are read
    // before submit returns. The default computes it here and now.
    virtual void submit(int lane, int layer, const float* x, std::size_t tokens, const int* ids, const float* weights,
                        int topK, int firstSlot, int lastSlot, float* out, std::function<void()> onFinished) {
        (void)lane;
        run(layer, x, tokens, ids, weights, topK, firstSlot, lastSlot, out);
        if (onFinished) onFinished();
    }
    virtual void joinQueued() {}
    virtual bool done(int lane) const {
        (void)lane;
        return true;
    }
    // Returns when the lane's computation has finished; rethrows its failure.
    virtual void wait(int lane) { (void)lane; }

    // The computing threads spin between calls for `d` from now instead of going to sleep
    // (cpu::ExpertPool::keepAwakeFor).
    virtual void keepAwakeFor(std::chrono::microseconds d) { (void)d; }
};

// The reference: model::routedExperts over the checkpoint's matrices.
std::unique_ptr<RoutedExperts> makeReferenceExperts(const ModelWeights& weights, cpu::ThreadPool& pool);

}  // namespace tandem::model
