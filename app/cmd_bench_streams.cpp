#include "bench_streams.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <set>

namespace {

int greedy(std::span<const float> logits) {
    return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The routed experts a decode step's sequences chose, per MoE layer: each session's router choice scores
// (Session::setRoutingObserver, the CPU path only) ranked, the top k taken. That is the choice itself
// unless the router limits it to groups of experts (DeepSeek-V3's n_group), where it is the ungrouped top k.
class StepRouting {
public:
    StepRouting(std::size_t sessions, int layers, int topK)
        : chosen_(sessions, std::vector<std::vector<int>>(static_cast<std::size_t>(layers))), topK_(topK) {}

    void observe(tandem::Session& session, std::size_t index) {
        session.setRoutingObserver([this, index](int layer, std::size_t tokens, int experts, const float* scores) {
            if (!recording_ || tokens != 1) return;
            std::vector<int> order(static_cast<std::size_t>(experts));
            std::iota(order.begin(), order.end(), 0);
            const auto k = static_cast<std::ptrdiff_t>(std::min(topK_, experts));
            std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
            order.resize(static_cast<std::size_t>(k));
            chosen_[index][static_cast<std::size_t>(layer)] = std::move(order);
        });
    }
    void record(bool on) { recording_ = on; }

    // After a step: adds each MoE layer's distinct experts over the sessions, and forgets the step.
    void countStep() {
        for (std::size_t layer = 0; layer < chosen_.front().size(); ++layer) {
            std::set<int> distinct;
            for (auto& session : chosen_) {
                distinct.insert(session[layer].begin(), session[layer].end());
                session[layer].clear();
            }
            if (distinct.empty()) continue;
            distinctSum_ += static_cast<double>(distinct.size());
            ++layerSteps_;
        }
    }
    bool seen() const { return layerSteps_ > 0; }
    // Mean distinct experts per MoE layer and step.
    double meanDistinct() const { return layerSteps_ ? distinctSum_ / static_cast<double>(layerSteps_) : 0.0; }

private:
    std::vector<std::vector<std::vector<int>>> chosen_;  // [session][layer]: this step's experts
    int topK_;
    bool recording_ = false;
    double distinctSum_ = 0;
    long layerSteps_ = 0;
};

}  // namespace

void runStreamsBench(tandem::Engine& engine, const StreamsBench& bench) {
    using Clock = std::chrono::steady_clock;
    const tandem::ModelInfo& info = engine.info();
    const int k = info.expertsPerToken, E = info.numExperts;
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> token(0, info.vocabSize - 1);
    std::printf("%s, %s experts (%s kernels), %d threads, on %s, deferral %d: %d-token prompts, %d decode steps\n",
                bench.shape.c_str(), info.experts.c_str(), info.cpuKernels.c_str(), engine.threads(), info.device.c_str(),
                bench.deferral, bench.promptTokens, bench.genSteps);
    for (const int S : bench.streams) {
        const auto n = static_cast<std::size_t>(S);
        std::vector<std::unique_ptr<tandem::Session>> owned;
        std::vector<tandem::Session*> sessions;
        std::vector<int> next;
        StepRouting routing(n, info.numLayers, k);
        std::fprintf(stderr, "%d stream%s: prefill %d tokens each ...\n", S, S == 1 ? "" : "s", bench.promptTokens);
        for (std::size_t i = 0; i < n; ++i) {
            owned.push_back(engine.newSession());
            sessions.push_back(owned.back().get());
            sessions.back()->setDeferral(bench.deferral);
            routing.observe(*sessions.back(), i);
            std::vector<int> prompt(static_cast<std::size_t>(bench.promptTokens));
            for (int& t : prompt) t = token(rng);
            next.push_back(greedy(sessions.back()->append(prompt)));
        }
        const auto step = [&] {
            const auto logits = tandem::Session::decodeTogether(sessions, next);
            for (std::size_t i = 0; i < n; ++i) next[i] = greedy(logits[i]);
        };
        if (bench.warmup) step();
        std::fprintf(stderr, "measuring memory bandwidth ...\n");
        const double before = engine.measureMemoryBandwidth();
        std::fprintf(stderr, "%d stream%s: %d decode steps ...\n", S, S == 1 ? "" : "s", bench.genSteps);
        routing.record(true);
        sessions.front()->takeDecodeProfile();  // the timed steps' only
        const auto t0 = Clock::now();
        for (int s = 0; s < bench.genSteps; ++s) {
            step();
            routing.countStep();
        }
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        routing.record(false);
        // Every session of a batch counts the whole step; the CPU path times its routed experts per layer.
        double expertsMs = 0;
        const tandem::DecodeProfile profile = sessions.front()->takeDecodeProfile();
        for (const auto& layer : profile.layers) expertsMs += layer.cpuExpertsMs;
        std::fprintf(stderr, "measuring memory bandwidth again ...\n");
        const double after = engine.measureMemoryBandwidth();
        const double bandwidth = std::max(before, after);

        const double tokensPerSecond = static_cast<double>(S) * bench.genSteps / seconds;
        // Uniform random routing: each expert is missed by all S sequences with probability (1 - k/E)^S.
        const double uniform = E > 0 ? E * (1.0 - std::pow(1.0 - static_cast<double>(k) / E, S)) : 0.0;
        const bool counted = routing.seen();
        const double distinct = counted ? routing.meanDistinct() : uniform;
        // routedBytesPerToken is k experts of every MoE layer whose experts the CPU reads; a step reads
        // `distinct` of them instead of k.
        const double stepBytes = k > 0 ? static_cast<double>(info.routedBytesPerToken) * distinct / k : 0.0;
        const double roofline = stepBytes > 0 ? static_cast<double>(S) * bandwidth * 1e9 / stepBytes : 0.0;
        const double fraction = roofline > 0 ? tokensPerSecond / roofline : 0.0;
        // On the CPU path a step also reads the dense weights, once for all S rows.
        const double denseBytes = info.cpuBytesPerToken > info.routedBytesPerToken
                                      ? static_cast<double>(info.cpuBytesPerToken - info.routedBytesPerToken) : 0.0;
        const double withDense = denseBytes > 0 ? static_cast<double>(S) * bandwidth * 1e9 / (stepBytes + denseBytes) : 0.0;
        std::printf("  %d stream%s  %8.2f tok/s aggregate (%.2f per stream, step %.2f ms, routed experts %.2f ms of it)\n", S,
                    S == 1 ? " " : "s", tokensPerSecond, tokensPerSecond / S, 1000.0 * seconds / bench.genSteps, expertsMs);
        std::printf("             roofline %8.2f tok/s: %.1f of %d experts per MoE layer a step (%s; uniform routing "
                    "%.1f), %.0f MB of routed experts a step / %.1f GB/s measured (%.1f before, %.1f after) -> %.0f%%\n",
                    roofline, distinct, E, counted ? "counted from the routing" : "estimated: the routing is not observed here",
                    uniform, stepBytes / 1e6, bandwidth, before, after, 100.0 * fraction);
        if (withDense > 0)
            std::printf("             with the dense weights %8.2f tok/s: %.0f MB more a step, read once for the %d -> %.0f%%\n",
                        withDense, denseBytes / 1e6, S, 100.0 * tokensPerSecond / withDense);
        if (profile.batchedSteps > 0)
            std::printf("             a batched step on the GPU's clocks: members handing a layer over %.2f ms apart, "
                        "the CPU's turn %.2f ms (last hand-over to the first rows back), a member's GPU work %.2f ms "
                        "(summed over the layers, mean of %ld steps)\n",
                        profile.batchSpreadMs, profile.batchRoundMs, profile.batchGpuMs, profile.batchedSteps);
        if (!bench.json) continue;
        std::printf("{\"shape\": \"%s\", \"experts\": \"%s\", \"isa\": \"%s\", \"device\": \"%s\", \"threads\": %d, "
                    "\"deferral\": %d, \"streams\": %d, \"prompt_tokens\": %d, \"steps\": %d, "
                    "\"decode_tokens_per_second\": %.3f, \"per_stream_tokens_per_second\": %.3f, \"step_ms\": %.4f, "
                    "\"distinct_experts_per_layer\": %.3f, \"distinct_source\": \"%s\", \"uniform_distinct_experts\": %.3f, "
                    "\"experts_per_layer\": %d, \"experts_per_token\": %d, \"routed_bytes_per_token\": %llu, "
                    "\"routed_bytes_per_step\": %.0f, \"bandwidth_gbps\": %.3f, \"bandwidth_before_gbps\": %.3f, "
                    "\"bandwidth_after_gbps\": %.3f, \"roofline_tokens_per_second\": %.3f, \"roofline_fraction\": %.4f, "
                    "\"dense_bytes_per_step\": %.0f, \"roofline_with_dense_tokens_per_second\": %.3f, \"cpu_experts_ms\": %.4f}\n",
                    bench.shape.c_str(), info.experts.c_str(), info.cpuKernels.c_str(), info.device.c_str(), engine.threads(),
                    bench.deferral, S, bench.promptTokens, bench.genSteps, tokensPerSecond, tokensPerSecond / S,
                    1000.0 * seconds / bench.genSteps, distinct, counted ? "counted" : "uniform", uniform, E, k,
                    static_cast<unsigned long long>(info.routedBytesPerToken), stepBytes, bandwidth, before, after, roofline,
                    fraction, denseBytes, withDense, expertsMs);
    }
}
