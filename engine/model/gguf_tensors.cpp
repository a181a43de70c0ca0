#include "model/gguf_tensors.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>

#include "cpu/weight_matrix.h"
#include "model/family.h"
#include "tandem/error.h"

namespace tandem::model {

namespace {

// llama.cpp's per-layer names (without the .weight/.bias suffix) and the Hugging Face ones below
// "model.layers.N.". Mixtral's MoE section is renamed where it is used.
struct LayerName {
    const char* gguf;
    const char* hf;
};

constexpr LayerName kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},  // glm4moe's name for it
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
    {"ffn_gate_inp.weight", "MOE.ROUTER.weight"},
    {"exp_probs_b.bias", "MOE.gate.e_score_correction_bias"},
    {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

// The names only some families' tensors have, each with the configuration that says the model has it
// (gpt-oss: the output projection's bias, the sinks, the router's bias, the experts' biases [E, I] and
// [E, H], which get Hugging-Face-like names: the release fuses gate and up, llama.cpp splits them).
struct OptionalLayerName {
    const char* gguf;
    const char* hf;
    bool ModelConfig::*present;
};

constexpr OptionalLayerName kOptionalLayerNames[] = {
    {"attn_output.bias", "self_attn.o_proj.bias", &ModelConfig::attentionOutputBias},
    {"attn_sinks.weight", "self_attn.sinks", &ModelConfig::attentionSinks},
    {"ffn_gate_inp.bias", "MOE.ROUTER.bias", &ModelConfig::routerBias},
    {"ffn_gate_exps.bias", "MOE.experts.gate_proj_bias", &ModelConfig::expertBiases},
    {"ffn_up_exps.bias", "MOE.experts.up_proj_bias", &ModelConfig::expertBiases},
    {"ffn_down_exps.bias", "MOE.experts.down_proj_bias", &ModelConfig::expertBiases},
};

// "blk.12.attn_q.weight" -> {12, "attn_q.weight"}.
std::optional<std::pair<int, std::string>> splitLayer(const std::string& name) {
    if (!name.starts_with("blk.")) return std::nullopt;
    int layer = 0;
    const char* begin = name.data() + 4;
    const auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
    if (ec != std::errc() || end == begin || *end != '.') return std::nullopt;
    return std::make_pair(layer, std::string(end + 1));
}

std::vector<std::int64_t> hfShape(const io::GgufTensor& t) {
    return {t.dims.rbegin(), t.dims.rend()};
}

io::DType dtypeOf(const io::GgufTensor& t, const std::string& where) {
    if (!t.type->dtype)
        throw Error(where + ": tensor '" + t.name + "' has type " + std::string(t.type->name) +
                    ", which Tandem cannot read (it reads " + std::string(io::supportedGgmlTypes()) +
                    "); choose a GGUF of one of those types");
    return *t.type->dtype;
}

}  // namespace

GgufTensors::GgufTensors(const io::GgufModel& gguf, const ModelConfig& config) : gguf_(gguf), config_(config) {
    std::map<int, std::pair<const io::GgufTensor*, const io::GgufTensor*>> splitKvB;
    for (const auto& [name, t] : gguf.tensors()) {
        const auto layer = splitLayer(name);
        if (layer && layer->first >= config.numLayers) continue;  // multi-token prediction
        if (layer && layer->second == "attn_k_b.weight") splitKvB[layer->first].first = t;
        else if (layer && layer->second == "attn_v_b.weight") splitKvB[layer->first].second = t;
        else add(*t);
    }
    for (const auto& [layer, parts] : splitKvB) {
        if (!parts.first || !parts.second)
            throw Error(describe() + ": layer " + std::to_string(layer) +
                        " has only one of attn_k_b and attn_v_b; the file is incomplete");
        joinKvB(layer, *parts.first, *parts.second);
    }
}

void GgufTensors::add(const io::GgufTensor& t) {
    const std::string file = describe();
    Entry e;
    e.view = {"GGUF tensor '" + t.name + "' in " + t.file->string(), dtypeOf(t, file), hfShape(t), t.data.data()};
    e.sources = {&t};
    std::string hf;
    if (t.name == "token_embd.weight") hf = "model.embed_tokens.weight";
    else if (t.name == "output_norm.weight") hf = "model.norm.weight";
    else if (t.name == "output.weight") hf = "lm_head.weight";
    else if (const auto layer = splitLayer(t.name)) {
        const ExpertTensorNames& names = config_.family->experts;
        const std::string prefix = "model.layers." + std::to_string(layer->first) + ".";
        const std::string moe = prefix + std::string(names.section) + ".";
        const std::string& rest = layer->second;
        if (rest == "ffn_gate_exps.weight") return addExperts(t, moe, std::string(names.gate));
        if (rest == "ffn_up_exps.weight") return addExperts(t, moe, std::string(names.up));
        if (rest == "ffn_down_exps.weight") return addExperts(t, moe, std::string(names.down));
        const auto rename = [&](const char* to) {
            hf = to;
            if (hf.starts_with("MOE.")) hf = moe + hf.substr(4);
            else hf = prefix + hf;
            if (const auto at = hf.find("ROUTER."); at != std::string::npos)
                hf = hf.substr(0, at) + std::string(names.router) + hf.substr(at + 6);
        };
        for (const auto& n : kLayerNames)
            if (rest == n.gguf) rename(n.hf);
        for (const auto& n : kOptionalLayerNames)
            if (rest == n.gguf && config_.*n.present) rename(n.hf);
        if (config_.family->ggufPermutesQk && (rest == "attn_q.weight" || rest == "attn_k.weight"))
            e.permutedHeadRows = config_.headDim;
    }
    if (hf.empty())
        throw Error(file + ": tensor '" + t.name + "' is not part of a " + config_.modelType +
                    " model as Tandem maps llama.cpp's names; the file's layout is not supported");
    entries_[hf] = std::move(e);
}

void GgufTensors::addExperts(const io::GgufTensor& t, const std::string& prefix, const std::string& matrix) {
    if (t.dims.size() != 3)
        throw Error(describe() + ": expert tensor '" + t.name + "' has dimensions " + t.dimsString() +
                    ", not [cols, rows, experts]");
    const io::DType type = dtypeOf(t, describe());
    const std::int64_t cols = t.dims[0], rows = t.dims[1], experts = t.dims[2];
    const std::uint64_t expertBytes = io::dtypeRowBytes(type, cols) * static_cast<std::uint64_t>(rows);
    for (std::int64_t x = 0; x < experts; ++x) {
        Entry e;
        e.view = {"GGUF tensor '" + t.name + "' (expert " + std::to_string(x) + ") in " + t.file->string(), type,
                  {rows, cols}, t.data.data() + static_cast<std::uint64_t>(x) * expertBytes};
        e.sources = {&t};
        entries_[prefix + "experts." + std::to_string(x) + "." + matrix + ".weight"] = std::move(e);
    }
}

// kv_b_proj rows per head h: qk_nope rows of K (row d is column d of attn_k_b[h], which is
// [kv_lora, qk_nope]), then v_head rows of V (attn_v_b[h] as it is, [v_head, kv_lora]).
void GgufTensors::joinKvB(int layer, const io::GgufTensor& kB, const io::GgufTensor& vB) {
    const std::int64_t heads = config_.numHeads, nope = config_.qkNopeHeadDim, v = config_.vHeadDim,
                       lora = config_.kvLoraRank;
    const std::vector<std::int64_t> kDims = {nope, lora, heads}, vDims = {lora, v, heads};
    if (kB.dims != kDims || vB.dims != vDims)
        throw Error(describe() + ": layer " + std::to_string(layer) + " has attn_k_b " + kB.dimsString() +
                    " and attn_v_b " + vB.dimsString() + ", which do not match the metadata's MLA sizes");
    const io::DType kType = dtypeOf(kB, describe()), vType = dtypeOf(vB, describe());
    const auto wide = [](io::DType t) { return t == io::DType::F32 || t == io::DType::F16; };
    const io::DType out = wide(kType) || wide(vType) ? io::DType::F32 : io::DType::BF16;
    const cpu::WeightMatrix k{kType, heads * lora, nope, kB.data.data()};
    const cpu::WeightMatrix vm{vType, heads * v, lora, vB.data.data()};
    const std::int64_t rows = heads * (nope + v);
    auto& bytes = owned_.emplace_back(static_cast<std::size_t>(rows * lora) * io::dtypeSize(out));
    auto put = [&](std::int64_t row, std::int64_t col, float value) {
        const std::size_t i = static_cast<std::size_t>(row * lora + col);
        if (out == io::DType::F32) std::memcpy(&bytes[4 * i], &value, 4);
        else {
            const std::uint16_t b = io::floatToBf16(value);
            std::memcpy(&bytes[2 * i], &b, 2);
        }
    };
    std::vector<float> row(static_cast<std::size_t>(std::max(nope, lora)));
    for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t first = h * (nope + v);
        for (std::int64_t c = 0; c < lora; ++c) {
            k.dequantRow(h * lora + c, row.data());
            for (std::int64_t d = 0; d < nope; ++d) put(first + d, c, row[static_cast<std::size_t>(d)]);
        }
        for (std::int64_t j = 0; j < v; ++j) {
            vm.dequantRow(h * v + j, row.data());
            for (std::int64_t c = 0; c < lora; ++c) put(first + nope + j, c, row[static_cast<std::size_t>(c)]);
        }
    }
    Entry e;
    e.view = {"kv_b_proj of layer " + std::to_string(layer) + " joined from '" + kB.name + "' and '" + vB.name +
                  "' in " + kB.file->string(),
              out, {rows, lora}, bytes.data()};
    e.sources = {&kB, &vB};
    entries_["model.layers." + std::to_string(layer) + ".self_attn.kv_b_proj.weight"] = std::move(e);
}

io::TensorView GgufTensors::view(const std::string& name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end())
        throw Error(describe() + ": the model has no tensor for '" + name + "' (llama.cpp's name for it is missing)");
    return it->second.view;
}

std::vector<std::string> GgufTensors::names() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& [name, e] : entries_) out.push_back(name);
    return out;
}

int GgufTensors::permutedHeadRows(const std::string& name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? 0 : it->second.permutedHeadRows;
}

const std::vector<const io::GgufTensor*>& GgufTensors::sources(const std::string& name) const {
    return entries_.at(name).sources;
}

}  // namespace tandem::model
