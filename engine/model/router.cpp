#include "model/router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "cpu/dense/ops.h"

namespace tandem::model {

namespace {

// Indices of the k largest values, largest first; ties go to the lower index.
std::vector<int> topIndices(const std::vector<float>& values, int k) {
    std::vector<int> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
        return values[a] > values[b] || (values[a] == values[b] && a < b);
    });
    order.resize(static_cast<std::size_t>(k));
    return order;
}

// Keeps the choice scores of the best spec.topKGroups groups and removes the rest from the choice.
void limitToBestGroups(const RouterSpec& spec, std::vector<float>& choice) {
    const int perGroup = static_cast<int>(choice.size()) / spec.numGroups;
    std::vector<float> groupScore(static_cast<std::size_t>(spec.numGroups));
    for (int g = 0; g < spec.numGroups; ++g) {
        const auto first = choice.begin() + g * perGroup;
        if (spec.selection == ExpertSelection::GroupLimitedByMax) {
            groupScore[g] = *std::max_element(first, first + perGroup);
        } else {  // sum of the two best
            std::vector<float> group(first, first + perGroup);
            std::partial_sort(group.begin(), group.begin() + 2, group.end(), std::greater<>());
            groupScore[g] = group[0] + group[1];
        }
    }
    const auto keep = topIndices(groupScore, spec.topKGroups);
    for (int g = 0; g < spec.numGroups; ++g)
        if (std::find(keep.begin(), keep.end(), g) == keep.end())
            std::fill(choice.begin() + g * perGroup, choice.begin() + (g + 1) * perGroup,
                      -std::numeric_limits<float>::infinity());
}

}  // namespace

void routeToken(const RouterSpec& spec, const float* logits, int numExperts, const float* bias, int* ids,
                float* weights, float* choiceOut) {
    std::vector<float> scores(logits, logits + numExperts);
    if (spec.scoring == ExpertScoring::Softmax)
        cpu::softmax(scores.data(), scores.size());
    else
        for (auto& s : scores) s = 1.0f / (1.0f + std::exp(-s));

    std::vector<float> choice = scores;
    if (bias)
        for (int e = 0; e < numExperts; ++e) choice[e] += bias[e];
    if (choiceOut) std::copy(choice.begin(), choice.end(), choiceOut);
    if (spec.selection != ExpertSelection::TopK && spec.numGroups > 1) limitToBestGroups(spec, choice);

    auto chosen = topIndices(choice, spec.topK);
    // The bias may order the choice differently from the weights; callers want the heaviest first.
    std::stable_sort(chosen.begin(), chosen.end(), [&](int a, int b) { return scores[a] > scores[b]; });
    float sum = 0.0f;
    for (int i = 0; i < spec.topK; ++i) {
        ids[i] = chosen[i];
        weights[i] = scores[chosen[i]];
        sum += weights[i];
    }
    const float factor = spec.normalize ? spec.scale / sum : spec.scale;
    for (int i = 0; i < spec.topK; ++i) weights[i] *= factor;
}

}  // namespace tandem::model
