// Qwen3-MoE (model_type qwen3_moe): grouped-query attention with per-head q/k RMSNorm, softmax top-k
// routing, MoE in every layer but the ones mlp_only_layers and decoder_sparse_step leave dense.
#include <algorithm>

#include "model/config_fields.h"
#include "model/family.h"

namespace tandem::model {

namespace {

void readQwen3Moe(const ConfigFields& f, ModelConfig& c) {
    readGqaAttention(f, c);
    c.qkNorm = true;
    if (f.get<bool>("use_sliding_window", false) && f.has("sliding_window")) c.slidingWindow = f.get<int>("sliding_window");
    c.intermediateSize = f.get<int>("intermediate_size");
    c.numExperts = f.get<int>("num_experts", 0);
    c.moeIntermediateSize = f.get<int>("moe_intermediate_size", 0);
    c.decoderSparseStep = f.get<int>("decoder_sparse_step", 1);
    requirePositive(f, "decoder_sparse_step", c.decoderSparseStep);
    if (f.has("mlp_only_layers")) {
        const auto& layers = f.raw("mlp_only_layers");
        if (!layers.is_array()) throw Error(f.where() + ": 'mlp_only_layers' must be a list of layer numbers");
        for (const auto& l : layers) {
            if (!l.is_number_integer()) throw Error(f.where() + ": 'mlp_only_layers' must hold integers");
            c.mlpOnlyLayers.push_back(l.get<int>());
        }
    }
    c.router.topK = f.get<int>("num_experts_per_tok", 1);
    c.router.normalize = f.get<bool>("norm_topk_prob", false);
}

bool qwen3MoeLayer(const ModelConfig& c, int layer) {
    return std::find(c.mlpOnlyLayers.begin(), c.mlpOnlyLayers.end(), layer) == c.mlpOnlyLayers.end() &&
           (layer + 1) % c.decoderSparseStep == 0;
}

}  // namespace

extern const Family kQwen3MoeFamily{"qwen3_moe", {"qwen3_moe"}, readQwen3Moe, qwen3MoeLayer,
                                    {"mlp", "gate_proj", "up_proj", "down_proj"}};

}  // namespace tandem::model
