#include "gguf_fixture.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>
#include <map>
#include <regex>

#include "cpu/weight_matrix.h"
#include "gguf_quantize.h"
#include "io/checkpoint.h"
#include "io/compressed_tensors.h"
#include "io/gguf_quant.h"
#include "test_support.h"

namespace tandem::test {

namespace {

struct Floats {
    std::vector<std::int64_t> shape;  // Hugging Face order
    std::vector<float> values;
};

QJsonObject readJson(const QString& path) { return QJsonDocument::fromJson(readFile(path)).object(); }

// Every value of an HF tensor as float32; FP8 weights times their block scales, compressed-tensors int4
// (X.weight_packed) times its group scales.
Floats readFloats(const io::Checkpoint& ckpt, const std::string& name) {
    const auto t = ckpt.get(name);
    if (name.ends_with(".weight_packed")) {
        const std::string weight = name.substr(0, name.size() - std::string("_packed").size());
        const io::PackedInt4View v = io::viewPackedInt4(ckpt, weight, t.info->shape[0], t.info->shape[1] * 8);
        Floats f{{v.rows, v.cols}, std::vector<float>(static_cast<std::size_t>(v.rows * v.cols))};
        for (std::int64_t r = 0; r < v.rows; ++r)
            io::dequantizePackedInt4Row(v.packed + r * v.cols / 2, v.scales + r * (v.cols / io::kPackedInt4Group), v.cols,
                                        &f.values[static_cast<std::size_t>(r * v.cols)]);
        return f;
    }
    Floats f{t.info->shape, std::vector<float>(static_cast<std::size_t>(t.info->numel()))};
    if (t.info->dtype == io::DType::F8_E4M3) {
        const auto s = ckpt.get(name + "_scale_inv");
        std::vector<float> scales(static_cast<std::size_t>(s.info->numel()));
        for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = io::loadAsFloat(s.info->dtype, s.data.data() + i * io::dtypeSize(s.info->dtype));
        cpu::WeightMatrix m{io::DType::F8_E4M3, t.info->shape[0], t.info->shape[1], t.data.data()};
        m.blockScales = scales.data();
        m.scaleCols = s.info->shape[1];
        for (std::int64_t r = 0; r < m.rows; ++r) m.dequantRow(r, &f.values[static_cast<std::size_t>(r * m.cols)]);
        return f;
    }
    const std::size_t size = io::dtypeSize(t.info->dtype);
    for (std::size_t i = 0; i < f.values.size(); ++i) f.values[i] = io::loadAsFloat(t.info->dtype, t.data.data() + i * size);
    return f;
}

// llama.cpp's rope order for `llama` query/key rows: within each head, rows (i, i + D/2) become
// (2i, 2i + 1).
Floats permuteHeads(const Floats& f, int heads) {
    Floats out = f;
    const std::int64_t rows = f.shape[0], cols = f.shape[1], d = rows / heads;
    for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < d; ++i) {
            const std::int64_t to = h * d + 2 * (i % (d / 2)) + i / (d / 2);
            std::copy_n(&f.values[static_cast<std::size_t>((h * d + i) * cols)], cols, &out.values[static_cast<std::size_t>(to * cols)]);
        }
    return out;
}

class Builder {
public:
    Builder(const QString& fixture, const GgufFixtureOptions& o)
        : dir_(QFileInfo(fixture).isAbsolute() ? fixture : fixturePath(fixture)), o_(o), config_(readJson(dir_ + "/config.json")), ckpt_(dir_.toStdString()) {
        const QString type = config_["model_type"].toString();
        arch_ = type == "qwen3_moe" ? "qwen3moe" : type == "mixtral" ? "llama" : type == "glm4_moe" ? "glm4moe"
              : type == "gpt_oss"   ? "gpt-oss"  : "deepseek2";
    }

    GgufWriter build() {
        metadata();
        tokenizer();
        tensors();
        return std::move(w_);
    }

private:
    int cfg(const char* key) const { return config_[key].toInt(); }
    std::string key(const std::string& k) const { return arch_ + "." + k; }

    void metadata() {
        w_.string("general.architecture", arch_);
        w_.string("general.name", QFileInfo(dir_).fileName().toStdString());
        w_.u32(key("context_length"), static_cast<std::uint32_t>(cfg("max_position_embeddings")));
        w_.u32(key("embedding_length"), static_cast<std::uint32_t>(cfg("hidden_size")));
        w_.u32(key("feed_forward_length"), static_cast<std::uint32_t>(cfg("intermediate_size")));
        w_.u32(key("attention.head_count"), static_cast<std::uint32_t>(cfg("num_attention_heads")));
        w_.f32(key("rope.freq_base"), static_cast<float>(config_["rope_theta"].toDouble()));
        w_.f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(config_["rms_norm_eps"].toDouble()));
        w_.u32(key("expert_used_count"), static_cast<std::uint32_t>(cfg("num_experts_per_tok")));
        const int layers = cfg("num_hidden_layers");
        if (arch_ == "qwen3moe") {
            w_.u32(key("block_count"), static_cast<std::uint32_t>(layers));
            w_.u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(cfg("num_key_value_heads")));
            w_.u32(key("attention.key_length"), static_cast<std::uint32_t>(cfg("head_dim")));
            w_.u32(key("attention.value_length"), static_cast<std::uint32_t>(cfg("head_dim")));
            w_.u32(key("expert_count"), static_cast<std::uint32_t>(cfg("num_experts")));
            w_.u32(key("expert_feed_forward_length"), static_cast<std::uint32_t>(cfg("moe_intermediate_size")));
        } else if (arch_ == "llama") {
            w_.u32(key("block_count"), static_cast<std::uint32_t>(layers));
            w_.u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(cfg("num_key_value_heads")));
            w_.u32(key("rope.dimension_count"), static_cast<std::uint32_t>(cfg("head_dim")));
            w_.u32(key("expert_count"), static_cast<std::uint32_t>(cfg("num_local_experts")));
        } else if (arch_ == "glm4moe") {
            glmMetadata(layers);
        } else if (arch_ == "gpt-oss") {
            gptOssMetadata(layers);
        } else {
            deepseekMetadata(layers);
        }
    }

    // As llama.cpp's converter writes GLM-4.5: the MTP block counted in block_count, rope over the rotary
    // part of each head, DeepSeek-V3's router keys.
    void glmMetadata(int layers) {
        const int nextn = cfg("num_nextn_predict_layers"), headDim = cfg("head_dim");
        w_.u32(key("block_count"), static_cast<std::uint32_t>(layers + nextn));
        if (nextn) w_.u32(key("nextn_predict_layers"), static_cast<std::uint32_t>(nextn));
        w_.u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(cfg("num_key_value_heads")));
        w_.u32(key("attention.key_length"), static_cast<std::uint32_t>(headDim));
        w_.u32(key("attention.value_length"), static_cast<std::uint32_t>(headDim));
        w_.u32(key("rope.dimension_count"), static_cast<std::uint32_t>(headDim * config_["partial_rotary_factor"].toDouble()));
        w_.u32(key("leading_dense_block_count"), static_cast<std::uint32_t>(cfg("first_k_dense_replace")));
        w_.u32(key("expert_feed_forward_length"), static_cast<std::uint32_t>(cfg("moe_intermediate_size")));
        w_.u32(key("expert_count"), static_cast<std::uint32_t>(cfg("n_routed_experts")));
        w_.u32(key("expert_shared_count"), static_cast<std::uint32_t>(cfg("n_shared_experts")));
        w_.f32(key("expert_weights_scale"), static_cast<float>(config_["routed_scaling_factor"].toDouble()));
        if (config_["norm_topk_prob"].toBool()) w_.boolean(key("expert_weights_norm"), true);
        w_.u32(key("expert_gating_func"), 2);
    }

    // As llama.cpp's converter writes gpt-oss: the experts' width twice (feed_forward_length above and
    // expert_feed_forward_length), the sliding window without a pattern (llama.cpp's default for the
    // architecture is every other layer, starting with a sliding one), YaRN with its betas.
    void gptOssMetadata(int layers) {
        w_.u32(key("block_count"), static_cast<std::uint32_t>(layers));
        w_.u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(cfg("num_key_value_heads")));
        w_.u32(key("attention.key_length"), static_cast<std::uint32_t>(cfg("head_dim")));
        w_.u32(key("attention.value_length"), static_cast<std::uint32_t>(cfg("head_dim")));
        w_.u32(key("expert_count"), static_cast<std::uint32_t>(cfg("num_local_experts")));
        w_.u32(key("expert_feed_forward_length"), static_cast<std::uint32_t>(cfg("intermediate_size")));
        w_.u32(key("attention.sliding_window"), static_cast<std::uint32_t>(cfg("sliding_window")));
        const QJsonArray types = config_["layer_types"].toArray();
        for (int l = 0; l < types.size(); ++l)
            if ((types[l].toString() == "sliding_attention") != (l % 2 == 0))
                throw std::runtime_error("layer_types differ from llama.cpp's gpt-oss pattern");
        const QJsonObject yarn = config_["rope_scaling"].toObject();
        w_.string(key("rope.scaling.type"), "yarn");
        w_.f32(key("rope.scaling.factor"), static_cast<float>(yarn["factor"].toDouble()));
        w_.u32(key("rope.scaling.original_context_length"), static_cast<std::uint32_t>(yarn["original_max_position_embeddings"].toInt()));
        for (const char* beta : {"beta_fast", "beta_slow"})
            if (yarn.contains(beta)) w_.f32(key(std::string("rope.scaling.yarn_") + beta), static_cast<float>(yarn[beta].toDouble()));
    }

    void deepseekMetadata(int layers) {
        const int nextn = cfg("num_nextn_predict_layers");
        w_.u32(key("block_count"), static_cast<std::uint32_t>(layers + nextn));
        if (nextn) w_.u32(key("nextn_predict_layers"), static_cast<std::uint32_t>(nextn));
        w_.u32(key("leading_dense_block_count"), static_cast<std::uint32_t>(cfg("first_k_dense_replace")));
        w_.u32(key("vocab_size"), static_cast<std::uint32_t>(cfg("vocab_size")));
        if (!config_["q_lora_rank"].isNull()) w_.u32(key("attention.q_lora_rank"), static_cast<std::uint32_t>(cfg("q_lora_rank")));
        const int lora = cfg("kv_lora_rank"), rope = cfg("qk_rope_head_dim"), nope = cfg("qk_nope_head_dim"), v = cfg("v_head_dim");
        w_.u32(key("attention.kv_lora_rank"), static_cast<std::uint32_t>(lora));
        if (o_.splitKvB) {
            w_.u32(key("attention.head_count_kv"), 1);
            w_.u32(key("attention.key_length"), static_cast<std::uint32_t>(lora + rope));
            w_.u32(key("attention.value_length"), static_cast<std::uint32_t>(lora));
            w_.u32(key("attention.key_length_mla"), static_cast<std::uint32_t>(nope + rope));
            w_.u32(key("attention.value_length_mla"), static_cast<std::uint32_t>(v));
        } else {
            w_.u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(cfg("num_attention_heads")));
            w_.u32(key("attention.key_length"), static_cast<std::uint32_t>(nope + rope));
            w_.u32(key("attention.value_length"), static_cast<std::uint32_t>(v));
        }
        w_.u32(key("expert_feed_forward_length"), static_cast<std::uint32_t>(cfg("moe_intermediate_size")));
        w_.u32(key("expert_count"), static_cast<std::uint32_t>(cfg("n_routed_experts")));
        w_.u32(key("expert_shared_count"), static_cast<std::uint32_t>(cfg("n_shared_experts")));
        w_.f32(key("expert_weights_scale"), static_cast<float>(config_["routed_scaling_factor"].toDouble()));
        if (config_["norm_topk_prob"].toBool()) w_.boolean(key("expert_weights_norm"), true);
        w_.u32(key("expert_gating_func"), config_["scoring_func"].toString() == "sigmoid" ? 2 : 1);
        if (cfg("n_group") > 1) {
            w_.u32(key("expert_group_count"), static_cast<std::uint32_t>(cfg("n_group")));
            w_.u32(key("expert_group_used_count"), static_cast<std::uint32_t>(cfg("topk_group")));
        }
        w_.u32(key("rope.dimension_count"), static_cast<std::uint32_t>(rope));
        const QJsonObject yarn = config_["rope_scaling"].toObject();
        w_.string(key("rope.scaling.type"), "yarn");
        w_.f32(key("rope.scaling.factor"), static_cast<float>(yarn["factor"].toDouble()));
        w_.u32(key("rope.scaling.original_context_length"), static_cast<std::uint32_t>(yarn["original_max_position_embeddings"].toInt()));
        w_.f32(key("rope.scaling.yarn_log_multiplier"), static_cast<float>(0.1 * yarn["mscale_all_dim"].toDouble()));
        // Kimi-K2's beta_fast 1 (DeepSeek-V3's 32 is the importer's default)
        for (const char* beta : {"beta_fast", "beta_slow"})
            if (yarn.contains(beta)) w_.f32(key(std::string("rope.scaling.yarn_") + beta), static_cast<float>(yarn[beta].toDouble()));
    }

    void tokenizer() {
        const QJsonObject tok = readJson(dir_ + "/tokenizer.json"), cfgTok = readJson(dir_ + "/tokenizer_config.json");
        const QJsonObject model = tok["model"].toObject(), vocab = model["vocab"].toObject();
        std::map<int, std::pair<std::string, int>> byId;  // id -> (token, type)
        for (auto it = vocab.begin(); it != vocab.end(); ++it) byId[it.value().toInt()] = {it.key().toStdString(), 1};
        for (const auto& a : tok["added_tokens"].toArray()) {
            const auto o = a.toObject();
            byId[o["id"].toInt()] = {o["content"].toString().toStdString(), o["special"].toBool() ? 3 : 4};
        }
        std::vector<std::string> tokens;
        std::vector<std::int32_t> types;
        std::map<std::string, int> idOf;
        for (const auto& [id, t] : byId) {
            while (static_cast<int>(tokens.size()) < id) {  // llama.cpp fills holes with unused tokens
                tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
                types.push_back(5);
            }
            idOf[t.first] = id;
            tokens.push_back(t.first);
            types.push_back(t.second);
        }
        while (static_cast<int>(tokens.size()) < cfg("vocab_size")) {
            tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
            types.push_back(5);
        }
        std::vector<std::string> merges;
        for (const auto& m : model["merges"].toArray())
            merges.push_back(m.isArray() ? (m.toArray()[0].toString() + " " + m.toArray()[1].toString()).toStdString()
                                         : m.toString().toStdString());
        w_.string("tokenizer.ggml.model", "gpt2");
        // The tiny fixtures' tokenizers split as Qwen2's does (tiny-gpt-oss's too; the release's is o200k,
        // llama.cpp's "gpt-4o").
        w_.string("tokenizer.ggml.pre", !o_.pre.empty() ? o_.pre : arch_ == "deepseek2" ? "deepseek-v3" : "qwen2");
        w_.strings("tokenizer.ggml.tokens", tokens);
        w_.i32s("tokenizer.ggml.token_type", types);
        w_.strings("tokenizer.ggml.merges", merges);
        for (const auto& [jsonKey, ggufKey] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                                               {"eos_token", "tokenizer.ggml.eos_token_id"},
                                               {"pad_token", "tokenizer.ggml.padding_token_id"}})
            if (cfgTok[jsonKey].isString()) w_.u32(ggufKey, static_cast<std::uint32_t>(idOf.at(cfgTok[jsonKey].toString().toStdString())));
        w_.boolean("tokenizer.ggml.add_bos_token", cfgTok["add_bos_token"].toBool());
        if (cfgTok["chat_template"].isString()) w_.string("tokenizer.chat_template", cfgTok["chat_template"].toString().toStdString());
    }

    // HF name -> llama.cpp's (without the experts, which are stacked).
    std::string ggufName(const std::string& hf) const {
        static const std::pair<const char*, const char*> kNames[] = {
            {"input_layernorm", "attn_norm"}, {"post_attention_layernorm", "ffn_norm"},
            {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"},
            {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
            {"self_attn.q_a_proj", "attn_q_a"}, {"self_attn.q_a_layernorm", "attn_q_a_norm"},
            {"self_attn.q_b_proj", "attn_q_b"}, {"self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"},
            {"self_attn.kv_a_layernorm", "attn_kv_a_norm"}, {"self_attn.kv_b_proj", "attn_kv_b"},
            {"mlp.gate", "ffn_gate_inp"}, {"block_sparse_moe.gate", "ffn_gate_inp"}, {"mlp.router", "ffn_gate_inp"},
            {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"}, {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
            {"mlp.shared_experts.down_proj", "ffn_down_shexp"}, {"mlp.gate_proj", "ffn_gate"},
            {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"},
        };
        if (hf == "model.embed_tokens.weight") return "token_embd.weight";
        if (hf == "model.norm.weight") return "output_norm.weight";
        if (hf == "lm_head.weight") return "output.weight";
        static const std::regex sinks(R"(model\.layers\.(\d+)\.self_attn\.sinks)");  // the converter adds .weight
        std::smatch s;
        if (std::regex_match(hf, s, sinks)) return "blk." + s[1].str() + ".attn_sinks.weight";
        static const std::regex layer(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias|e_score_correction_bias))");
        std::smatch m;
        if (!std::regex_match(hf, m, layer)) return {};
        const std::string blk = "blk." + m[1].str() + ".";
        if (m[3] == "e_score_correction_bias") return blk + "exp_probs_b.bias";
        if ((arch_ == "glm4moe" || arch_ == "gpt-oss") && m[2] == "post_attention_layernorm") return blk + "post_attention_norm.weight";
        for (const auto& [from, to] : kNames)
            if (m[2] == from) return blk + to + "." + m[3].str();
        return {};
    }

    void tensor(const std::string& name, std::uint32_t type, std::vector<std::uint64_t> dims, QByteArray data) {
        if (std::find(o_.leaveOut.begin(), o_.leaveOut.end(), name) != o_.leaveOut.end()) return;
        w_.tensor(name, type, std::move(dims), std::move(data));
    }

    void put(const std::string& name, const Floats& f, std::vector<std::uint64_t> dims) {
        std::uint32_t type = kF32;
        const bool router = name.ends_with("ffn_gate_inp.weight");
        if (f.shape.size() >= 2 && dims[0] % static_cast<std::uint64_t>(ggmlBlockValues(o_.matrixType)) == 0 &&
            !(router && o_.floatRouter))
            type = o_.matrixType;
        if (o_.dequantizedAsBf16 && type != kF32) {
            const QByteArray blocks = quantize(type, f.values);
            std::vector<float> values(f.values.size());
            io::dequantizeBlocks(*io::ggmlType(type)->dtype, reinterpret_cast<const std::byte*>(blocks.data()),
                                 static_cast<std::int64_t>(values.size()), values.data());
            tensor(name, kBF16, std::move(dims), quantize(kBF16, values));
            return;
        }
        tensor(name, type, std::move(dims), quantize(type, f.values));
    }
    void put(const std::string& name, const Floats& f) {
        put(name, f, {f.shape.rbegin(), f.shape.rend()});
    }

    void tensors() {
        const int layers = cfg("num_hidden_layers");
        const bool llama = arch_ == "llama";
        static const std::regex expert(R"(model\.layers\.(\d+)\.(mlp|block_sparse_moe)\.experts\.(\d+)\.(\w+)\.weight)");
        std::map<std::string, std::map<int, Floats>> stacks;  // gguf name -> expert -> weights
        for (const auto& stored : ckpt_.tensorNames()) {
            if (stored.ends_with("_scale_inv") || stored.ends_with(".weight_scale") || stored.ends_with(".weight_shape")) continue;
            if (stored.find(".mlp.experts.") != std::string::npos && arch_ == "gpt-oss") continue;  // gptOssExperts
            // compressed-tensors int4 (tiny-kimi-k2-int4): X.weight_packed is X.weight, read dequantized
            const std::string name = stored.ends_with(".weight_packed") ? stored.substr(0, stored.size() - 7) : stored;
            std::smatch m;
            if (std::regex_match(name, m, std::regex(R"(model\.layers\.(\d+)\..*)")) && std::stoi(m[1].str()) >= layers) {
                if (name.ends_with(".eh_proj.weight"))  // one MTP tensor, which an importer must skip
                    put("blk." + m[1].str() + ".nextn.eh_proj.weight", readFloats(ckpt_, name));
                continue;
            }
            if (std::regex_match(name, m, expert)) {
                const std::string w = m[4].str();
                const char* kind = w == "gate_proj" || w == "w1" ? "gate" : w == "up_proj" || w == "w3" ? "up" : "down";
                stacks["blk." + m[1].str() + ".ffn_" + kind + "_exps.weight"][std::stoi(m[3].str())] = readFloats(ckpt_, stored);
                continue;
            }
            Floats f = readFloats(ckpt_, stored);
            const std::string g = ggufName(name);
            if (g.empty()) throw std::runtime_error("no GGUF name for " + name);
            if (llama && g.ends_with("attn_q.weight")) f = permuteHeads(f, cfg("num_attention_heads"));
            if (llama && g.ends_with("attn_k.weight")) f = permuteHeads(f, cfg("num_key_value_heads"));
            if (o_.splitKvB && g.ends_with("attn_kv_b.weight")) splitKvB(g, f);
            else put(g, f);
        }
        if (arch_ == "gpt-oss")
            for (int l = 0; l < layers; ++l) gptOssExperts(l);
        for (const auto& [name, experts] : stacks) {
            Floats all{{static_cast<std::int64_t>(experts.size()), experts.begin()->second.shape[0], experts.begin()->second.shape[1]}, {}};
            for (const auto& [e, f] : experts) all.values.insert(all.values.end(), f.values.begin(), f.values.end());
            put(name, all);
        }
    }

    // gpt-oss's experts as llama.cpp's converter writes them from the release: gate_up_proj's interleaved rows
    // (2i gate, 2i + 1 up) apart into ffn_gate_exps and ffn_up_exps [n_embd, n_ff, n_expert], down_proj into
    // ffn_down_exps [n_ff, n_embd, n_expert], each MXFP4 (ggml type 39) re-blocked from the release's blocks and
    // scales: a block is the E8M0 byte, then 16 bytes with value j in the low nibble of byte j and j + 16 in
    // the high one (the release: value 2b low and 2b + 1 high in byte b). The biases are split the same way,
    // F32. With dequantizedAsBf16 the experts are written as BF16 of the same values (exact: an MXFP4 value has
    // at most two significant bits).
    void gptOssExperts(int layer) {
        const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.", blk = "blk." + std::to_string(layer) + ".";
        const auto bytesOf = [&](const std::string& name) {
            const auto t = ckpt_.get(name);
            return std::pair{reinterpret_cast<const std::uint8_t*>(t.data.data()), t.info->shape};
        };
        const auto [gateUp, gateUpShape] = bytesOf(p + "gate_up_proj_blocks");
        const std::uint8_t* gateUpScales = bytesOf(p + "gate_up_proj_scales").first;
        const std::uint8_t* down = bytesOf(p + "down_proj_blocks").first;
        const std::uint8_t* downScales = bytesOf(p + "down_proj_scales").first;
        const std::int64_t experts = gateUpShape[0], inter = gateUpShape[1] / 2, hidden = gateUpShape[2] * 32;
        // Rows [first, first + step * count) by `step` of each expert, as one stacked MXFP4 tensor.
        const auto write = [&](const std::string& name, const std::uint8_t* blocks, const std::uint8_t* scales, std::int64_t rowsPerExpert,
                               std::int64_t first, std::int64_t step, std::int64_t rows, std::int64_t cols) {
            QByteArray out;
            std::vector<float> values;
            for (std::int64_t e = 0; e < experts; ++e)
                for (std::int64_t r = 0; r < rows; ++r) {
                    const std::int64_t row = e * rowsPerExpert + first + step * r;
                    for (std::int64_t g = 0; g < cols / 32; ++g) {
                        const std::uint8_t* hf = blocks + (row * (cols / 32) + g) * 16;
                        const std::uint8_t e8m0 = scales[row * (cols / 32) + g];
                        std::uint8_t codes[32];
                        for (int b = 0; b < 16; ++b) {
                            codes[2 * b] = hf[b] & 0xf;
                            codes[2 * b + 1] = hf[b] >> 4;
                        }
                        out.append(static_cast<char>(e8m0));
                        for (int j = 0; j < 16; ++j) out.append(static_cast<char>(codes[j] | codes[j + 16] << 4));
                        for (const std::uint8_t c : codes) values.push_back(io::kE2M1Values[c] * io::e8m0ToFloat(e8m0));
                    }
                }
            const std::vector<std::uint64_t> dims = {static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows),
                                                     static_cast<std::uint64_t>(experts)};
            if (o_.dequantizedAsBf16) tensor(name, kBF16, dims, quantize(kBF16, values));
            else tensor(name, kMXFP4, dims, out);
        };
        write(blk + "ffn_gate_exps.weight", gateUp, gateUpScales, 2 * inter, 0, 2, inter, hidden);
        write(blk + "ffn_up_exps.weight", gateUp, gateUpScales, 2 * inter, 1, 2, inter, hidden);
        write(blk + "ffn_down_exps.weight", down, downScales, hidden, 0, 1, hidden, inter);
        const Floats gateUpBias = readFloats(ckpt_, p + "gate_up_proj_bias"), downBias = readFloats(ckpt_, p + "down_proj_bias");
        for (const int half : {0, 1}) {
            std::vector<float> v;
            for (std::size_t i = static_cast<std::size_t>(half); i < gateUpBias.values.size(); i += 2) v.push_back(gateUpBias.values[i]);
            tensor(blk + (half ? "ffn_up_exps.bias" : "ffn_gate_exps.bias"), kF32,
                      {static_cast<std::uint64_t>(inter), static_cast<std::uint64_t>(experts)}, quantize(kF32, v));
        }
        tensor(blk + "ffn_down_exps.bias", kF32, {static_cast<std::uint64_t>(hidden), static_cast<std::uint64_t>(experts)},
                  quantize(kF32, downBias.values));
    }

    // kv_b [heads * (nope + v), lora] -> attn_k_b [heads, lora, nope] (transposed) + attn_v_b [heads, v, lora].
    void splitKvB(const std::string& kvName, const Floats& f) {
        const std::int64_t heads = cfg("num_attention_heads"), nope = cfg("qk_nope_head_dim"), v = cfg("v_head_dim"), lora = cfg("kv_lora_rank");
        Floats k{{heads, lora, nope}, {}}, vb{{heads, v, lora}, {}};
        for (std::int64_t h = 0; h < heads; ++h) {
            for (std::int64_t c = 0; c < lora; ++c)
                for (std::int64_t d = 0; d < nope; ++d) k.values.push_back(f.values[static_cast<std::size_t>((h * (nope + v) + d) * lora + c)]);
            for (std::int64_t j = 0; j < v; ++j)
                for (std::int64_t c = 0; c < lora; ++c) vb.values.push_back(f.values[static_cast<std::size_t>((h * (nope + v) + nope + j) * lora + c)]);
        }
        const std::string blk = kvName.substr(0, kvName.size() - std::string("attn_kv_b.weight").size());
        put(blk + "attn_k_b.weight", k);
        put(blk + "attn_v_b.weight", vb);
    }

    QString dir_;
    GgufFixtureOptions o_;
    QJsonObject config_;
    io::Checkpoint ckpt_;
    std::string arch_;
    GgufWriter w_;
};

}  // namespace

QStringList ggufFixtureNames() {
    QStringList names;
    for (const QString& f : fixtureNames()) names << f;
    return names;
}

GgufWriter ggufFromFixture(const QString& fixture, const GgufFixtureOptions& options) {
    return Builder(fixture, options).build();
}

}  // namespace tandem::test
