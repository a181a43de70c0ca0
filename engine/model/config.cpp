#include "model/config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "io/compressed_tensors.h"
#include "io/text_file.h"
#include "model/config_fields.h"
#include "model/family.h"
#include "tandem/error.h"

namespace tandem::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json parseJson(const std::string& text, const std::string& where) {
    try {
        json j = io::parseJson<json>(text, where);
        if (!j.is_object()) throw Error(where + ": expected a JSON object");
        return j;
    } catch (const json::exception& e) {
        throw Error(where + " is not valid JSON (" + e.what() + ")");
    }
}

std::vector<int> tokenIdList(const ConfigFields& f, const char* key) {
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

void readRope(const ConfigFields& f, ModelConfig& c) {
    c.ropeTheta = f.get<double>("rope_theta", 10000.0);
    c.maxPositionEmbeddings = f.get<int>("max_position_embeddings", 4096);
    if (!f.has("rope_scaling")) return;
    const json& rs = f.raw("rope_scaling");
    if (!rs.is_object()) throw Error(f.where() + ": 'rope_scaling' must be an object");
    const ConfigFields s(rs, f.where() + " rope_scaling");
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
    y.truncate = s.get<bool>("truncate", true);
    if (y.factor <= 0) throw Error(f.where() + ": rope_scaling 'factor' must be positive");
    c.yarn = y;
}

void readQuantization(const ConfigFields& q, ModelConfig& c) {
    const std::string method = q.get<std::string>("quant_method", "");
    if (method == "compressed-tensors") {
        c.packedInt4Group = io::parseCompressedTensors(q.json(), q.where()).groupSize;
        return;
    }
    if (method == "mxfp4" && c.modelType == "gpt_oss") {
        c.mxfp4Experts = true;
        return;
    }
    if (method != "fp8")
        throw Error(q.where() + ": quant_method '" + method +
                    "' is not supported (supported: fp8 block scales, compressed-tensors int4, and gpt-oss's mxfp4 "
                    "experts)");
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

void validateMoe(const ConfigFields& f, const ModelConfig& c) {
    if (c.numExperts == 0) return;
    requirePositive(f, "moe_intermediate_size", c.moeIntermediateSize);
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

void planLayers(ModelConfig& c) {
    c.layers.assign(static_cast<std::size_t>(c.numLayers), LayerPlan{});
    for (int l = 0; l < c.numLayers; ++l) {
        LayerPlan& layer = c.layers[static_cast<std::size_t>(l)];
        layer.index = l;
        layer.attention = c.attention;
        if (c.slidingLayers.empty() || c.slidingLayers[static_cast<std::size_t>(l)]) layer.window = c.slidingWindow;
        layer.moe = c.numExperts > 0 && c.family->isMoeLayer(c, l);
    }
    // Deferred experts overlap the next layer's attention and join its MoE output: only between two
    // MoE layers (a dense layer has no experts to join them with), so never from the last layer.
    for (int l = 0; l + 1 < c.numLayers; ++l) {
        LayerPlan& layer = c.layers[static_cast<std::size_t>(l)];
        LayerPlan& next = c.layers[static_cast<std::size_t>(l) + 1];
        if (layer.moe && next.moe) {
            layer.mayDefer = true;
            next.deferredFrom = l;
        }
    }
}

int ModelConfig::moeLayerCount() const {
    int n = 0;
    for (int l = 0; l < numLayers; ++l) n += isMoeLayer(l) ? 1 : 0;
    return n;
}

ModelConfig parseModelConfig(const std::string& configJson, const std::string& generationJson,
                             const std::string& where) {
    const json j = parseJson(configJson, where);
    const ConfigFields f(j, where);
    ModelConfig c;
    c.modelType = f.get<std::string>("model_type");
    c.family = findFamily(c.modelType);
    if (!c.family)
        throw Error(where + ": model_type '" + c.modelType + "' is not supported (supported: " + supportedModelTypes() + ")");

    c.vocabSize = f.get<int>("vocab_size");
    c.hiddenSize = f.get<int>("hidden_size");
    c.numLayers = f.get<int>("num_hidden_layers");
    c.numHeads = f.get<int>("num_attention_heads");
    requirePositive(f, "vocab_size", c.vocabSize);
    requirePositive(f, "hidden_size", c.hiddenSize);
    requirePositive(f, "num_hidden_layers", c.numLayers);
    requirePositive(f, "num_attention_heads", c.numHeads);
    c.rmsNormEps = f.get<float>("rms_norm_eps", 1e-6f);
    c.tieWordEmbeddings = f.get<bool>("tie_word_embeddings", false);
    readRope(f, c);

    c.family->readConfig(f, c);
    validateMoe(f, c);
    // Only families that read the biases (GLM-4.5) may have them.
    if (f.get<bool>("attention_bias", false) && !c.attentionBias)
        throw Error(where + ": attention projections with bias ('attention_bias': true) are not supported for " + c.modelType);
    if (f.has("quantization_config")) readQuantization(ConfigFields(f.raw("quantization_config"), where + " quantization_config"), c);
    if (c.slidingWindow && *c.slidingWindow <= 0) throw Error(where + ": 'sliding_window' must be positive");

    c.eosTokenIds = tokenIdList(f, "eos_token_id");
    if (f.has("bos_token_id")) c.bosTokenId = f.get<int>("bos_token_id");

    if (!generationJson.empty()) {
        const std::string gwhere = fs::path(where).parent_path().empty()
                                       ? std::string("generation_config.json")
                                       : (fs::path(where).parent_path() / "generation_config.json").string();
        const json g = parseJson(generationJson, gwhere);
        const ConfigFields gf(g, gwhere);
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
    planLayers(c);
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
