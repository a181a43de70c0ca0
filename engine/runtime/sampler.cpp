#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <iterator>
#include <limits>
#include <string>
#include <unordered_map>

#include "tandem/error.h"

namespace tandem::runtime {

namespace {

// The scans over the vocabulary are built for AVX-512 and AVX2 as well as the baseline and picked at run
// time (GCC's target_clones), so they run 16 or 8 tokens at a time where the CPU can.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TANDEM_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TANDEM_VECTOR_CLONES
#endif

// Scans run over independent lanes so the compiler vectorizes them without reassociating floats:
// std::max_element is one chain of dependent compares, 0.1-0.5 ms over a 150k vocabulary, which is
// several percent of a decode step.
constexpr std::size_t kLanes = 16;

// exp(x) for x <= 0 in plain arithmetic the compiler vectorizes (std::exp is a call per token, which
// over a 150k vocabulary costs more than the rest of the sampler): 2^n by the exponent bits and 2^f,
// |f| <= 1/2, by its Taylor series to degree 7, relative error under 1e-7. Below e^-87 it gives 0.
inline float expNonPositive(float x) {
    constexpr float kLog2e = 1.44269504f;
    constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float t = (x < -87.0f ? -87.0f : x) * kLog2e;
    const float rounded = t + kRound;
    const float n = rounded - kRound;
    const float f = (t - n) * 0.693147181f;
    float p = 1.0f / 5040;
    p = p * f + 1.0f / 720;
    p = p * f + 1.0f / 120;
    p = p * f + 1.0f / 24;
    p = p * f + 1.0f / 6;
    p = p * f + 0.5f;
    p = p * f + 1.0f;
    p = p * f + 1.0f;
    const std::int32_t exponent = (std::bit_cast<std::int32_t>(rounded) - std::bit_cast<std::int32_t>(kRound)) << 23;
    const float scaled = std::bit_cast<float>(std::bit_cast<std::int32_t>(p) + exponent);
    return x < -87.0f ? 0.0f : scaled;
}

TANDEM_VECTOR_CLONES
float largest(std::span<const float> v) {
    float lane[kLanes];
    std::fill(std::begin(lane), std::end(lane), -std::numeric_limits<float>::infinity());
    std::size_t i = 0;
    for (; i + kLanes <= v.size(); i += kLanes)
        for (std::size_t j = 0; j < kLanes; ++j) lane[j] = v[i + j] > lane[j] ? v[i + j] : lane[j];
    for (; i < v.size(); ++i) lane[0] = v[i] > lane[0] ? v[i] : lane[0];
    return *std::max_element(std::begin(lane), std::end(lane));
}

// The sum of w[0, n) in kLanes independent lanes, so it vectorizes.
inline float laneSum(const float* w, std::size_t n) {
    float lane[kLanes] = {};
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (std::size_t j = 0; j < kLanes; ++j) lane[j] += w[i + j];
    for (; i < n; ++i) lane[0] += w[i];
    float total = 0.0f;
    for (const float v : lane) total += v;
    return total;
}

// w[i] = exp((l[i] - maxLogit) * invTemperature) for every token, and their sum: most of a temperature
// sample's time.
TANDEM_VECTOR_CLONES
float weighAll(const float* l, float* w, std::size_t n, float maxLogit, float invTemperature) {
    for (std::size_t i = 0; i < n; ++i) w[i] = expNonPositive((l[i] - maxLogit) * invTemperature);
    return laneSum(w, n);
}

// Sets the weights below `floor` to 0 and returns the sum of what is left (min-p), as weighAll.
TANDEM_VECTOR_CLONES
float dropBelow(float* w, std::size_t n, float floor) {
    for (std::size_t i = 0; i < n; ++i) w[i] = w[i] < floor ? 0.0f : w[i];
    return laneSum(w, n);
}

// Which of the 16 floats at v are >= floor, as bits: SSE2's compares where there is SSE2 (x86-64
// always has it), so a block costs no branch per element.
inline unsigned atLeastMask(const float* v, float floor) {
#if defined(__SSE2__)
    const __m128 f = _mm_set1_ps(floor);
    unsigned mask = 0;
    for (int q = 0; q < 4; ++q) mask |= static_cast<unsigned>(_mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(v + 4 * q), f))) << (4 * q);
    return mask;
#else
    unsigned mask = 0;
    for (unsigned j = 0; j < kLanes; ++j) mask |= static_cast<unsigned>(v[j] >= floor) << j;
    return mask;
#endif
}

// Calls f(index) for each element >= floor, in index order; returns early when f returns false.
template <class F>
void forEachAtLeast(std::span<const float> v, float floor, F&& f) {
    std::size_t i = 0;
    for (; i + kLanes <= v.size(); i += kLanes)
        for (unsigned mask = atLeastMask(v.data() + i, floor); mask; mask &= mask - 1)
            if (!f(static_cast<int>(i) + std::countr_zero(mask))) return;
    for (; i < v.size(); ++i)
        if (v[i] >= floor && !f(static_cast<int>(i))) return;
}

}  // namespace

int argmax(std::span<const float> logits) {
    int first = 0;  // also the answer when every logit is NaN
    if (logits.empty()) return first;
    forEachAtLeast(logits, largest(logits), [&](int i) {
        first = i;
        return false;
    });
    return first;
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
    const auto check = [](bool ok, const char* what) {
        if (!ok) throw Error(std::string("invalid sampling setting: ") + what);
    };
    // Written so that NaN fails each check (every comparison with NaN is false).
    check(options.temperature >= 0.0f && std::isfinite(options.temperature), "temperature must be a number, 0 or more");
    check(options.topP > 0.0f && options.topP <= 1.0f, "top-p must be in (0, 1]");
    check(options.topK >= 0, "top-k must not be negative");
    check(options.minP >= 0.0f && options.minP <= 1.0f, "min-p must be in [0, 1]");
    check(options.repetitionPenalty > 0.0f && std::isfinite(options.repetitionPenalty),
          "the repetition penalty must be a positive number");
    check(std::isfinite(options.presencePenalty), "the presence penalty must be a number");
    check(std::isfinite(options.frequencyPenalty), "the frequency penalty must be a number");
    check(options.penaltyWindow >= 0, "the penalty window must not be negative");
}

bool Sampler::penalizes() const {
    return options_.repetitionPenalty != 1.0f || options_.presencePenalty != 0.0f || options_.frequencyPenalty != 0.0f;
}

std::span<const float> Sampler::penalized(std::span<const float> logits, std::span<const int> context) {
    if (!penalizes() || context.empty()) return logits;
    if (options_.penaltyWindow > 0 && context.size() > static_cast<std::size_t>(options_.penaltyWindow))
        context = context.last(static_cast<std::size_t>(options_.penaltyWindow));
    std::unordered_map<int, int> counts;
    for (const int t : context)
        if (t >= 0 && static_cast<std::size_t>(t) < logits.size()) ++counts[t];
    adjusted_.assign(logits.begin(), logits.end());
    for (const auto& [token, n] : counts) {
        float& l = adjusted_[static_cast<std::size_t>(token)];
        l = l > 0 ? l / options_.repetitionPenalty : l * options_.repetitionPenalty;
        l -= options_.presencePenalty + options_.frequencyPenalty * static_cast<float>(n);
    }
    return adjusted_;
}

float Sampler::weigh(std::span<const float> logits) {
    weights_.resize(logits.size());
    return weighAll(logits.data(), weights_.data(), logits.size(), largest(logits), 1.0f / options_.temperature);
}

bool Sampler::keepCandidates(float total) {
    const bool topK = options_.topK > 0 && static_cast<std::size_t>(options_.topK) < weights_.size();
    const bool topP = options_.topP < 1.0f;
    if (!topK && !topP) return false;
    const auto moreLikely = [](const Candidate& a, const Candidate& b) {
        return a.weight > b.weight || (a.weight == b.weight && a.token < b.token);
    };
    const auto k = static_cast<std::size_t>(options_.topK);
    // The nucleus of the sorted candidates: the fewest whose weights reach `share`; false if they don't.
    const auto nucleus = [&](std::size_t sorted, float share) {
        float cumulative = 0.0f;
        std::size_t n = 0;
        while (n < sorted && cumulative < share) cumulative += candidates_[n++].weight;
        if (cumulative < share) return false;
        candidates_.resize(std::max<std::size_t>(n, 1));
        return true;
    };
    // Both filters keep the most likely tokens, so look first at the few above a weight floor and lower
    // it only when they are not enough: a peaked distribution never touches the rest of the vocabulary.
    for (float floor = 1e-3f;; floor = floor > 1e-12f ? floor * 1e-3f : 0.0f) {
        candidates_.clear();
        forEachAtLeast(weights_, floor, [&](int t) {
            candidates_.push_back({weights_[static_cast<std::size_t>(t)], t});
            return true;
        });
        const bool complete = floor == 0.0f;
        if (topK) {
            if (candidates_.size() < k && !complete) continue;
            if (candidates_.size() > k) {
                std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(k), candidates_.end(),
                                 moreLikely);
                candidates_.resize(k);
            }
            std::sort(candidates_.begin(), candidates_.end(), moreLikely);
            if (!topP) return true;
            // The nucleus is a share of what top-k kept.
            float mass = 0.0f;
            for (const Candidate& c : candidates_) mass += c.weight;
            nucleus(candidates_.size(), options_.topP * mass);  // if rounding leaves it out of reach, all k stay
            return true;
        }
        // Top-p alone: a share of the whole vocabulary, which the candidates must hold before any sorting.
        const float share = options_.topP * total;
        float collected = 0.0f;
        for (const Candidate& c : candidates_) collected += c.weight;
        if (collected < share && !complete) continue;
        // A flat distribution keeps many candidates: drop those below the power of two where the share is
        // reached (one binade lower, against rounding), then sort only as far as the nucleus reaches.
        float binadeMass[256] = {};
        for (const Candidate& c : candidates_) binadeMass[std::bit_cast<std::uint32_t>(c.weight) >> 23] += c.weight;
        int binade = 255;  // ends one below the binade where the share is reached
        for (float above = 0.0f; binade > 0 && above < share; --binade) above += binadeMass[binade];
        const auto keepFrom = static_cast<std::uint32_t>(binade);
        std::erase_if(candidates_, [&](const Candidate& c) { return (std::bit_cast<std::uint32_t>(c.weight) >> 23) < keepFrom; });
        for (std::size_t sorted = std::min<std::size_t>(candidates_.size(), 256);; sorted = std::min(candidates_.size(), sorted * 4)) {
            std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(sorted), candidates_.end(),
                              moreLikely);
            if (nucleus(sorted, share)) return true;
            if (sorted == candidates_.size()) return true;  // rounding left the share just out of reach: keep all
        }
    }
}

int Sampler::pick(std::span<const float> logits, std::span<const int> context) {
    logits = penalized(logits, context);
    if (logits.empty()) throw Error("nothing to sample from: the model gave no logits");
    if (options_.temperature <= 0.0f) return argmax(logits);

    // Weights relative to the most likely token (whose weight is 1). Filters in transformers' order:
    // top-k, top-p, min-p; the most likely token always survives min-p (its weight is 1).
    const float total = weigh(logits);
    // Every logit -inf (or NaN) leaves nothing to weigh: the greedy choice is as good as any.
    if (!(total > 0.0f) || !std::isfinite(total)) return argmax(logits);
    if (keepCandidates(total)) {
        if (options_.minP > 0.0f) std::erase_if(candidates_, [&](const Candidate& c) { return c.weight < options_.minP; });
        float sum = 0.0f;
        for (const Candidate& c : candidates_) sum += c.weight;
        const float r = std::uniform_real_distribution<float>(0.0f, sum)(rng_);
        float cumulative = 0.0f;
        for (const Candidate& c : candidates_) {
            cumulative += c.weight;
            if (r < cumulative) return c.token;
        }
        return candidates_.back().token;
    }
    float sum = total;
    if (options_.minP > 0.0f) sum = dropBelow(weights_.data(), weights_.size(), options_.minP);
    // Walk the vocabulary a block at a time to the block where the cumulative weight passes r.
    const float r = std::uniform_real_distribution<float>(0.0f, sum)(rng_);
    float cumulative = 0.0f;
    std::size_t i = 0;
    for (; i + kLanes <= weights_.size(); i += kLanes) {
        float block = 0.0f;
        for (std::size_t j = 0; j < kLanes; ++j) block += weights_[i + j];
        if (r < cumulative + block) break;
        cumulative += block;
    }
    for (; i < weights_.size(); ++i) {
        cumulative += weights_[i];
        if (weights_[i] > 0.0f && r < cumulative) return static_cast<int>(i);
    }
    // r fell past the walk's sum, which rounds differently from `sum`: the last token that can be drawn.
    for (std::size_t j = weights_.size(); j-- > 0;)
        if (weights_[j] > 0.0f) return static_cast<int>(j);
    return 0;
}

}  // namespace tandem::runtime
