// GLM-4.5 / 4.6 / 4.5-Air (model_type glm4_moe): grouped-query attention whose q, k and v projections
// carry biases, optional per-head q/k RMSNorm (use_qk_norm), rotary embeddings on the leading
// partial_rotary_factor of each head (halves layout within them); DeepSeek-V3's mixture of experts
// (sigmoid router with e_score_correction_bias, group-limited top-k, a shared expert, the first
// first_k_dense_replace layers dense). The multi-token-prediction layer stored after the last layer
// (num_nextn_predict_layers) is not run, as DeepSeek-V3's.
#include <cmath>

#include "model/config_fields.h"
#include "model/family.h"

namespace tandem::model {

namespace {

void readGlm4Moe(const ConfigFields& f, ModelConfig& c) {
    readGqaAttention(f, c);
    c.attentionBias = f.get<bool>("attention_bias", false);
    c.qkNorm = f.get<bool>("use_qk_norm", false);
    // transformers: the rotary width is int(head_dim * factor), rotated as halves of that width.
    const double factor = f.get<double>("partial_rotary_factor", 1.0);
    if (!(factor > 0.0 && factor <= 1.0)) throw Error(f.where() + ": partial_rotary_factor must lie in (0, 1]");
    const int rotary = static_cast<int>(c.headDim * factor);
    if (rotary < 2 || rotary % 2) throw Error(f.where() + ": partial_rotary_factor gives an odd or empty rotary width");
    c.rotaryDim = rotary == c.headDim ? 0 : rotary;
    readDeepseekMoe(f, c, true);
}

}  // namespace

extern const Family kGlm4MoeFamily{"glm4_moe", {"glm4_moe"}, readGlm4Moe, deepseekMoeLayer,
                                   {"mlp", "gate_proj", "up_proj", "down_proj"}};

}  // namespace tandem::model
