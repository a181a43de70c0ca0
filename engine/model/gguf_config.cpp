#include "model/gguf_config.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "tandem/error.h"

namespace tandem::model {

namespace {

using nlohmann::ordered_json;

// Typed reads of "{arch}.<key>" (or a full key) with errors naming the file and the key.
class Metadata {
public:
    Metadata(const io::GgufModel& gguf, std::string arch) : gguf_(gguf), arch_(std::move(arch)) {}

    const io::GgufValue* find(const std::string& key) const { return gguf_.find(arch_ + "." + key); }

    std::int64_t integer(const std::string& key) const {
        const auto* v = find(key);
        if (!v) fail(arch_ + "." + key, "is missing");
        return checkedInteger(*v, key);
    }
    std::int64_t integer(const std::string& key, std::int64_t fallback) const {
        const auto* v = find(key);
        return v ? checkedInteger(*v, key) : fallback;
    }
    double number(const std::string& key, double fallback) const {
        const auto* v = find(key);
        if (!v) return fallback;
        if (!v->isNumber()) fail(arch_ + "." + key, "is not a number");
        return v->number();
    }
    bool boolean(const std::string& key, bool fallback) const {
        const auto* v = find(key);
        if (!v) return fallback;
        if (v->type != io::GgufValueType::Bool) fail(arch_ + "." + key, "is not a boolean");
        return v->boolean;
    }
    // A count of layers (block_count, nextn_predict_layers), which the code below loops over looking
    // for tensors: a damaged file must not make that billions of lookups. Real models have ~100 layers.
    int layerCount(const std::string& key, std::optional<std::int64_t> fallback = std::nullopt) const {
        const std::int64_t n = fallback ? integer(key, *fallback) : integer(key);
        if (n < 0 || n > kMaxLayers)
            fail(arch_ + "." + key, "is " + std::to_string(n) + ", not a number of layers (0 to " +
                                        std::to_string(kMaxLayers) + ")");
        return static_cast<int>(n);
    }
    static constexpr std::int64_t kMaxLayers = 4096;

    std::string string(const std::string& key, const std::string& fallback) const {
        const auto* v = find(key);
        if (!v) return fallback;
        if (v->type != io::GgufValueType::String) fail(arch_ + "." + key, "is not a string");
        return v->string;
    }

    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        throw Error(gguf_.path().string() + ": metadata '" + key + "' " + what);
    }

private:
    std::int64_t checkedInteger(const io::GgufValue& v, const std::string& key) const {
        if (v.isInteger()) return v.integer;
        // Some keys are per layer (an array); Tandem's models use one value for every layer.
        if (v.type == io::GgufValueType::Array && !v.items.empty() && v.items.front().isInteger()) {
            for (const auto& item : v.items)
                if (!item.isInteger() || item.integer != v.items.front().integer)
                    fail(arch_ + "." + key, "differs between layers, which Tandem's architectures do not do");
            return v.items.front().integer;
        }
        fail(arch_ + "." + key, "is not an integer");
    }

    const io::GgufModel& gguf_;
    std::string arch_;
};

bool hasTensor(const io::GgufModel& g, int layer, const char* name) {
    return g.tensor("blk." + std::to_string(layer) + "." + name + ".weight") != nullptr;
}

void addTokenIds(const io::GgufModel& g, ordered_json& config) {
    auto id = [&](const char* key) -> std::optional<std::int64_t> {
        const auto* v = g.find(key);
        if (!v) return std::nullopt;
        if (!v->isInteger()) throw Error(g.path().string() + ": metadata '" + key + "' is not a token id");
        return v->integer;
    };
    config["bos_token_id"] = nullptr;
    if (const auto bos = id("tokenizer.ggml.bos_token_id")) config["bos_token_id"] = *bos;
    // llama.cpp stops at the end-of-turn token as well as EOS; so does a converted model.
    std::vector<std::int64_t> eos;
    for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
        if (const auto v = id(key); v && std::find(eos.begin(), eos.end(), *v) == eos.end()) eos.push_back(*v);
    if (eos.size() == 1) config["eos_token_id"] = eos.front();
    else if (!eos.empty()) config["eos_token_id"] = eos;
    else config["eos_token_id"] = nullptr;
}

// rope.scaling.*: YaRN becomes config.json's rope_scaling; no scaling leaves it out.
void addRopeScaling(const Metadata& m, ordered_json& config, bool deepseek) {
    const std::string type = m.string("rope.scaling.type", "none");
    if (type == "none") return;
    if (type != "yarn") m.fail("rope.scaling.type", "is '" + type + "'; Tandem supports YaRN scaling only");
    ordered_json yarn = {{"type", "yarn"}, {"factor", m.number("rope.scaling.factor", 1.0)}};
    if (const auto* ctx = m.find("rope.scaling.original_context_length"))
        yarn["original_max_position_embeddings"] = ctx->number();
    yarn["beta_fast"] = m.number("rope.scaling.yarn_beta_fast", 32.0);
    yarn["beta_slow"] = m.number("rope.scaling.yarn_beta_slow", 1.0);
    if (deepseek) {
        // The converter stores 0.1 * mscale_all_dim; the released DeepSeek models have mscale equal to
        // mscale_all_dim, which leaves cos/sin unscaled and scales the softmax by mscale².
        const double mscale = m.number("rope.scaling.yarn_log_multiplier", 0.0) / 0.1;
        yarn["mscale"] = mscale;
        yarn["mscale_all_dim"] = mscale;
    }
    config["rope_scaling"] = yarn;
}

void addCommon(const io::GgufModel& g, const Metadata& m, ordered_json& c) {
    const auto* embed = g.tensor("token_embd.weight");
    if (!embed || embed->dims.size() != 2)
        throw Error(g.path().string() + " has no 2-D token_embd.weight; it is not a complete model");
    c["vocab_size"] = embed->dims[1];
    c["hidden_size"] = m.integer("embedding_length");
    c["num_attention_heads"] = m.integer("attention.head_count");
    c["rms_norm_eps"] = m.number("attention.layer_norm_rms_epsilon", 1e-6);
    c["rope_theta"] = m.number("rope.freq_base", 10000.0);
    c["max_position_embeddings"] = m.integer("context_length", 4096);
    c["tie_word_embeddings"] = g.tensor("output.weight") == nullptr;
    addTokenIds(g, c);
}

ordered_json qwen3moe(const io::GgufModel& g, const Metadata& m) {
    ordered_json c = {{"model_type", "qwen3_moe"}};
    addCommon(g, m, c);
    const int layers = m.layerCount("block_count");
    c["num_hidden_layers"] = layers;
    c["num_key_value_heads"] = m.integer("attention.head_count_kv", c["num_attention_heads"].get<std::int64_t>());
    if (const auto* k = m.find("attention.key_length")) c["head_dim"] = k->integer;
    c["moe_intermediate_size"] = m.integer("expert_feed_forward_length");
    c["intermediate_size"] = m.integer("feed_forward_length", c["moe_intermediate_size"].get<std::int64_t>());
    c["num_experts"] = m.integer("expert_count");
    c["num_experts_per_tok"] = m.integer("expert_used_count");
    // llama.cpp always normalizes Qwen3-MoE's top-k weights, as every released model does.
    c["norm_topk_prob"] = m.boolean("expert_weights_norm", true);
    c["decoder_sparse_step"] = 1;
    ordered_json dense = ordered_json::array();
    for (int l = 0; l < layers; ++l)
        if (!hasTensor(g, l, "ffn_gate_inp")) dense.push_back(l);
    c["mlp_only_layers"] = dense;
    addRopeScaling(m, c, false);
    return c;
}

ordered_json mixtral(const io::GgufModel& g, const Metadata& m) {
    const auto experts = m.integer("expert_count", 0);
    if (experts <= 1)
        throw Error(g.path().string() + " is a dense Llama model; Tandem runs Mixture-of-Experts models (Mixtral is "
                                        "'llama' with llama.expert_count)");
    ordered_json c = {{"model_type", "mixtral"}};
    addCommon(g, m, c);
    c["num_hidden_layers"] = m.layerCount("block_count");
    c["num_key_value_heads"] = m.integer("attention.head_count_kv", c["num_attention_heads"].get<std::int64_t>());
    const auto hidden = c["hidden_size"].get<std::int64_t>(), heads = c["num_attention_heads"].get<std::int64_t>();
    c["head_dim"] = m.integer("attention.key_length", m.integer("rope.dimension_count", heads > 0 ? hidden / heads : 0));
    c["intermediate_size"] = m.integer("expert_feed_forward_length", m.integer("feed_forward_length"));
    c["num_local_experts"] = experts;
    c["num_experts_per_tok"] = m.integer("expert_used_count");
    addRopeScaling(m, c, false);
    return c;
}

ordered_json deepseek2(const io::GgufModel& g, const Metadata& m) {
    // DeepSeek-V3's router has a score-correction bias (exp_probs_b); V2's has none.
    const int nextn = m.layerCount("nextn_predict_layers", 0);
    const int layers = m.layerCount("block_count") - nextn;
    bool v3 = false;
    for (int l = 0; l < layers && !v3; ++l)
        v3 = g.tensor("blk." + std::to_string(l) + ".exp_probs_b.bias") != nullptr;
    ordered_json c = {{"model_type", v3 ? "deepseek_v3" : "deepseek_v2"}};
    addCommon(g, m, c);
    c["num_hidden_layers"] = layers;
    c["num_nextn_predict_layers"] = nextn;
    c["num_key_value_heads"] = c["num_attention_heads"];
    const auto qLora = m.integer("attention.q_lora_rank", 0);
    c["q_lora_rank"] = qLora > 0 ? ordered_json(qLora) : ordered_json(nullptr);
    const auto kvLora = m.integer("attention.kv_lora_rank");
    const auto rope = m.integer("rope.dimension_count");
    c["kv_lora_rank"] = kvLora;
    c["qk_rope_head_dim"] = rope;
    // Files from before llama.cpp's MLA rework keep the per-head widths in key_length/value_length;
    // newer ones put the compressed widths there and the per-head ones under *_mla.
    if (m.find("attention.key_length_mla")) {
        c["qk_nope_head_dim"] = m.integer("attention.key_length_mla") - rope;
        c["v_head_dim"] = m.integer("attention.value_length_mla");
    } else {
        c["qk_nope_head_dim"] = m.integer("attention.key_length") - rope;
        c["v_head_dim"] = m.integer("attention.value_length");
    }
    c["intermediate_size"] = m.integer("feed_forward_length");
    c["moe_intermediate_size"] = m.integer("expert_feed_forward_length");
    c["n_routed_experts"] = m.integer("expert_count");
    c["n_shared_experts"] = m.integer("expert_shared_count", 0);
    c["num_experts_per_tok"] = m.integer("expert_used_count");
    c["first_k_dense_replace"] = m.integer("leading_dense_block_count", 0);
    c["moe_layer_freq"] = 1;
    c["routed_scaling_factor"] = m.number("expert_weights_scale", 1.0);
    c["norm_topk_prob"] = m.boolean("expert_weights_norm", false);
    // llama.cpp's gating ids: 1 softmax, 2 sigmoid; files without the key are DeepSeek-V2 (softmax).
    const auto gating = m.integer("expert_gating_func", 1);
    if (gating != 1 && gating != 2) m.fail("deepseek2.expert_gating_func", "is " + std::to_string(gating) + "; Tandem supports softmax (1) and sigmoid (2)");
    c["scoring_func"] = gating == 2 ? "sigmoid" : "softmax";
    const auto groups = m.integer("expert_group_count", 1), groupsUsed = m.integer("expert_group_used_count", 1);
    c["n_group"] = groups;
    c["topk_group"] = groupsUsed;
    c["topk_method"] = v3 ? "noaux_tc" : (groups > 1 ? "group_limited_greedy" : "greedy");
    addRopeScaling(m, c, true);
    return c;
}

// GLM-4.5 (llama.cpp's glm4moe): GQA with q/k/v biases, NEOX rotary over rope.dimension_count of each
// head, DeepSeek-V3's router (sigmoid, exp_probs_b), shared experts, leading dense layers, MTP blocks
// counted in block_count.
ordered_json glm4moe(const io::GgufModel& g, const Metadata& m) {
    ordered_json c = {{"model_type", "glm4_moe"}};
    addCommon(g, m, c);
    const int nextn = m.layerCount("nextn_predict_layers", 0);
    const int layers = m.layerCount("block_count") - nextn;
    if (layers <= 0) m.fail("block_count", "counts no layer beside the nextn_predict_layers");
    c["num_hidden_layers"] = layers;
    c["num_nextn_predict_layers"] = nextn;
    c["num_key_value_heads"] = m.integer("attention.head_count_kv", c["num_attention_heads"].get<std::int64_t>());
    const auto hidden = c["hidden_size"].get<std::int64_t>(), heads = c["num_attention_heads"].get<std::int64_t>();
    const auto headDim = m.integer("attention.key_length", heads > 0 ? hidden / heads : 0);
    c["head_dim"] = headDim;
    const auto rotary = m.integer("rope.dimension_count", headDim);
    if (headDim <= 0 || rotary <= 0 || rotary > headDim) m.fail("rope.dimension_count", "does not fit the head width");
    c["partial_rotary_factor"] = static_cast<double>(rotary) / static_cast<double>(headDim);
    c["attention_bias"] = g.tensor("blk.0.attn_q.bias") != nullptr;
    c["use_qk_norm"] = hasTensor(g, 0, "attn_q_norm");
    c["intermediate_size"] = m.integer("feed_forward_length");
    c["moe_intermediate_size"] = m.integer("expert_feed_forward_length");
    c["n_routed_experts"] = m.integer("expert_count");
    c["n_shared_experts"] = m.integer("expert_shared_count", 0);
    c["num_experts_per_tok"] = m.integer("expert_used_count");
    c["first_k_dense_replace"] = m.integer("leading_dense_block_count", 0);
    c["routed_scaling_factor"] = m.number("expert_weights_scale", 1.0);
    c["norm_topk_prob"] = m.boolean("expert_weights_norm", false);
    const auto gating = m.integer("expert_gating_func", 2);
    if (gating != 2) m.fail("expert_gating_func", "is " + std::to_string(gating) + "; GLM-4.5 routes by sigmoid (2)");
    c["n_group"] = m.integer("expert_group_count", 1);
    c["topk_group"] = m.integer("expert_group_used_count", 1);
    addRopeScaling(m, c, false);
    return c;
}

// gpt-oss (llama.cpp's "gpt-oss", its openai-moe model): GQA with q/k/v/o biases and a sink per head,
// sliding and full layers (attention.sliding_window_pattern as a per-layer array or a period, else every
// other layer starting with a sliding one, as llama.cpp's load_swa_pattern(2)), YaRN, every layer a
// mixture of experts with a biased router and biased experts. The clamped SwiGLU's alpha and limit are
// not in the file (llama.cpp fixes them at 1.702 and 7, as the release has), nor is YaRN's truncation:
// the release's correction range is not rounded out (truncate false).
ordered_json gptOss(const io::GgufModel& g, const Metadata& m) {
    ordered_json c = {{"model_type", "gpt_oss"}};
    addCommon(g, m, c);
    const int layers = m.layerCount("block_count");
    c["num_hidden_layers"] = layers;
    c["num_key_value_heads"] = m.integer("attention.head_count_kv", c["num_attention_heads"].get<std::int64_t>());
    const auto headDim = m.integer("attention.key_length");
    if (m.integer("attention.value_length", headDim) != headDim)
        m.fail("gpt-oss.attention.value_length", "differs from attention.key_length, which gpt-oss does not do");
    c["head_dim"] = headDim;
    c["attention_bias"] = true;
    c["intermediate_size"] = m.integer("expert_feed_forward_length", m.integer("feed_forward_length", 0));
    if (c["intermediate_size"].get<std::int64_t>() <= 0) m.fail("gpt-oss.expert_feed_forward_length", "is missing");
    c["num_local_experts"] = m.integer("expert_count");
    c["num_experts_per_tok"] = m.integer("expert_used_count");
    const auto window = m.integer("attention.sliding_window");
    if (window <= 0) m.fail("gpt-oss.attention.sliding_window", "is not a positive number of tokens");
    c["sliding_window"] = window;
    if (const auto* swaBase = m.find("rope.freq_base_swa");
        swaBase && (!swaBase->isNumber() || swaBase->number() != c["rope_theta"].get<double>()))
        m.fail("gpt-oss.rope.freq_base_swa", "differs from rope.freq_base; Tandem's gpt-oss uses one rotary base for every layer");
    ordered_json types = ordered_json::array();
    const auto* pattern = m.find("attention.sliding_window_pattern");
    if (pattern && pattern->type == io::GgufValueType::Array) {
        if (static_cast<int>(pattern->items.size()) < layers)
            m.fail("gpt-oss.attention.sliding_window_pattern", "does not list every one of the " + std::to_string(layers) + " layers");
        for (int l = 0; l < layers; ++l) {
            const auto& item = pattern->items[static_cast<std::size_t>(l)];
            if (item.type != io::GgufValueType::Bool) m.fail("gpt-oss.attention.sliding_window_pattern", "is not an array of booleans");
            types.push_back(item.boolean ? "sliding_attention" : "full_attention");
        }
    } else {
        const auto period = m.integer("attention.sliding_window_pattern", 2);
        if (period < 0) m.fail("gpt-oss.attention.sliding_window_pattern", "is negative");
        for (int l = 0; l < layers; ++l)
            types.push_back(period == 0 || l % period < period - 1 ? "sliding_attention" : "full_attention");
    }
    c["layer_types"] = types;
    addRopeScaling(m, c, false);
    if (c.contains("rope_scaling")) c["rope_scaling"]["truncate"] = false;
    return c;
}

std::string architectureOf(const io::GgufModel& g) {
    const auto* arch = g.find("general.architecture");
    if (!arch || arch->type != io::GgufValueType::String)
        throw Error(g.path().string() + " has no general.architecture; it is not a llama.cpp model file");
    return arch->string;
}

}  // namespace

std::string ggufConfigJson(const io::GgufModel& g) {
    const std::string arch = architectureOf(g);
    const Metadata m(g, arch);
    ordered_json c;
    if (arch == "qwen3moe") c = qwen3moe(g, m);
    else if (arch == "deepseek2") c = deepseek2(g, m);
    else if (arch == "llama") c = mixtral(g, m);
    else if (arch == "glm4moe") c = glm4moe(g, m);
    else if (arch == "gpt-oss") c = gptOss(g, m);
    else
        throw Error(g.path().string() + ": architecture '" + arch +
                    "' is not supported (Tandem imports qwen3moe, deepseek2, glm4moe, gpt-oss and llama with experts, i.e. Mixtral)");
    c["torch_dtype"] = "bfloat16";
    c["tandem_source"] = "converted from " + g.path().filename().string();
    return c.dump(2);
}

ModelConfig ggufModelConfig(const io::GgufModel& g) {
    ModelConfig c = parseModelConfig(ggufConfigJson(g), "", g.path().string() + " (its metadata as config.json)");
    if (architectureOf(g) == "llama") c.ropeInterleaved = true;
    return c;
}

}  // namespace tandem::model
