#include "model/config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "io/text_file.h"
#include "tandem/error.h"

namespace tandem::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Typed access to one JSON object with errors that name the file and the field.
// A field that is present but null counts as absent, as in transformers.
class Fields {
public:
    Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

    bool has(const char* key) const {
        const auto it = j_.find(key);
        return it != j_.end() && !it->is_null();
    }

    template <class T>
    T get(const char* key) const {
        if (!has(key)) throw Error(where_ + ": missing '" + key + "'");
        return as<T>(key);
    }

    template <class T>
    T get(const char* key, T fallback) const {
        return has(key) ? as<T>(key) : fallback;
    }

    const json& raw(const char* key) const { return j_.at(key); }
    const std::string& where() const { return where_; }

private:
    template <class T>
    T as(const char* key) const {
        const json& v = j_.at(key);
        try {
            if constexpr (std::is_same_v<T, bool>) {
                if (!v.is_boolean()) throw Error("");
            } else if constexpr (std::is_integral_v<T>) {
                if (!v.is_number_integer()) throw Error("");
            } else if constexpr (std::is_floating_point_v<T>) {
                if (!v.is_number()) throw Error("");
            } else if constexpr (std::is_same_v<T, std::string>) {
                if (!v.is_string()) throw Error("");
            }
            return v.get<T>();
        } catch (const std::exception&) {
            throw Error(where_ + ": '" + key + "' has the wrong type (" + v.dump() + ")");
        }
    }

    const json& j_;
    std::string where_;
};

json parseJson(const std::string& text, const std::string& where) {
    try {
        json j = io::parseJson<json>(text, where);
        if (!j.is_object()) throw Error(where + ": expected a JSON object");
        return j;
    } catch (const json::exception& e) {
        throw Error(where + " is not valid JSON (" + e.what() + ")");
    }
}

std::vector<int> tokenIdList(const Fields& f, const char* key) {
    std::vector<int> ids;
    if (!f.has(key)) return ids;
    const json& v = f.raw(key);
    if (v.is_number_integer()) return {v.get<int>()};
    if (!v.is_array()) throw Error(f.where() + ": '" + key + "' must be a token id or a list of ids");
    for (const auto& id : v) {
        if (!id.is_number_integer()) throw Error(f.where() + ": '" + key + "' must hold integer token ids");
        ids.push_back(id.get<int>());
    }
    return ids;
}

void positive(const Fields& f, const char* key, int value) {
    if (value <= 0) throw Error(f.where() + ": '" + key + "' must be positive, not " + std::to_string(value));
}

void readRope(const Fields& f, ModelConfig& c) {
    c.ropeTheta = f.get<double>("rope_theta", 10000.0);
    c.maxPositionEmbeddings = f.get<int>("max_position_embeddings", 4096);
    if (!f.has("rope_scaling")) return;
    const json& rs = f.raw("rope_scaling");
    if (!rs.is_object()) throw Error(f.where() + ": 'rope_scaling' must be an object");
    const Fields s(rs, f.where() + " rope_scaling");
    const std::string type = s.has("rope_type") ? s.get<std::string>("rope_type") : s.get<std::string>("type", "default");
    if (type == "default") return;
    if (type != "yarn")
        throw Error(f.where() + ": rope scaling '" + type + "' is not supported (supported: yarn)");
    YarnScaling y;
    y.factor = s.get<double>("factor");
    y.betaFast = s.get<double>("beta_fast", 32.0);
    y.betaSlow = s.get<double>("beta_slow", 1.0);
    y.mscale = s.get<double>("mscale", 1.0);
    y.mscaleAllDim = s.get<double>("mscale_all_dim", 0.0);
    if (s.has("original_max_position_embeddings"))
        y.originalMaxPositions = s.get<double>("original_max_position_embeddings");
    if (s.has("attention_factor")) y.attentionFactor = s.get<double>("attention_factor");
    if (y.factor <= 0) throw Error(f.where() + ": rope_scaling 'factor' must be positive");
    c.yarn = y;
}

void readGqa(const Fields& f, ModelConfig& c) {
    c.attention = AttentionKind::Gqa;
    c.numKvHeads = f.get<int>("num_key_value_heads", c.numHeads);
    positive(f, "num_key_value_heads", c.numKvHeads);
    if (c.numHeads % c.numKvHeads != 0)
        throw Error(f.where() + ": num_attention_heads (" + std::to_string(c.numHeads) +
                    ") is not a multiple of num_key_value_heads (" + std::to_string(c.numKvHeads) + ")");
    c.headDim = f.get<int>("head_dim", c.hiddenSize / c.numHeads);
    positive(f, "head_dim", c.headDim);
    if (c.headDim % 2) throw Error(f.where() + ": head_dim must be even for rotary embeddings");
}

void readMla(const Fields& f, ModelConfig& c) {
    c.attention = AttentionKind::Mla;
    c.ropeInterleaved = true;
    c.numKvHeads = c.numHeads;
    c.qLoraRank = f.get<int>("q_lora_rank", 0);
    c.kvLoraRank = f.get<int>("kv_lora_rank");
    c.qkNopeHeadDim = f.get<int>("qk_nope_head_dim");
    c.qkRopeHeadDim = f.get<int>("qk_rope_head_dim");
    c.vHeadDim = f.get<int>("v_head_dim");
    positive(f, "kv_lora_rank", c.kvLoraRank);
    positive(f, "qk_rope_head_dim", c.qkRopeHeadDim);
    positive(f, "v_head_dim", c.vHeadDim);
    if (c.qkNopeHeadDim < 0 || c.qLoraRank < 0) throw Error(f.where() + ": negative MLA dimension");
    if (c.qkRopeHeadDim % 2) throw Error(f.where() + ": qk_rope_head_dim must be even");
}

void readDeepseekMoe(const Fields& f, ModelConfig& c, bool v3) {
    c.intermediateSize = f.get<int>("intermediate_size");
    c.numExperts = f.get<int>("n_routed_experts", 0);
    c.moeIntermediateSize = f.get<int>("moe_intermediate_size", 0);
    c.numSharedExperts = f.get<int>("n_shared_experts", 0);
    c.firstKDenseReplace = f.get<int>("first_k_dense_replace", 0);
    c.moeLayerFreq = f.get<int>("moe_layer_freq", 1);
    positive(f, "moe_layer_freq", c.moeLayerFreq);
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

void readQuantization(const Fields& q, ModelConfig& c) {
    const std::string method = q.get<std::string>("quant_method", "");
    if (method != "fp8")
        throw Error(q.where() + ": quant_method '" + method + "' is not supported (supported: fp8 block scales)");
    c.fp8 = true;
    if (q.has("weight_block_size")) {
        const auto& b = q.raw("weight_block_size");
        if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
            b[0].get<int>() <= 0 || b[1].get<int>() <= 0)
            throw Error(q.where() + ": 'weight_block_size' must be two positive integers");
        c.fp8BlockRows = b[0].get<int>();
        c.fp8BlockCols = b[1].get<int>();
    }
}

void validateMoe(const Fields& f, const ModelConfig& c) {
    if (c.numExperts == 0) return;
    positive(f, "moe_intermediate_size", c.moeIntermediateSize);
    const RouterSpec& r = c.router;
    if (r.topK <= 0 || r.topK > c.numExperts)
        throw Error(f.where() + ": num_experts_per_tok (" + std::to_string(r.topK) + ") must be between 1 and the " +
                    std::to_string(c.numExperts) + " experts");
    if (r.numGroups <= 0 || c.numExperts % r.numGroups != 0)
        throw Error(f.where() + ": n_group (" + std::to_string(r.numGroups) + ") must divide the " +
                    std::to_string(c.numExperts) + " experts");
    if (r.topKGroups <= 0 || r.topKGroups > r.numGroups)
        throw Error(f.where() + ": topk_group must be between 1 and n_group");
    if (r.selection == ExpertSelection::GroupLimitedByTop2 && r.numGroups > 1 && c.numExperts / r.numGroups < 2)
        throw Error(f.where() + ": noaux_tc routing needs at least two experts per group");
    if (r.topK > r.topKGroups * (c.numExperts / r.numGroups))
        throw Error(f.where() + ": num_experts_per_tok exceeds the experts in the selected groups");
}

}  // namespace

bool ModelConfig::isMoeLayer(int layer) const {
    if (numExperts == 0) return false;
    switch (arch) {
    case Architecture::Mixtral: return true;
    case Architecture::Qwen3Moe:
        return std::find(mlpOnlyLayers.begin(), mlpOnlyLayers.end(), layer) == mlpOnlyLayers.end() &&
               (layer + 1) % decoderSparseStep == 0;
    case Architecture::DeepseekV2:
    case Architecture::DeepseekV3: return layer >= firstKDenseReplace && layer % moeLayerFreq == 0;
    }
    return false;
}

int ModelConfig::moeLayerCount() const {
    int n = 0;
    for (int l = 0; l < numLayers; ++l) n += isMoeLayer(l) ? 1 : 0;
    return n;
}

ModelConfig parseModelConfig(const std::string& configJson, const std::string& generationJson,
                             const std::string& where) {
    const json j = parseJson(configJson, where);
    const Fields f(j, where);
    ModelConfig c;
    c.modelType = f.get<std::string>("model_type");
    if (c.modelType == "qwen3_moe") c.arch = Architecture::Qwen3Moe;
    else if (c.modelType == "deepseek_v2") c.arch = Architecture::DeepseekV2;
    else if (c.modelType == "deepseek_v3" || c.modelType == "kimi_k2") c.arch = Architecture::DeepseekV3;
    else if (c.modelType == "mixtral") c.arch = Architecture::Mixtral;
    else
        throw Error(where + ": model_type '" + c.modelType +
                    "' is not supported (supported: qwen3_moe, deepseek_v3, kimi_k2, deepseek_v2, mixtral)");

    c.vocabSize = f.get<int>("vocab_size");
    c.hiddenSize = f.get<int>("hidden_size");
    c.numLayers = f.get<int>("num_hidden_layers");
    c.numHeads = f.get<int>("num_attention_heads");
    positive(f, "vocab_size", c.vocabSize);
    positive(f, "hidden_size", c.hiddenSize);
    positive(f, "num_hidden_layers", c.numLayers);
    positive(f, "num_attention_heads", c.numHeads);
    c.rmsNormEps = f.get<float>("rms_norm_eps", 1e-6f);
    c.tieWordEmbeddings = f.get<bool>("tie_word_embeddings", false);
    readRope(f, c);

    switch (c.arch) {
    case Architecture::Qwen3Moe:
        readGqa(f, c);
        c.qkNorm = true;
        if (f.get<bool>("use_sliding_window", false) && f.has("sliding_window"))
            c.slidingWindow = f.get<int>("sliding_window");
        c.intermediateSize = f.get<int>("intermediate_size");
        c.numExperts = f.get<int>("num_experts", 0);
        c.moeIntermediateSize = f.get<int>("moe_intermediate_size", 0);
        c.decoderSparseStep = f.get<int>("decoder_sparse_step", 1);
        positive(f, "decoder_sparse_step", c.decoderSparseStep);
        if (f.has("mlp_only_layers")) {
            const auto& layers = f.raw("mlp_only_layers");
            if (!layers.is_array()) throw Error(where + ": 'mlp_only_layers' must be a list of layer numbers");
            for (const auto& l : layers) {
                if (!l.is_number_integer()) throw Error(where + ": 'mlp_only_layers' must hold integers");
                c.mlpOnlyLayers.push_back(l.get<int>());
            }
        }
        c.router.topK = f.get<int>("num_experts_per_tok", 1);
        c.router.normalize = f.get<bool>("norm_topk_prob", false);
        break;
    case Architecture::Mixtral:
        readGqa(f, c);
        if (f.has("sliding_window")) c.slidingWindow = f.get<int>("sliding_window");
        c.numExperts = f.get<int>("num_local_experts");
        c.moeIntermediateSize = f.get<int>("intermediate_size");
        c.intermediateSize = c.moeIntermediateSize;
        c.router.topK = f.get<int>("num_experts_per_tok", 2);
        c.router.normalize = true;
        break;
    case Architecture::DeepseekV2:
    case Architecture::DeepseekV3:
        readMla(f, c);
        readDeepseekMoe(f, c, c.arch == Architecture::DeepseekV3);
        break;
    }
    validateMoe(f, c);
    if (f.get<bool>("attention_bias", false))
        throw Error(where + ": attention projections with bias ('attention_bias': true) are not supported");
    if (f.has("quantization_config")) readQuantization(Fields(f.raw("quantization_config"), where + " quantization_config"), c);
    if (c.slidingWindow && *c.slidingWindow <= 0) throw Error(where + ": 'sliding_window' must be positive");

    c.eosTokenIds = tokenIdList(f, "eos_token_id");
    if (f.has("bos_token_id")) c.bosTokenId = f.get<int>("bos_token_id");

    if (!generationJson.empty()) {
        const std::string gwhere = fs::path(where).parent_path().empty()
                                       ? std::string("generation_config.json")
                                       : (fs::path(where).parent_path() / "generation_config.json").string();
        const json g = parseJson(generationJson, gwhere);
        const Fields gf(g, gwhere);
        if (gf.has("eos_token_id")) c.eosTokenIds = tokenIdList(gf, "eos_token_id");
        if (gf.has("bos_token_id")) c.bosTokenId = gf.get<int>("bos_token_id");
        c.generation.doSample = gf.get<bool>("do_sample", false);
        c.generation.temperature = gf.get<float>("temperature", 1.0f);
        c.generation.topP = gf.get<float>("top_p", 1.0f);
        c.generation.topK = gf.get<int>("top_k", 0);
        c.generation.minP = gf.get<float>("min_p", 0.0f);
        c.generation.repetitionPenalty = gf.get<float>("repetition_penalty", 1.0f);
    }
    for (const int id : c.eosTokenIds)
        if (id < 0 || id >= c.vocabSize)
            throw Error(where + ": eos_token_id " + std::to_string(id) + " is outside the vocabulary");
    return c;
}

ModelConfig loadModelConfig(const fs::path& dir) {
    if (!fs::is_directory(dir)) throw Error("model folder " + dir.string() + " does not exist");
    const fs::path configPath = dir / "config.json";
    if (!fs::exists(configPath)) throw Error(dir.string() + " has no config.json; is this a Hugging Face model folder?");
    const fs::path genPath = dir / "generation_config.json";
    return parseModelConfig(io::readRegularFile(configPath), fs::exists(genPath) ? io::readRegularFile(genPath) : std::string(),
                            configPath.string());
}

}  // namespace tandem::model
