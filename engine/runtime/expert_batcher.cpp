#include "runtime/expert_batcher.h"

#include <algorithm>
#include <immintrin.h>
#include <string>
#include <thread>

#include "tandem/error.h"

namespace tandem::runtime {

namespace {
enum LaneState : int { kOwn = 0, kGathered = 1, kFinished = 2 };
constexpr int kLanes = 16;  // the bridge uses two a slot, two slots
}  // namespace

class ExpertBatcher::View : public model::QueuedRoutedExperts {
public:
    View(ExpertBatcher& batcher, std::unique_ptr<model::QueuedRoutedExperts> own) : batcher_(batcher), own_(std::move(own)) {
        for (auto& s : state_) s.store(kOwn);
    }

    void run(int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK, int firstSlot,
             int lastSlot, float* out) override {
        own_->run(layer, x, tokens, ids, weights, topK, firstSlot, lastSlot, out);
    }

    void submit(int lane, int layer, const float* x, std::size_t tokens, const int* ids, const float* weights, int topK,
                int firstSlot, int lastSlot, float* out, std::function<void()> onFinished) override {
        if (lane < 0 || lane >= kLanes) throw Error("expert batcher: lane " + std::to_string(lane) + " out of range");
        if (batcher_.members_ < 2 || tokens != 1 || lastSlot <= firstSlot) {
            state_[static_cast<std::size_t>(lane)].store(kOwn);
            own_->submit(lane, layer, x, tokens, ids, weights, topK, firstSlot, lastSlot, out, std::move(onFinished));
            return;
        }
        state_[static_cast<std::size_t>(lane)].store(kGathered);
        Pending p{this, lane, x, std::vector<int>(ids + firstSlot, ids + lastSlot),
                  std::vector<float>(weights + firstSlot, weights + lastSlot), out, std::move(onFinished)};
        batcher_.gather(std::move(p), layer, firstSlot > 0 ? 1 : 0);
    }

    void joinQueued() override {
        own_->joinQueued();
        batcher_.combined_->joinQueued();
    }

    bool done(int lane) const override {
        const int s = state_[static_cast<std::size_t>(lane)].load(std::memory_order_acquire);
        return s == kOwn ? own_->done(lane) : s == kFinished;
    }

    void wait(int lane) override {
        if (state_[static_cast<std::size_t>(lane)].load() == kOwn) return own_->wait(lane);
        // The group this lane waits in is complete by the time its lane is used again (each member's GPU
        // waits for its rows before it submits the next layer); help the pool until its rows are in.
        while (state_[static_cast<std::size_t>(lane)].load(std::memory_order_acquire) != kFinished) {
            batcher_.combined_->joinQueued();
            _mm_pause();
        }
    }

    void keepAwakeFor(std::chrono::microseconds d) override { own_->keepAwakeFor(d); }

    void finish(int lane) { state_[static_cast<std::size_t>(lane)].store(kFinished, std::memory_order_release); }

private:
    ExpertBatcher& batcher_;
    std::unique_ptr<model::QueuedRoutedExperts> own_;
    std::array<std::atomic<int>, kLanes> state_;
};

ExpertBatcher::ExpertBatcher(std::unique_ptr<model::QueuedRoutedExperts> combined, int hidden)
    : combined_(std::move(combined)), hidden_(hidden) {}

ExpertBatcher::~ExpertBatcher() {
    for (std::size_t g = 0; g < groups_.size(); ++g) {
        try {
            combined_->wait(static_cast<int>(g));
        } catch (...) {
        }
    }
}

std::unique_ptr<model::QueuedRoutedExperts> ExpertBatcher::view(std::unique_ptr<model::QueuedRoutedExperts> own) {
    return std::make_unique<View>(*this, std::move(own));
}

void ExpertBatcher::open(int members) { members_ = members; }

void ExpertBatcher::close() {
    // A group some member never completed (its step failed) runs with the members it has, so that none
    // of their GPUs waits for rows that never come.
    members_ = 0;
    for (std::size_t g = 0; g < groups_.size(); ++g)
        if (!groups_[g].members.empty()) run(g, groupLayer_[g]);
    combined_->joinQueued();
}

void ExpertBatcher::gather(Pending p, int layer, int part) {
    const std::size_t gi = static_cast<std::size_t>(part * 2 + (layer & 1));
    Group& g = groups_[gi];
    if (!g.members.empty() && groupLayer_[gi] != layer)
        throw Error("expert batcher: layer " + std::to_string(layer) + " arrived while layer " +
                    std::to_string(groupLayer_[gi]) + " still gathers");
    if (!g.members.empty() && g.members.front().ids.size() != p.ids.size())
        throw Error("expert batcher: the members of a batch route a different number of experts");
    groupLayer_[gi] = layer;
    g.members.push_back(std::move(p));
    if (static_cast<int>(g.members.size()) >= members_) run(gi, layer);
}

void ExpertBatcher::run(std::size_t gi, int layer) {
    Group& g = groups_[gi];
    // The group's buffers are the previous computation's until it has finished.
    combined_->wait(static_cast<int>(gi));
    const std::size_t B = g.members.size(), H = static_cast<std::size_t>(hidden_);
    const int slots = static_cast<int>(g.members.front().ids.size());
    g.x.resize(B * H);
    g.out.resize(B * H);
    g.ids.clear();
    g.weights.clear();
    for (std::size_t i = 0; i < B; ++i) {
        std::copy_n(g.members[i].x, H, g.x.data() + i * H);
        g.ids.insert(g.ids.end(), g.members[i].ids.begin(), g.members[i].ids.end());
        g.weights.insert(g.weights.end(), g.members[i].weights.begin(), g.members[i].weights.end());
    }
    g.running = std::move(g.members);
    g.members.clear();
    batches_.fetch_add(1);
    combined_->submit(static_cast<int>(gi), layer, g.x.data(), B, g.ids.data(), g.weights.data(), slots, 0, slots, g.out.data(),
                      [&g, H] {
                          for (std::size_t i = 0; i < g.running.size(); ++i) {
                              Pending& m = g.running[i];
                              std::copy_n(g.out.data() + i * H, H, m.out);
                              m.view->finish(m.lane);
                              if (m.onFinished) m.onFinished();
                          }
                      });
}

}  // namespace tandem::runtime
