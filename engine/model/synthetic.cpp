#include "model/synthetic.h"

#include <algorithm>
#include <cmath>

#include "io/dtype.h"
#include "model/family.h"
#include "tandem/error.h"

namespace tandem::model {

namespace {

// Random weights must be quick to make (tens of billions of them for a benchmark) and need no quality
// beyond "not structured": a splitmix64 hash of the position, spread uniformly with standard deviation
// 0.02 (as the normal initialization of trained-from-scratch models).
inline float randomWeight(std::uint64_t key) {
    key += 0x9e3779b97f4a7c15ull;
    key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ull;
    key = (key ^ (key >> 27)) * 0x94d049bb133111ebull;
    key ^= key >> 31;
    constexpr float kHalfWidth = 0.02f * 1.7320508f;  // uniform on [-a, a] has std a / sqrt(3)
    return (static_cast<float>(key >> 40) * (2.0f / 16777216.0f) - 1.0f) * kHalfWidth;
}

ModelConfig deepseekBase() {
    ModelConfig c;
    c.attention = AttentionKind::Mla;
    c.ropeInterleaved = true;
    c.rmsNormEps = 1e-6f;
    c.ropeTheta = 10000;
    c.maxPositionEmbeddings = 163840;
    c.yarn = YarnScaling{40, 32, 1, 1.0, 1.0, 4096.0, std::nullopt};
    c.qkNopeHeadDim = 128;
    c.qkRopeHeadDim = 64;
    c.vHeadDim = 128;
    c.kvLoraRank = 512;
    return c;
}

}  // namespace

std::vector<std::string> syntheticModelNames() {
    return {"deepseek-v2-lite", "qwen3-30b-a3b", "qwen3-30b-a3b-128k", "deepseek-v3-4l", "glm-4.5-air", "gpt-oss-120b", "tiny"};
}

ModelConfig syntheticConfig(const std::string& name) {
    // "SHAPE-Nl": the shape's first N layers (a quicker benchmark of the same per-layer work; the decode
    // ceiling counts the routed bytes of the layers there are). Exact names come first (deepseek-v3-4l).
    const auto names = syntheticModelNames();
    if (std::find(names.begin(), names.end(), name) == names.end() && name.size() > 3 && name.back() == 'l') {
        const std::size_t dash = name.rfind('-');
        const std::string digits = dash == std::string::npos ? "" : name.substr(dash + 1, name.size() - dash - 2);
        if (!digits.empty() && digits.size() < 4 && std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
            ModelConfig c = syntheticConfig(name.substr(0, dash));
            const int n = std::stoi(digits);
            if (n < 1 || n > c.numLayers)
                throw Error("synthetic model '" + name + "': " + name.substr(0, dash) + " has 1 to " +
                            std::to_string(c.numLayers) + " layers");
            c.numLayers = n;
            if (!c.slidingLayers.empty()) c.slidingLayers.resize(static_cast<std::size_t>(n));
            c.firstKDenseReplace = std::min(c.firstKDenseReplace, n);
            planLayers(c);
            return c;
        }
    }
    ModelConfig c;
    if (name == "deepseek-v2-lite") {
        c = deepseekBase();
        c.modelType = "deepseek_v2";
        c.family = findFamily("deepseek_v2");
        c.yarn->mscale = c.yarn->mscaleAllDim = 0.707;
        c.vocabSize = 102400;
        c.hiddenSize = 2048;
        c.numLayers = 27;
        c.numHeads = c.numKvHeads = 16;
        c.intermediateSize = 10944;
        c.numExperts = 64;
        c.moeIntermediateSize = 1408;
        c.numSharedExperts = 2;
        c.firstKDenseReplace = 1;
        c.router = RouterSpec{ExpertScoring::Softmax, ExpertSelection::TopK, 6, 1, 1, false, 1.0f, false};
    } else if (name == "deepseek-v3-4l") {
        c = deepseekBase();
        c.modelType = "deepseek_v3";
        c.family = findFamily("deepseek_v3");
        c.vocabSize = 129280;
        c.hiddenSize = 7168;
        c.numLayers = 4;
        c.numHeads = c.numKvHeads = 128;
        c.qLoraRank = 1536;
        c.intermediateSize = 18432;
        c.numExperts = 256;
        c.moeIntermediateSize = 2048;
        c.numSharedExperts = 1;
        c.firstKDenseReplace = 1;
        c.router = RouterSpec{ExpertScoring::Sigmoid, ExpertSelection::GroupLimitedByTop2, 8, 8, 4, true, 2.5f, true};
    } else if (name == "glm-4.5-air") {
        // GLM-4.5-Air's config.json: GQA with biases and half-width rotary, DeepSeek-V3's router.
        c.modelType = "glm4_moe";
        c.family = findFamily("glm4_moe");
        c.attentionBias = true;
        c.rmsNormEps = 1e-5f;
        c.ropeTheta = 1e6;
        c.maxPositionEmbeddings = 131072;
        c.vocabSize = 151552;
        c.hiddenSize = 4096;
        c.numLayers = 46;
        c.numHeads = 96;
        c.numKvHeads = 8;
        c.headDim = 128;
        c.rotaryDim = 64;
        c.intermediateSize = 10944;
        c.numExperts = 128;
        c.moeIntermediateSize = 1408;
        c.numSharedExperts = 1;
        c.firstKDenseReplace = 1;
        c.router = RouterSpec{ExpertScoring::Sigmoid, ExpertSelection::GroupLimitedByTop2, 8, 1, 1, true, 1.0f, true};
    } else if (name == "gpt-oss-120b") {
        // openai/gpt-oss-120b's config.json: 64/8 heads of 64 with biases and sinks, sliding (128) and full
        // layers alternating, YaRN 32x over 4096; 128 experts of 2880 with biases, top-4.
        c.modelType = "gpt_oss";
        c.family = findFamily("gpt_oss");
        c.attentionBias = c.attentionOutputBias = c.attentionSinks = true;
        c.rmsNormEps = 1e-5f;
        c.ropeTheta = 150000;
        c.maxPositionEmbeddings = 131072;
        YarnScaling y;
        y.factor = 32;
        y.originalMaxPositions = 4096;
        y.truncate = false;
        c.yarn = y;
        c.vocabSize = 201088;
        c.hiddenSize = 2880;
        c.numLayers = 36;
        c.numHeads = 64;
        c.numKvHeads = 8;
        c.headDim = 64;
        c.slidingWindow = 128;
        for (int l = 0; l < c.numLayers; ++l) c.slidingLayers.push_back(l % 2 == 0);
        c.numExperts = 128;
        c.moeIntermediateSize = c.intermediateSize = 2880;
        c.router = RouterSpec{ExpertScoring::Softmax, ExpertSelection::TopK, 4, 1, 1, true, 1.0f, false};
        c.routerBias = c.expertBiases = true;
        c.expertActivation = ExpertActivation::ClampedSwiglu;
    } else if (name == "qwen3-30b-a3b" || name == "qwen3-30b-a3b-128k" || name == "tiny") {
        const bool tiny = name == "tiny";
        c.modelType = "qwen3_moe";
        c.family = findFamily("qwen3_moe");
        c.qkNorm = true;
        c.rmsNormEps = 1e-6f;
        c.ropeTheta = 1e6;
        c.maxPositionEmbeddings = 40960;
        if (name == "qwen3-30b-a3b-128k") {
            // The model card's long-context setting: rope_scaling {"rope_type": "yarn", "factor": 4.0,
            // "original_max_position_embeddings": 32768}, 131072 positions (issue 28's 64K figures).
            YarnScaling y;
            y.factor = 4;
            y.originalMaxPositions = 32768;
            c.yarn = y;
            c.maxPositionEmbeddings = 131072;
        }
        c.vocabSize = tiny ? 512 : 151936;
        c.hiddenSize = tiny ? 64 : 2048;
        c.numLayers = tiny ? 2 : 48;
        c.numHeads = tiny ? 4 : 32;
        c.numKvHeads = tiny ? 2 : 4;
        c.headDim = tiny ? 16 : 128;
        c.intermediateSize = tiny ? 128 : 6144;
        c.numExperts = tiny ? 8 : 128;
        c.moeIntermediateSize = tiny ? 32 : 768;
        c.router = RouterSpec{ExpertScoring::Softmax, ExpertSelection::TopK, tiny ? 2 : 8, 1, 1, true, 1.0f, false};
    } else {
        std::string known;
        for (const auto& n : syntheticModelNames()) known += (known.empty() ? "" : ", ") + n;
        throw Error("unknown synthetic model '" + name + "' (known: " + known + "; NAME-Nl takes the first N layers)");
    }
    planLayers(c);
    return c;
}

SyntheticWeights::SyntheticWeights(const ModelConfig& c, std::uint64_t seed, cpu::ThreadPool& pool)
    : config_(c), pool_(pool), seed_(seed) {
    const std::int64_t H = c.hiddenSize;
    weights_.embed = matrix(c.vocabSize, H);
    weights_.lmHead = matrix(c.vocabSize, H);
    weights_.finalNorm = ones(H);
    weights_.layers.resize(static_cast<std::size_t>(c.numLayers));
    for (int l = 0; l < c.numLayers; ++l) {
        LayerWeights& w = weights_.layers[static_cast<std::size_t>(l)];
        w.inputNorm = ones(H);
        w.postAttentionNorm = ones(H);
        if (c.attention == AttentionKind::Mla) {
            const std::int64_t qHead = c.qkNopeHeadDim + c.qkRopeHeadDim;
            if (c.qLoraRank > 0) {
                w.mla.qA = matrix(c.qLoraRank, H);
                w.mla.qANorm = ones(c.qLoraRank);
                w.mla.q = matrix(c.numHeads * qHead, c.qLoraRank);
            } else {
                w.mla.q = matrix(c.numHeads * qHead, H);
            }
            w.mla.kvA = matrix(c.kvLoraRank + c.qkRopeHeadDim, H);
            w.mla.kvANorm = ones(c.kvLoraRank);
            w.mla.kvB = matrix(static_cast<std::int64_t>(c.numHeads) * (c.qkNopeHeadDim + c.vHeadDim), c.kvLoraRank);
            w.mla.o = matrix(H, static_cast<std::int64_t>(c.numHeads) * c.vHeadDim);
        } else {
            const std::int64_t qDim = static_cast<std::int64_t>(c.numHeads) * c.headDim;
            const std::int64_t kvDim = static_cast<std::int64_t>(c.numKvHeads) * c.headDim;
            w.gqa = {matrix(qDim, H), matrix(kvDim, H), matrix(kvDim, H), matrix(H, qDim), ones(c.headDim), ones(c.headDim)};
            if (c.attentionBias) {
                w.gqa.qBias.assign(static_cast<std::size_t>(qDim), 0.0f);
                w.gqa.kBias.assign(static_cast<std::size_t>(kvDim), 0.0f);
                w.gqa.vBias.assign(static_cast<std::size_t>(kvDim), 0.0f);
            }
            if (c.attentionOutputBias) w.gqa.oBias.assign(static_cast<std::size_t>(H), 0.0f);
            if (c.attentionSinks) w.gqa.sinks.assign(static_cast<std::size_t>(c.numHeads), 0.0f);
        }
        if (!c.isMoeLayer(l)) {
            w.dense = mlp(c.intermediateSize);
            continue;
        }
        MoeWeights& m = w.moe.emplace();
        m.router = matrix(c.numExperts, H);
        if (c.router.hasCorrectionBias) m.correctionBias.assign(static_cast<std::size_t>(c.numExperts), 0.0f);
        if (c.routerBias) m.routerBias.assign(static_cast<std::size_t>(c.numExperts), 0.0f);
        if (c.expertBiases) {  // small biases, so the epilogue's work is what it is in the release
            m.gateBias.assign(static_cast<std::size_t>(c.numExperts) * static_cast<std::size_t>(c.moeIntermediateSize), 0.01f);
            m.upBias = m.gateBias;
            m.downBias.assign(static_cast<std::size_t>(c.numExperts) * static_cast<std::size_t>(H), 0.01f);
        }
        m.activation = c.expertActivation;
        m.swigluAlpha = c.swigluAlpha;
        m.swigluLimit = c.swigluLimit;
        if (c.numSharedExperts > 0) m.shared = mlp(static_cast<std::int64_t>(c.moeIntermediateSize) * c.numSharedExperts);
    }
}

WeightMatrix SyntheticWeights::matrix(std::int64_t rows, std::int64_t cols) {
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    auto& data = storage_.emplace_back(new std::uint16_t[n]);
    std::uint16_t* out = data.get();
    const std::uint64_t stream = seed_ + storage_.size();
    const std::uint64_t base = stream << 40;
    pool_.parallelFor(n, 1 << 16, [&](std::size_t i0, std::size_t i1) {
        for (std::size_t i = i0; i < i1; ++i) out[i] = io::floatToBf16(randomWeight(base + i));
    });
    bytes_ += n * 2;
    WeightMatrix m;
    m.dtype = io::DType::BF16;
    m.rows = rows;
    m.cols = cols;
    m.data = reinterpret_cast<const std::byte*>(out);
    return m;
}

MlpWeights SyntheticWeights::mlp(std::int64_t inner) {
    const std::int64_t H = config_.hiddenSize;
    return {matrix(inner, H), matrix(inner, H), matrix(H, inner)};
}

cpu::ExpertRows randomExpertRows(std::uint64_t seed, int layer, int expert, int hidden, int inter) {
    auto reader = [seed, layer, expert](int matrix, int length) {
        return [=](std::int64_t row, float* out) {
            // Each value is a function of its position, whatever order packExpert asks in.
            const std::uint64_t key = (seed << 56) ^ (static_cast<std::uint64_t>(layer) << 48) ^
                                      (static_cast<std::uint64_t>(expert) << 36) ^ (static_cast<std::uint64_t>(matrix) << 34) ^
                                      (static_cast<std::uint64_t>(row) << 16);
            for (int i = 0; i < length; ++i) out[i] = randomWeight(key + static_cast<std::uint64_t>(i));
        };
    };
    return {reader(0, hidden), reader(1, hidden), reader(2, inter)};
}

}  // namespace tandem::model
