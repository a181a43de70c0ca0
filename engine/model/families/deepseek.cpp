// DeepSeek-V2 (deepseek_v2) and DeepSeek-V3 / R1 and Kimi-K2 (deepseek_v3, kimi_k2): multi-head latent
// attention, shared experts beside the routed ones, the first first_k_dense_replace layers dense. V2
// routes by softmax (greedy or group-limited by each group's best expert); V3 by sigmoid scores with a
// correction bias, groups ranked by their two best (noaux_tc), then normalized and scaled.
#include "model/config_fields.h"
#include "model/family.h"

namespace tandem::model {

void readDeepseekMoe(const ConfigFields& f, ModelConfig& c, bool v3) {
    c.intermediateSize = f.get<int>("intermediate_size");
    c.numExperts = f.get<int>("n_routed_experts", 0);
    c.moeIntermediateSize = f.get<int>("moe_intermediate_size", 0);
    c.numSharedExperts = f.get<int>("n_shared_experts", 0);
    c.firstKDenseReplace = f.get<int>("first_k_dense_replace", 0);
    c.moeLayerFreq = f.get<int>("moe_layer_freq", 1);
    requirePositive(f, "moe_layer_freq", c.moeLayerFreq);
    c.numNextnPredictLayers = f.get<int>("num_nextn_predict_layers", 0);

    RouterSpec& r = c.router;
    r.topK = f.get<int>("num_experts_per_tok", 1);
    r.numGroups = f.get<int>("n_group", 1);
    r.topKGroups = f.get<int>("topk_group", 1);
    const bool norm = f.get<bool>("norm_topk_prob", false);
    const float scale = f.get<float>("routed_scaling_factor", 1.0f);
    const std::string scoring = f.get<std::string>("scoring_func", v3 ? "sigmoid" : "softmax");
    if (scoring == "softmax") r.scoring = ExpertScoring::Softmax;
    else if (scoring == "sigmoid") r.scoring = ExpertScoring::Sigmoid;
    else throw Error(f.where() + ": scoring_func '" + scoring + "' is not supported (softmax, sigmoid)");

    if (v3) {
        // noaux_tc: group-limited top-k on bias-corrected scores; normalize, then scale.
        r.selection = ExpertSelection::GroupLimitedByTop2;
        r.hasCorrectionBias = true;
        r.normalize = norm;
        r.scale = scale;
    } else {
        const std::string method = f.get<std::string>("topk_method", "greedy");
        if (method == "greedy") r.selection = ExpertSelection::TopK;
        else if (method == "group_limited_greedy") r.selection = ExpertSelection::GroupLimitedByMax;
        else throw Error(f.where() + ": topk_method '" + method + "' is not supported for deepseek_v2");
        // DeepSeek-V2 either normalizes or scales, never both.
        r.normalize = norm && r.topK > 1;
        r.scale = r.normalize ? 1.0f : scale;
    }
}

bool deepseekMoeLayer(const ModelConfig& c, int layer) {
    return layer >= c.firstKDenseReplace && layer % c.moeLayerFreq == 0;
}

namespace {

void readDeepseekV2(const ConfigFields& f, ModelConfig& c) {
    readMlaAttention(f, c);
    readDeepseekMoe(f, c, false);
}

void readDeepseekV3(const ConfigFields& f, ModelConfig& c) {
    readMlaAttention(f, c);
    readDeepseekMoe(f, c, true);
}

constexpr ExpertTensorNames kDeepseekExperts{"mlp", "gate_proj", "up_proj", "down_proj"};

}  // namespace

extern const Family kDeepseekV2Family{"deepseek_v2", {"deepseek_v2"}, readDeepseekV2, deepseekMoeLayer, kDeepseekExperts};
extern const Family kDeepseekV3Family{"deepseek_v3", {"deepseek_v3", "kimi_k2"}, readDeepseekV3, deepseekMoeLayer,
                                      kDeepseekExperts};

}  // namespace tandem::model
