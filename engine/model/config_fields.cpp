#include "model/config_fields.h"

namespace tandem::model {

void requirePositive(const ConfigFields& f, const char* key, int value) {
    if (value <= 0) throw Error(f.where() + ": '" + key + "' must be positive, not " + std::to_string(value));
}

void readGqaAttention(const ConfigFields& f, ModelConfig& c) {
    c.attention = AttentionKind::Gqa;
    c.numKvHeads = f.get<int>("num_key_value_heads", c.numHeads);
    requirePositive(f, "num_key_value_heads", c.numKvHeads);
    if (c.numHeads % c.numKvHeads != 0)
        throw Error(f.where() + ": num_attention_heads (" + std::to_string(c.numHeads) +
                    ") is not a multiple of num_key_value_heads (" + std::to_string(c.numKvHeads) + ")");
    c.headDim = f.get<int>("head_dim", c.hiddenSize / c.numHeads);
    requirePositive(f, "head_dim", c.headDim);
    if (c.headDim % 2) throw Error(f.where() + ": head_dim must be even for rotary embeddings");
}

void readMlaAttention(const ConfigFields& f, ModelConfig& c) {
    c.attention = AttentionKind::Mla;
    c.ropeInterleaved = true;
    c.numKvHeads = c.numHeads;
    c.qLoraRank = f.get<int>("q_lora_rank", 0);
    c.kvLoraRank = f.get<int>("kv_lora_rank");
    c.qkNopeHeadDim = f.get<int>("qk_nope_head_dim");
    c.qkRopeHeadDim = f.get<int>("qk_rope_head_dim");
    c.vHeadDim = f.get<int>("v_head_dim");
    requirePositive(f, "kv_lora_rank", c.kvLoraRank);
    requirePositive(f, "qk_rope_head_dim", c.qkRopeHeadDim);
    requirePositive(f, "v_head_dim", c.vHeadDim);
    if (c.qkNopeHeadDim < 0 || c.qLoraRank < 0) throw Error(f.where() + ": negative MLA dimension");
    if (c.qkRopeHeadDim % 2) throw Error(f.where() + ": qk_rope_head_dim must be even");
}

}  // namespace tandem::model
