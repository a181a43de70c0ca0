// gpt-oss (model_type gpt_oss; openai/gpt-oss-20b and -120b): grouped-query attention whose q, k, v and o
// projections carry biases, with a learned sink logit per head that joins every softmax (and takes its
// share of the probability, attached to no value); sliding-window (sliding_window) and full attention
// alternating as layer_types says; YaRN rotary embeddings on halves, without truncating the correction
// range (truncate: false). Every layer a mixture of experts: a router with a bias, its top-k logits
// softmaxed (the same as softmax over all, normalized over the chosen); each expert's gate, up and down
// with biases and the clamped SwiGLU (model/config.h). The release stores the experts fused per layer in
// MXFP4 (quantization_config mxfp4): mlp.experts.gate_up_proj_blocks / _scales, gate and up rows
// interleaved, and down_proj_blocks / _scales (model/weights.cpp reads them). llama.cpp's GGUF files
// (model/gguf_config.cpp, gguf_tensors.cpp) hold them per expert with gate and up apart, their biases too.
#include <string>

#include "model/config_fields.h"
#include "model/family.h"
#include "tandem/error.h"

namespace tandem::model {

namespace {

void readGptOss(const ConfigFields& f, ModelConfig& c) {
    readGqaAttention(f, c);
    c.attentionBias = f.get<bool>("attention_bias", true);
    c.attentionOutputBias = c.attentionBias;
    c.attentionSinks = true;
    if (f.has("sliding_window") && !f.raw("sliding_window").is_null()) c.slidingWindow = f.get<int>("sliding_window");
    if (f.has("layer_types")) {
        const auto& types = f.raw("layer_types");
        if (!types.is_array() || static_cast<int>(types.size()) < c.numLayers)
            throw Error(f.where() + ": 'layer_types' must list every one of the " + std::to_string(c.numLayers) + " layers");
        for (int l = 0; l < c.numLayers; ++l) {
            const auto& t = types[static_cast<std::size_t>(l)];
            const std::string type = t.is_string() ? t.get<std::string>() : "";
            if (type != "sliding_attention" && type != "full_attention")
                throw Error(f.where() + ": layer_types[" + std::to_string(l) +
                            "] must be \"sliding_attention\" or \"full_attention\"");
            c.slidingLayers.push_back(type == "sliding_attention");
        }
    } else {
        // transformers' default: even layers slide, odd ones attend to everything.
        for (int l = 0; l < c.numLayers; ++l) c.slidingLayers.push_back(l % 2 == 0);
    }
    c.numExperts = f.get<int>("num_local_experts");
    c.moeIntermediateSize = f.get<int>("intermediate_size");
    c.intermediateSize = c.moeIntermediateSize;
    c.router.topK = f.has("num_experts_per_tok") ? f.get<int>("num_experts_per_tok") : f.get<int>("experts_per_token", 4);
    c.router.normalize = true;
    c.routerBias = true;
    c.expertBiases = true;
    c.expertActivation = ExpertActivation::ClampedSwiglu;
    c.swigluAlpha = f.get<float>("swiglu_alpha", 1.702f);
    c.swigluLimit = f.get<float>("swiglu_limit", 7.0f);
    if (!(c.swigluLimit > 0.0f)) throw Error(f.where() + ": 'swiglu_limit' must be positive");
}

bool everyLayer(const ModelConfig&, int) { return true; }

}  // namespace

extern const Family kGptOssFamily{"gpt_oss", {"gpt_oss"}, readGptOss, everyLayer,
                                  {"mlp", "gate_proj", "up_proj", "down_proj", "router"}};

}  // namespace tandem::model
