#include "model/weights.h"

#include <cmath>
#include <cstring>
#include <string>

#include "cpu/dense/quantize_dense.h"
#include "io/compressed_tensors.h"
#include "io/gguf_quant.h"
#include "model/family.h"
#include "tandem/error.h"

namespace tandem::model {

namespace {

std::string shapeString(const std::vector<std::int64_t>& s) {
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

class Loader {
public:
    Loader(const io::TensorLookup& ckpt, const ModelConfig& config, ModelWeights& out)
        : ckpt_(ckpt), config_(config), out_(out) {}

    WeightMatrix matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
        if (io::isPackedInt4(ckpt_, name)) return packedInt4(name, rows, cols);
        const io::TensorView t = ckpt_.view(name);
        const auto type = t.dtype;
        if (type != io::DType::F32 && type != io::DType::F16 && type != io::DType::BF16 && type != io::DType::F8_E4M3 &&
            type != io::DType::I8 && !io::isBlockQuantized(type))
            throw Error(t.source + " has type " + std::string(io::dtypeName(type)) +
                        "; a weight matrix must be F32, F16, BF16, F8_E4M3, I8 (with row scales) or a GGUF quantized type");
        expectShape(t, {rows, cols});
        WeightMatrix m;
        m.dtype = type;
        m.rows = rows;
        m.cols = cols;
        m.data = t.data;
        if (type == io::DType::F8_E4M3) attachBlockScales(name, m);
        if (type == io::DType::I8) attachRowScales(name, m);
        return m;
    }

    // n values, of shape {n} unless `shape` says otherwise.
    std::vector<float> vector(const std::string& name, std::int64_t n, std::vector<std::int64_t> shape = {}) {
        const io::TensorView t = ckpt_.view(name);
        const auto type = t.dtype;
        // A GGUF may quantize a 2-D one (gpt-oss's expert biases [E, I]) when its rows fit the blocks.
        const bool blocks = io::isBlockQuantized(type) && type != io::DType::E2M1 && type != io::DType::I4 && !t.shape.empty() &&
                            t.shape.back() % static_cast<std::int64_t>(io::dtypeBlockValues(type)) == 0;
        if (type != io::DType::F32 && type != io::DType::F16 && type != io::DType::BF16 && !blocks)
            throw Error(t.source + " has type " + std::string(io::dtypeName(type)) + "; expected F32, F16 or BF16");
        expectShape(t, shape.empty() ? std::vector<std::int64_t>{n} : shape);
        std::vector<float> v(static_cast<std::size_t>(n));
        const std::size_t size = io::dtypeSize(type);
        if (blocks) io::dequantizeBlocks(type, t.data, n, v.data());
        else
            for (std::int64_t i = 0; i < n; ++i) v[i] = io::loadAsFloat(type, t.data + i * size);
        expectFinite(v, t.source);
        return v;
    }

    // A tensor of one type and shape, as it lies.
    io::TensorView raw(const std::string& name, io::DType type, const std::vector<std::int64_t>& shape) {
        const io::TensorView t = ckpt_.view(name);
        if (t.dtype != type)
            throw Error(t.source + " has type " + std::string(io::dtypeName(t.dtype)) + "; expected " +
                        std::string(io::dtypeName(type)));
        expectShape(t, shape);
        return t;
    }

    std::string describe() const { return ckpt_.describe(); }
    bool has(const std::string& name) const { return ckpt_.has(name); }

    // The router's few rows are read whole at load (cheap), so a damaged one is named now rather than
    // routing every token by NaN.
    WeightMatrix checkedMatrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
        WeightMatrix m = matrix(name, rows, cols);
        const std::string source = ckpt_.view(name).source;
        std::vector<float> row(static_cast<std::size_t>(cols));
        for (std::int64_t r = 0; r < rows; ++r) {
            m.dequantRow(r, row.data());
            expectFinite(row, source);
        }
        return m;
    }

    MlpWeights mlp(const std::string& prefix, std::int64_t inner, std::string_view gate, std::string_view up,
                   std::string_view down) {
        const std::int64_t hidden = config_.hiddenSize;
        const auto name = [&](std::string_view m) { return prefix + std::string(m) + ".weight"; };
        return {matrix(name(gate), inner, hidden), matrix(name(up), inner, hidden), matrix(name(down), hidden, inner)};
    }

private:
    // A routed expert's matrix as compressed-tensors int4 (io/compressed_tensors.h), viewed in place.
    WeightMatrix packedInt4(const std::string& name, std::int64_t rows, std::int64_t cols) {
        const std::string where = "'" + name + "' in " + ckpt_.describe();
        if (config_.packedInt4Group == 0)
            throw Error(where + " is stored as compressed-tensors int4 (" + io::packedInt4Name(name, "packed") +
                        "), but config.json has no compressed-tensors quantization_config; the checkpoint does not "
                        "match its config");
        const std::string routed = "." + std::string(config_.family->experts.section) + ".experts.";
        if (name.find(routed) == std::string::npos)
            throw Error(where + " is compressed-tensors int4; Tandem reads int4 checkpoint weights for the routed "
                                "experts only (the rest must stay unquantized: the config's 'ignore' list)");
        const io::PackedInt4View v = io::viewPackedInt4(ckpt_, name, rows, cols);
        WeightMatrix m;
        m.dtype = io::DType::I4;
        m.rows = rows;
        m.cols = cols;
        m.data = v.packed;
        m.int4Scales = v.scales;
        return m;
    }

    static void expectFinite(const std::vector<float>& values, const std::string& source) {
        for (std::size_t i = 0; i < values.size(); ++i)
            if (!std::isfinite(values[i]))
                throw Error(source + " holds " + (std::isnan(values[i]) ? "NaN" : "an infinite value") + " (value " +
                            std::to_string(i) + "); the file is damaged: download or convert the model again");
    }

    void expectShape(const io::TensorView& t, const std::vector<std::int64_t>& shape) const {
        if (t.shape != shape)
            throw Error(t.source + " has shape " + shapeString(t.shape) + ", expected " + shapeString(shape) +
                        " from the model's configuration");
    }

    void attachBlockScales(const std::string& name, WeightMatrix& m) {
        const std::string scaleName = name + "_scale_inv";
        if (!ckpt_.has(scaleName))
            throw Error("FP8 weight '" + name + "' in " + ckpt_.describe() + " has no '" + scaleName + "'");
        const io::TensorView s = ckpt_.view(scaleName);
        m.blockRows = config_.fp8BlockRows;
        m.blockCols = config_.fp8BlockCols;
        const std::int64_t sr = (m.rows + m.blockRows - 1) / m.blockRows;
        const std::int64_t sc = (m.cols + m.blockCols - 1) / m.blockCols;
        expectShape(s, {sr, sc});
        if (s.dtype != io::DType::F32 && s.dtype != io::DType::BF16)
            throw Error(s.source + " has type " + std::string(io::dtypeName(s.dtype)) + "; expected F32");
        auto& scales = out_.scaleStore.emplace_back(static_cast<std::size_t>(sr * sc));
        const std::size_t size = io::dtypeSize(s.dtype);
        for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = io::loadAsFloat(s.dtype, s.data + i * size);
        expectFinite(scales, s.source);
        m.blockScales = scales.data();
        m.scaleCols = sc;
    }

    // An int8 dense product of a store written by convert --dense int8 (quantize_dense.h).
    void attachRowScales(const std::string& name, WeightMatrix& m) {
        const std::string scaleName = name + kRowScaleSuffix;
        if (!ckpt_.has(scaleName))
            throw Error("int8 weight '" + name + "' in " + ckpt_.describe() + " has no '" + scaleName +
                        "'; the store is damaged: convert the model again");
        const io::TensorView s = ckpt_.view(scaleName);
        expectShape(s, {m.rows});
        if (s.dtype != io::DType::F32) throw Error(s.source + " has type " + std::string(io::dtypeName(s.dtype)) + "; expected F32");
        auto& scales = out_.scaleStore.emplace_back(static_cast<std::size_t>(m.rows));
        std::memcpy(scales.data(), s.data, scales.size() * sizeof(float));
        for (std::size_t r = 0; r < scales.size(); ++r)
            if (!(scales[r] >= 0.0f) || !std::isfinite(scales[r]))
                throw Error(s.source + " holds a scale that is negative, NaN or infinite (row " + std::to_string(r) +
                            "); the store is damaged: convert the model again");
        m.rowScales = scales.data();
    }

    const io::TensorLookup& ckpt_;
    const ModelConfig& config_;
    ModelWeights& out_;
};

void loadGqa(Loader& l, const ModelConfig& c, const std::string& p, GqaWeights& w) {
    const std::int64_t h = c.hiddenSize;
    const std::int64_t qDim = static_cast<std::int64_t>(c.numHeads) * c.headDim;
    const std::int64_t kvDim = static_cast<std::int64_t>(c.numKvHeads) * c.headDim;
    w.q = l.matrix(p + "self_attn.q_proj.weight", qDim, h);
    w.k = l.matrix(p + "self_attn.k_proj.weight", kvDim, h);
    w.v = l.matrix(p + "self_attn.v_proj.weight", kvDim, h);
    w.o = l.matrix(p + "self_attn.o_proj.weight", h, qDim);
    if (c.qkNorm) {
        w.qNorm = l.vector(p + "self_attn.q_norm.weight", c.headDim);
        w.kNorm = l.vector(p + "self_attn.k_norm.weight", c.headDim);
    }
    if (c.attentionBias) {
        w.qBias = l.vector(p + "self_attn.q_proj.bias", qDim);
        w.kBias = l.vector(p + "self_attn.k_proj.bias", kvDim);
        w.vBias = l.vector(p + "self_attn.v_proj.bias", kvDim);
    }
    if (c.attentionOutputBias) w.oBias = l.vector(p + "self_attn.o_proj.bias", h);
    if (c.attentionSinks) w.sinks = l.vector(p + "self_attn.sinks", c.numHeads);
}

// gpt-oss's routed experts, from either of two layouts.
// The release's (Hugging Face): per layer, gate_up_proj_blocks [E, 2I, H/32, 16] and gate_up_proj_scales
// [E, 2I, H/32] (row 2i gate row i, row 2i + 1 up row i), down_proj_blocks [E, H, I/32, 16] and
// down_proj_scales [E, H, I/32], viewed in place per expert (E2M1 matrices with their E8M0 scales); the
// biases gate_up_proj_bias [E, 2I] (interleaved the same way) and down_proj_bias [E, H].
// llama.cpp's (a GGUF through model/gguf_tensors.h, or a store converted from one): one matrix per expert,
// experts.E.{gate,up,down}_proj.weight of any type (GGUF's MXFP4 blocks among them), and the biases apart:
// gate_proj_bias and up_proj_bias [E, I], down_proj_bias [E, H].
bool hasSplitGptOssBiases(Loader& l, const std::string& moe) {
    const bool gate = l.has(moe + "experts.gate_proj_bias"), up = l.has(moe + "experts.up_proj_bias");
    if (gate != up)
        throw Error(l.describe() + ": '" + moe + "experts." + (gate ? "up" : "gate") + "_proj_bias' is missing beside '" +
                    moe + "experts." + (gate ? "gate" : "up") + "_proj_bias'; the model is incomplete");
    return gate;
}

void loadGptOssExperts(Loader& l, const ModelConfig& c, const std::string& moe, MoeWeights& m, bool routedExperts) {
    const std::int64_t experts = c.numExperts, hidden = c.hiddenSize, inter = c.moeIntermediateSize;
    const bool split = hasSplitGptOssBiases(l, moe);
    if (!split && !l.has(moe + "experts.gate_up_proj_bias"))
        throw Error(l.describe() + ": gpt-oss's expert biases are missing: neither '" + moe +
                    "experts.gate_up_proj_bias' (the Hugging Face release) nor '" + moe +
                    "experts.gate_proj_bias' and 'up_proj_bias' (llama.cpp's ffn_gate_exps.bias, ffn_up_exps.bias)");
    m.downBias = l.vector(moe + "experts.down_proj_bias", experts * hidden, {experts, hidden});
    if (split) {
        m.gateBias = l.vector(moe + "experts.gate_proj_bias", experts * inter, {experts, inter});
        m.upBias = l.vector(moe + "experts.up_proj_bias", experts * inter, {experts, inter});
    } else {
        const std::vector<float> gateUpBias = l.vector(moe + "experts.gate_up_proj_bias", experts * 2 * inter, {experts, 2 * inter});
        m.gateBias.resize(static_cast<std::size_t>(experts * inter));
        m.upBias.resize(m.gateBias.size());
        for (std::int64_t i = 0; i < experts * inter; ++i) {
            m.gateBias[static_cast<std::size_t>(i)] = gateUpBias[static_cast<std::size_t>(2 * i)];
            m.upBias[static_cast<std::size_t>(i)] = gateUpBias[static_cast<std::size_t>(2 * i + 1)];
        }
    }
    if (!routedExperts) return;
    if (l.has(moe + "experts.0.gate_proj.weight")) {  // one matrix per expert (llama.cpp's layout)
        if (!split)
            throw Error(l.describe() + ": gpt-oss's experts are stored one matrix per expert, but their gate and up biases "
                        "are fused (experts.gate_up_proj_bias); the layouts do not mix");
        m.experts.reserve(static_cast<std::size_t>(experts));
        for (std::int64_t e = 0; e < experts; ++e)
            m.experts.push_back(l.mlp(moe + "experts." + std::to_string(e) + ".", inter, "gate_proj", "up_proj", "down_proj"));
        return;
    }
    if (!c.mxfp4Experts)
        throw Error(l.describe() + ": gpt-oss with unquantized experts (experts.gate_up_proj) is not supported; "
                    "use the release's MXFP4 checkpoint (quantization_config mxfp4)");
    if (hidden % 32 || inter % 32)
        throw Error(l.describe() + ": gpt-oss's MXFP4 experts need hidden_size and intermediate_size to be multiples of 32");
    const auto fused = [&](const std::string& name, std::int64_t rows, std::int64_t cols) {
        const io::TensorView blocks = l.raw(name + "_blocks", io::DType::U8, {experts, rows, cols / 32, 16});
        const io::TensorView scales = l.raw(name + "_scales", io::DType::U8, {experts, rows, cols / 32});
        return std::pair{blocks.data, reinterpret_cast<const std::uint8_t*>(scales.data)};
    };
    const auto [gateUp, gateUpScales] = fused(moe + "experts.gate_up_proj", 2 * inter, hidden);
    const auto [down, downScales] = fused(moe + "experts.down_proj", hidden, inter);
    const auto view = [](std::int64_t rows, std::int64_t cols, const std::byte* data, const std::uint8_t* scales, std::int64_t stride) {
        WeightMatrix w;
        w.dtype = io::DType::E2M1;
        w.rows = rows;
        w.cols = cols;
        w.data = data;
        w.e8m0 = scales;
        w.rowStride = stride;
        return w;
    };
    m.experts.reserve(static_cast<std::size_t>(experts));
    for (std::int64_t e = 0; e < experts; ++e) {
        const std::int64_t g = e * 2 * inter;  // the expert's first gate/up row
        m.experts.push_back({view(inter, hidden, gateUp + g * hidden / 2, gateUpScales + g * hidden / 32, 2),
                             view(inter, hidden, gateUp + (g + 1) * hidden / 2, gateUpScales + (g + 1) * hidden / 32, 2),
                             view(hidden, inter, down + e * hidden * inter / 2, downScales + e * hidden * inter / 32, 1)});
    }
}

void loadMla(Loader& l, const ModelConfig& c, const std::string& p, MlaWeights& w) {
    const std::int64_t h = c.hiddenSize;
    const std::int64_t qHead = c.qkNopeHeadDim + c.qkRopeHeadDim;
    const std::int64_t heads = c.numHeads;
    if (c.qLoraRank > 0) {
        w.qA = l.matrix(p + "self_attn.q_a_proj.weight", c.qLoraRank, h);
        w.qANorm = l.vector(p + "self_attn.q_a_layernorm.weight", c.qLoraRank);
        w.q = l.matrix(p + "self_attn.q_b_proj.weight", heads * qHead, c.qLoraRank);
    } else {
        w.q = l.matrix(p + "self_attn.q_proj.weight", heads * qHead, h);
    }
    w.kvA = l.matrix(p + "self_attn.kv_a_proj_with_mqa.weight", c.kvLoraRank + c.qkRopeHeadDim, h);
    w.kvANorm = l.vector(p + "self_attn.kv_a_layernorm.weight", c.kvLoraRank);
    w.kvB = l.matrix(p + "self_attn.kv_b_proj.weight", heads * (c.qkNopeHeadDim + c.vHeadDim), c.kvLoraRank);
    w.o = l.matrix(p + "self_attn.o_proj.weight", h, heads * c.vHeadDim);
}

void loadFeedForward(Loader& l, const ModelConfig& c, int layer, const std::string& p, LayerWeights& w,
                     bool routedExperts) {
    const ExpertTensorNames& names = c.family->experts;
    if (!c.isMoeLayer(layer)) {
        w.dense = l.mlp(p + "mlp.", c.intermediateSize, "gate_proj", "up_proj", "down_proj");
        return;
    }
    const std::string moe = p + std::string(names.section) + ".";
    MoeWeights& m = w.moe.emplace();
    const std::string router = moe + std::string(names.router) + ".";
    m.router = l.checkedMatrix(router + "weight", c.numExperts, c.hiddenSize);
    if (c.router.hasCorrectionBias) m.correctionBias = l.vector(router + "e_score_correction_bias", c.numExperts);
    if (c.routerBias) m.routerBias = l.vector(router + "bias", c.numExperts);
    m.activation = c.expertActivation;
    m.swigluAlpha = c.swigluAlpha;
    m.swigluLimit = c.swigluLimit;
    if (c.expertBiases) return loadGptOssExperts(l, c, moe, m, routedExperts);
    m.experts.reserve(static_cast<std::size_t>(c.numExperts));
    for (int e = 0; routedExperts && e < c.numExperts; ++e) {
        const std::string ep = moe + "experts." + std::to_string(e) + ".";
        m.experts.push_back(l.mlp(ep, c.moeIntermediateSize, names.gate, names.up, names.down));
    }
    if (c.numSharedExperts > 0)
        m.shared = l.mlp(moe + "shared_experts.", static_cast<std::int64_t>(c.moeIntermediateSize) * c.numSharedExperts,
                         "gate_proj", "up_proj", "down_proj");
}

}  // namespace

ModelWeights loadWeights(const io::TensorLookup& ckpt, const ModelConfig& c, bool routedExperts) {
    ModelWeights w;
    Loader l(ckpt, c, w);
    w.embed = l.matrix("model.embed_tokens.weight", c.vocabSize, c.hiddenSize);
    w.lmHead = c.tieWordEmbeddings ? w.embed : l.matrix("lm_head.weight", c.vocabSize, c.hiddenSize);
    w.finalNorm = l.vector("model.norm.weight", c.hiddenSize);
    w.layers.resize(static_cast<std::size_t>(c.numLayers));
    for (int i = 0; i < c.numLayers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        LayerWeights& lw = w.layers[static_cast<std::size_t>(i)];
        lw.inputNorm = l.vector(p + "input_layernorm.weight", c.hiddenSize);
        lw.postAttentionNorm = l.vector(p + "post_attention_layernorm.weight", c.hiddenSize);
        if (c.attention == AttentionKind::Mla) loadMla(l, c, p, lw.mla);
        else loadGqa(l, c, p, lw.gqa);
        loadFeedForward(l, c, i, p, lw, routedExperts);
    }
    return w;
}

void forEachDenseProduct(ModelWeights& w, const ModelConfig& c,
                         const std::function<void(const std::string& name, WeightMatrix& matrix)>& fn) {
    const auto each = [&](const std::string& name, WeightMatrix& m) {
        if (m.data) fn(name, m);
    };
    const auto mlp = [&](const std::string& prefix, MlpWeights& m) {
        each(prefix + "gate_proj.weight", m.gate);
        each(prefix + "up_proj.weight", m.up);
        each(prefix + "down_proj.weight", m.down);
    };
    for (std::size_t i = 0; i < w.layers.size(); ++i) {
        LayerWeights& l = w.layers[i];
        const std::string p = "model.layers." + std::to_string(i) + ".";
        const std::string a = p + "self_attn.";
        if (c.attention == AttentionKind::Mla) {
            if (l.mla.qA) each(a + "q_a_proj.weight", *l.mla.qA);
            each(a + (l.mla.qA ? "q_b_proj.weight" : "q_proj.weight"), l.mla.q);
            each(a + "kv_a_proj_with_mqa.weight", l.mla.kvA);
            each(a + "o_proj.weight", l.mla.o);
        } else {
            each(a + "q_proj.weight", l.gqa.q);
            each(a + "k_proj.weight", l.gqa.k);
            each(a + "v_proj.weight", l.gqa.v);
            each(a + "o_proj.weight", l.gqa.o);
        }
        if (l.dense) mlp(p + "mlp.", *l.dense);
        if (l.moe && l.moe->shared) mlp(p + std::string(c.family->experts.section) + ".shared_experts.", *l.moe->shared);
    }
    each(c.tieWordEmbeddings ? std::string() : std::string("lm_head.weight"), w.lmHead);
}

void packDenseInt4(ModelWeights& w, const ModelConfig& c, cpu::ThreadPool& pool) {
    forEachDenseProduct(w, c, [&](const std::string&, WeightMatrix& m) {
        if (m.packed) return;
        m.packed = w.packedStore.emplace_back(std::make_shared<const cpu::PackedMatrix>(io::ExpertType::INT4, m, pool)).get();
    });
}

void quantizeDenseInt8(ModelWeights& w, const ModelConfig& c, cpu::ThreadPool& pool, bool keepFp8) {
    forEachDenseProduct(w, c, [&](const std::string&, WeightMatrix& m) {
        if (m.dtype == io::DType::I8 || (keepFp8 && m.dtype == io::DType::F8_E4M3)) return;
        m = cpu::quantizeRowsInt8(m, w.int8Store.emplace_back(), w.scaleStore.emplace_back(), pool);
    });
}

}  // namespace tandem::model
