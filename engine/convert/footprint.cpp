// tandem::estimateFootprint: every tensor a config.json implies, counted by where it goes, without
// opening a weight. The tensor list follows model/weights.cpp (what the engine loads) and the checkpoint
// layout of the public releases (DeepSeek-V3's FP8 blocks and MTP layer); the expert files are sized
// with the packed layout itself, so they come out exact.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/expert_budget.h"
#include "cpu/pool/memory_bandwidth.h"
#include "cpu/pool/worker_pool.h"
#include "io/expert_layout.h"
#include "io/text_file.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "convert/expert_precision.h"
#include "convert/layer_footprint.h"
#include "tandem/convert.h"

namespace tandem {

namespace fs = std::filesystem;

namespace {

// A safetensors header spends about this much JSON per tensor (name, dtype, shape, offsets); measured
// on the fixtures and the converter's own output (106-116 bytes).
constexpr std::uint64_t kHeaderBytesPerTensor = 112;

// Parameters, bytes in the checkpoint and tensor count of a group of tensors.
struct Tally {
    std::uint64_t parameters = 0, bytes = 0, tensors = 0;

    Tally& operator+=(const Tally& o) {
        parameters += o.parameters;
        bytes += o.bytes;
        tensors += o.tensors;
        return *this;
    }
    std::uint64_t fileBytes() const { return bytes + tensors * kHeaderBytesPerTensor; }
};

// How the checkpoint stores its tensors: FP8 checkpoints keep every projection matrix as float8 with
// one float32 scale per block; embeddings, norms and routers stay in the model's own type.
struct Storage {
    std::uint64_t elementBytes = 2;  // torch_dtype
    bool fp8 = false;
    bool int8 = false;  // the engine's int8 dense weights: projections and the output head, a float32 scale per row
    // compressed-tensors int4 (Kimi-K2-Thinking's routed experts, io/compressed_tensors.h): a 4-bit value per
    // weight, a bf16 scale per group of this many inputs and a 2-integer shape per matrix; 0: not int4.
    int int4Group = 0;
    int blockRows = 128, blockCols = 128;
};

class TensorCounter {
public:
    explicit TensorCounter(const Storage& storage) : s_(storage) {}

    // A projection matrix: FP8 in an FP8 checkpoint.
    void projection(Tally& t, std::uint64_t rows, std::uint64_t cols) const {
        t.parameters += rows * cols;
        if (s_.int4Group > 0) {
            t.bytes += rows * cols / 2 + rows * ceilDiv(cols, static_cast<std::uint64_t>(s_.int4Group)) * 2 + 2 * 4;
            t.tensors += 3;
        } else if (s_.int8) {
            t.bytes += rows * cols + rows * 4;
            t.tensors += 1;
        } else if (s_.fp8) {
            t.bytes += rows * cols + ceilDiv(rows, s_.blockRows) * ceilDiv(cols, s_.blockCols) * 4;
            t.tensors += 2;
        } else {
            t.bytes += rows * cols * s_.elementBytes;
            t.tensors += 1;
        }
    }
    // The output head: int8 with the engine's int8 dense weights, else as plain() below.
    void head(Tally& t, std::uint64_t rows, std::uint64_t cols) const {
        if (s_.int8) projection(t, rows, cols);
        else plain(t, rows, cols);
    }
    // Embeddings, lm_head, routers: never FP8.
    void plain(Tally& t, std::uint64_t rows, std::uint64_t cols = 1) const {
        t.parameters += rows * cols;
        t.bytes += rows * cols * s_.elementBytes;
        t.tensors += 1;
    }
    void mlp(Tally& t, std::uint64_t hidden, std::uint64_t inner) const {
        projection(t, inner, hidden);  // gate
        projection(t, inner, hidden);  // up
        projection(t, hidden, inner);  // down
    }

private:
    static std::uint64_t ceilDiv(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
    Storage s_;
};

// One decoder layer's attention, norms and router/shared/dense MLP: everything but its routed experts.
Tally layerDense(const model::ModelConfig& c, const TensorCounter& count, bool moe) {
    const std::uint64_t H = static_cast<std::uint64_t>(c.hiddenSize);
    const std::uint64_t heads = static_cast<std::uint64_t>(c.numHeads);
    Tally t;
    count.plain(t, H);  // input_layernorm
    count.plain(t, H);  // post_attention_layernorm
    if (c.attention == model::AttentionKind::Mla) {
        const std::uint64_t qHead = static_cast<std::uint64_t>(c.qkNopeHeadDim + c.qkRopeHeadDim);
        const std::uint64_t kvLora = static_cast<std::uint64_t>(c.kvLoraRank);
        if (c.qLoraRank > 0) {
            const std::uint64_t qLora = static_cast<std::uint64_t>(c.qLoraRank);
            count.projection(t, qLora, H);
            count.plain(t, qLora);
            count.projection(t, heads * qHead, qLora);
        } else {
            count.projection(t, heads * qHead, H);
        }
        count.projection(t, kvLora + static_cast<std::uint64_t>(c.qkRopeHeadDim), H);
        count.plain(t, kvLora);
        count.projection(t, heads * static_cast<std::uint64_t>(c.qkNopeHeadDim + c.vHeadDim), kvLora);
        count.projection(t, H, heads * static_cast<std::uint64_t>(c.vHeadDim));
    } else {
        const std::uint64_t headDim = static_cast<std::uint64_t>(c.headDim);
        const std::uint64_t kv = static_cast<std::uint64_t>(c.numKvHeads) * headDim;
        count.projection(t, heads * headDim, H);
        count.projection(t, kv, H);
        count.projection(t, kv, H);
        count.projection(t, H, heads * headDim);
        if (c.qkNorm) {
            count.plain(t, headDim);
            count.plain(t, headDim);
        }
        if (c.attentionBias) {  // GLM-4.5, gpt-oss
            count.plain(t, heads * headDim);
            count.plain(t, kv);
            count.plain(t, kv);
        }
        if (c.attentionOutputBias) count.plain(t, H);  // gpt-oss
        if (c.attentionSinks) count.plain(t, heads);
    }
    if (!moe) {
        count.mlp(t, H, static_cast<std::uint64_t>(c.intermediateSize));
        return t;
    }
    const std::uint64_t experts = static_cast<std::uint64_t>(c.numExperts);
    count.plain(t, experts, H);  // router
    if (c.router.hasCorrectionBias) count.plain(t, experts);
    if (c.routerBias) count.plain(t, experts);
    if (c.expertBiases) {  // gpt-oss: gate_up_proj_bias [E, 2I] and down_proj_bias [E, H], kept beside the packed experts
        count.plain(t, experts, 2 * static_cast<std::uint64_t>(c.moeIntermediateSize));
        count.plain(t, experts, H);
    }
    if (c.numSharedExperts > 0)
        count.mlp(t, H, static_cast<std::uint64_t>(c.moeIntermediateSize) * static_cast<std::uint64_t>(c.numSharedExperts));
    return t;
}

Tally layerRoutedExperts(const model::ModelConfig& c, const TensorCounter& count) {
    Tally t;
    if (c.mxfp4Experts) {  // gpt-oss: fused per layer, 4 bits a weight and an E8M0 byte per 32 (blocks and scales)
        const std::uint64_t weights = 3 * static_cast<std::uint64_t>(c.numExperts) * static_cast<std::uint64_t>(c.hiddenSize) *
                                      static_cast<std::uint64_t>(c.moeIntermediateSize);
        t.parameters += weights;
        t.bytes += weights / 2 + weights / 32;
        t.tensors += 4;
        return t;
    }
    for (int e = 0; e < c.numExperts; ++e)
        count.mlp(t, static_cast<std::uint64_t>(c.hiddenSize), static_cast<std::uint64_t>(c.moeIntermediateSize));
    return t;
}

Storage storageOf(const std::string& configJson, const model::ModelConfig& c) {
    Storage s;
    const auto j = nlohmann::json::parse(configJson);  // parseModelConfig has accepted it already
    if (const auto dtype = j.find("torch_dtype"); dtype != j.end() && dtype->is_string() && *dtype == "float32")
        s.elementBytes = 4;
    if (const auto q = j.find("quantization_config"); q != j.end() && q->is_object()) {
        s.fp8 = q->value("quant_method", std::string()) == "fp8";
        s.blockRows = c.fp8BlockRows;
        s.blockCols = c.fp8BlockCols;
    }
    return s;
}

// Per position and layer, the float32 values the KV cache holds (model/kv_cache.h, runtime/gpu/gpu_runner).
std::uint64_t kvValuesPerPosition(const model::ModelConfig& c) {
    if (c.attention == model::AttentionKind::Mla) return static_cast<std::uint64_t>(c.kvLoraRank + c.qkRopeHeadDim);
    return 2 * static_cast<std::uint64_t>(c.numKvHeads) * static_cast<std::uint64_t>(c.headDim);
}

// Per position, every layer, an int8 cache's codes and scales, as the engine shapes it (runtime/engine.cpp).
std::uint64_t kvInt8BytesPerPosition(const model::ModelConfig& c) {
    if (c.attention == model::AttentionKind::Mla)
        return model::KvCache::bytesPerPosition(c.numLayers, {c.kvLoraRank, c.qkRopeHeadDim}, {c.kvLoraRank, c.qkRopeHeadDim},
                                                KvCacheType::Int8);
    const int kvDim = c.numKvHeads * c.headDim;
    return model::KvCache::bytesPerPosition(c.numLayers, {kvDim, kvDim}, {c.headDim, c.headDim}, KvCacheType::Int8);
}

}  // namespace

std::uint64_t layerDenseParameters(const model::ModelConfig& config, bool moe) {
    return layerDense(config, TensorCounter(Storage{}), moe).parameters;
}

Footprint estimateFootprintFromJson(const std::string& configJson, ExpertPrecision experts, int contextLength,
                                    const std::string& where) {
    const model::ModelConfig c = model::parseModelConfig(configJson, "", where);
    const auto type = convert::packedType(experts == ExpertPrecision::Auto ? ExpertPrecision::BF16 : experts);
    if (!type) throw Error("the footprint is estimated for packed experts: bf16, int8, int4 or mxfp4");
    const Storage storage = storageOf(configJson, c);
    const TensorCounter count(storage);
    const TensorCounter asBf16(Storage{});
    Storage int8;
    int8.int8 = true;
    const TensorCounter asInt8(int8);

    Tally dense, denseBf16, denseInt8, routed, mtp;
    const std::uint64_t H = static_cast<std::uint64_t>(c.hiddenSize);
    const std::uint64_t V = static_cast<std::uint64_t>(c.vocabSize);
    for (const TensorCounter* counter : {&count, &asBf16, &asInt8}) {
        Tally& t = counter == &count ? dense : counter == &asBf16 ? denseBf16 : denseInt8;
        counter->plain(t, V, H);                            // embed_tokens
        if (!c.tieWordEmbeddings) counter->head(t, V, H);  // lm_head
        counter->plain(t, H);                            // final norm
        for (int l = 0; l < c.numLayers; ++l) t += layerDense(c, *counter, c.isMoeLayer(l));
    }
    const int moeLayers = c.moeLayerCount();
    Storage expertStorage = storage;
    expertStorage.int4Group = c.packedInt4Group;  // only the routed experts are int4 (the rest is in 'ignore')
    const Tally oneLayerExperts = layerRoutedExperts(c, TensorCounter(expertStorage));
    for (int l = 0; l < moeLayers; ++l) routed += oneLayerExperts;
    // DeepSeek-V3's multi-token-prediction layers: a MoE layer plus the projection of [embedding; hidden]
    // and three norms. Published, so downloaded; never loaded, so not converted.
    for (int l = 0; l < c.numNextnPredictLayers; ++l) {
        mtp += layerDense(c, count, true);
        mtp += oneLayerExperts;
        count.projection(mtp, H, 2 * H);  // eh_proj
        for (int n = 0; n < 3; ++n) count.plain(mtp, H);  // enorm, hnorm, shared_head.norm
    }

    const io::ExpertLayout layout = io::ExpertLayout::make(*type, c.hiddenSize, std::max(1, c.moeIntermediateSize));
    Footprint f;
    f.contextLength = std::max(1, std::min(contextLength, c.maxPositionEmbeddings > 0 ? c.maxPositionEmbeddings : contextLength));
    f.totalParameters = dense.parameters + routed.parameters;
    const std::uint64_t perExpert = moeLayers > 0 ? oneLayerExperts.parameters / static_cast<std::uint64_t>(c.numExperts) : 0;
    f.activeParameters = dense.parameters + perExpert * static_cast<std::uint64_t>(moeLayers) *
                                                static_cast<std::uint64_t>(moeLayers > 0 ? c.router.topK : 0);
    f.routedExpertBytes = moeLayers > 0 ? layout.expertBytes * static_cast<std::uint64_t>(c.numExperts) *
                                              static_cast<std::uint64_t>(moeLayers)
                                        : 0;
    f.denseBytes = denseBf16.bytes;
    f.denseInt8Bytes = denseInt8.bytes;
    f.kvCacheBytes = kvValuesPerPosition(c) * 4 * static_cast<std::uint64_t>(c.numLayers) *
                     static_cast<std::uint64_t>(f.contextLength);
    f.kvCacheInt8Bytes = kvInt8BytesPerPosition(c) * static_cast<std::uint64_t>(f.contextLength);
    f.kvCacheLayerBytes = c.numLayers > 0 ? f.kvCacheBytes / static_cast<std::uint64_t>(c.numLayers) : 0;
    f.ramBytes = f.routedExpertBytes + f.kvCacheBytes;
    f.vramBytes = f.denseBytes + f.kvCacheBytes;
    Tally published = dense;
    published += routed;
    published += mtp;
    f.downloadBytes = published.fileBytes();
    f.storeDenseBytes = dense.fileBytes();
    f.storeBytes = f.storeDenseBytes + f.routedExpertBytes;
    f.moeLayers = moeLayers;
    f.expertsPerLayer = moeLayers > 0 ? c.numExperts : 0;
    f.expertsPerToken = moeLayers > 0 ? c.router.topK : 0;
    return f;
}

// The activations of a 2048-token prompt chunk, which the engine measures at load; a round figure
// for models of 2-7k hidden size.
namespace {
constexpr std::uint64_t kChunkActivationBytes = 1ull << 30;

}  // namespace

Footprint withInt8Dense(Footprint f) {
    f.vramBytes = f.vramBytes - f.denseBytes + f.denseInt8Bytes;
    f.denseBytes = f.denseInt8Bytes;
    f.storeBytes = f.storeBytes - f.storeDenseBytes + f.denseInt8Bytes;
    f.storeDenseBytes = f.denseInt8Bytes;
    return f;
}

Footprint withInt8KvCache(Footprint f) {
    f.ramBytes = f.ramBytes - f.kvCacheBytes + f.kvCacheInt8Bytes;
    f.vramBytes = f.vramBytes - f.kvCacheBytes + f.kvCacheInt8Bytes + f.kvCacheLayerBytes;
    f.kvCacheBytes = f.kvCacheInt8Bytes;
    return f;
}

ExpertFit estimateExpertFit(const Footprint& need, std::uint64_t vramBytes) {
    ExpertFit fit;
    fit.moeLayers = need.moeLayers;
    const std::uint64_t layerBytes = need.moeLayers > 0 ? need.routedExpertBytes / static_cast<std::uint64_t>(need.moeLayers) : 0;
    const std::uint64_t chosenPerLayer =
        need.expertsPerLayer > 0 ? layerBytes / static_cast<std::uint64_t>(need.expertsPerLayer) * static_cast<std::uint64_t>(need.expertsPerToken)
                                 : 0;
    if (vramBytes == 0) {
        fit.ramBytesPerToken = need.denseBytes + chosenPerLayer * static_cast<std::uint64_t>(need.moeLayers);
        return fit;
    }
    // A GPU's free memory when nothing else runs: what the driver keeps aside is in the headroom. vramBytes:
    // the dense part and the KV cache as the GPU holds it (withInt8Dense, withInt8KvCache).
    const std::uint64_t used = need.vramBytes + kChunkActivationBytes + kGpuHeadroomBytes;
    const ExpertBudget budget = splitExpertBudget(automaticExpertBudget(vramBytes, used), layerBytes, need.moeLayers, true);
    fit.layersOnGpu = layerBytes > 0 ? static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(need.moeLayers),
                                                                                budget.layersBytes / layerBytes))
                                     : 0;
    fit.promptsStream = budget.stagingBytes > 0;
    // What is left beyond whole layers holds single experts of the next layer (a split layer, whose
    // experts the GPU computes): a fraction of that layer's reads.
    const double gpuLayers = layerBytes > 0 ? std::min(static_cast<double>(need.moeLayers),
                                                       static_cast<double>(budget.layersBytes) / static_cast<double>(layerBytes))
                                            : 0.0;
    fit.ramBytesPerToken =
        static_cast<std::uint64_t>(static_cast<double>(chosenPerLayer) * (static_cast<double>(need.moeLayers) - gpuLayers));
    return fit;
}

double measureMemoryBandwidthGbps() {
    static const double gbps = [] {
        try {
            cpu::ExpertPool pool;
            return cpu::measureMemoryBandwidth(pool, 3);
        } catch (const std::exception&) {
            return 0.0;
        }
    }();
    return gbps;
}

Footprint estimateFootprint(const fs::path& modelDirOrConfigJson, ExpertPrecision experts, int contextLength) {
    const fs::path file = fs::is_directory(modelDirOrConfigJson) ? modelDirOrConfigJson / "config.json" : modelDirOrConfigJson;
    std::string text;
    try {
        text = io::readRegularFile(file);
    } catch (const Error& e) {
        throw Error(std::string(e.what()) + ": a Hugging Face model folder has a config.json");
    }
    return estimateFootprintFromJson(text, experts, contextLength, file.string());
}

}  // namespace tandem
