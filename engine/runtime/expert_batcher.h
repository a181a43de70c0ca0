#pragma once
// Several sequences' decode steps reading each routed expert once (issue 27's batched decode on the GPU
// path). Each GPU runner drives its routed experts through its own QueuedRoutedExperts (its expert
// bridge's lanes); the batcher gives every runner a view instead. Outside a batch a view passes its
// submissions to the runner's own experts. While a batch of B members is open, a view's one-token
// submission for a layer is held until all B members have submitted that layer (and part: immediate or
// deferred), and then the B tokens run as ONE computation of B tokens on the shared experts, so an expert
// that several sequences chose is read once; each member's row is copied back to its `out` and its hook
// is called. The members' GPUs wait for their own rows, as they do alone.
//
// Threads: submissions come from one thread (GpuRunner::decodeBatch pumps every member's bridge in
// turn); the combined computation's hook runs on whichever pool thread finishes it.
#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "model/routed_experts.h"

namespace tandem::runtime {

class ExpertBatcher {
public:
    // `combined` computes the batches (its own lanes, the shared pool).
    ExpertBatcher(std::unique_ptr<model::QueuedRoutedExperts> combined, int hidden);
    ~ExpertBatcher();

    // The view a runner drives instead of `own` (which serves it outside batches).
    std::unique_ptr<model::QueuedRoutedExperts> view(std::unique_ptr<model::QueuedRoutedExperts> own);

    // From now on one-token submissions gather in groups of `members` (>= 2), until close().
    void open(int members);
    void close();
    // Computations of several tokens run so far (a counter for tests and the benchmark).
    long batchesRun() const { return batches_.load(); }

private:
    class View;
    struct Pending {
        View* view;
        int lane;
        const float* x;
        std::vector<int> ids;  // the part's slots
        std::vector<float> weights;
        float* out;
        std::function<void()> onFinished;
    };
    struct Group {
        std::vector<Pending> members;
        // The combined computation's rows (its input and output must stay valid until it finishes).
        std::vector<float> x, out;
        std::vector<int> ids;
        std::vector<float> weights;
        std::vector<Pending> running;  // the members whose rows the computation in flight fills
    };

    // Called by a view inside a batch; runs the group once it is complete.
    void gather(Pending p, int layer, int part);
    // Runs group gi's members as one computation of their tokens.
    void run(std::size_t gi, int layer);

    std::unique_ptr<model::QueuedRoutedExperts> combined_;
    int hidden_;
    std::atomic<int> members_{0};  // read by the views, which a prefill's helper thread may drive
    // Two groups per part (immediate, deferred), alternating by layer: layer l + 1's group fills while
    // layer l's computation may still be finishing.
    std::array<Group, 4> groups_;
    std::array<int, 4> groupLayer_{};
    std::atomic<long> batches_{0};
};

}  // namespace tandem::runtime
