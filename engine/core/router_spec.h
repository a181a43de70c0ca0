#pragma once
// How a mixture-of-experts router turns its logits into the chosen experts and their weights: the rule
// each family's config.json describes (model/families), which the CPU (model/router.cpp) and the GPU
// (cuda/router.cu) both follow. Plain data, below every folder that needs it.
namespace tandem {

enum class ExpertScoring { Softmax, Sigmoid };
enum class ExpertSelection {
    TopK,                 // plain top-k over all experts
    GroupLimitedByMax,    // DeepSeek-V2 group_limited_greedy: groups ranked by their best expert
    GroupLimitedByTop2,   // DeepSeek-V3 noaux_tc: groups ranked by the sum of their two best (biased) scores
};

struct RouterSpec {
    ExpertScoring scoring = ExpertScoring::Softmax;
    ExpertSelection selection = ExpertSelection::TopK;
    int topK = 1;
    int numGroups = 1;
    int topKGroups = 1;
    bool normalize = false;     // divide the chosen weights by their sum
    float scale = 1.0f;         // then multiply by this (routed_scaling_factor)
    bool hasCorrectionBias = false;  // DeepSeek-V3 e_score_correction_bias (affects choice only)
};

}  // namespace tandem
