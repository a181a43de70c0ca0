#pragma once
// config.json (+ generation_config.json) of the supported architectures, read into one normalized
// description. Field names differ between families (num_experts / num_local_experts / n_routed_experts);
// after parsing, the rest of the engine sees only this struct.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/router_spec.h"
#include "model/layer_plan.h"

namespace tandem::model {

struct YarnScaling {
    double factor = 1.0;
    double betaFast = 32.0;
    double betaSlow = 1.0;
    double mscale = 1.0;
    double mscaleAllDim = 0.0;
    std::optional<double> originalMaxPositions;
    std::optional<double> attentionFactor;  // explicit cos/sin multiplier, else derived from mscale
    bool truncate = true;  // correction range rounded out to whole dimensions (gpt-oss: false)
};

// The gated activation of the routed experts: SiLU(gate) * up, or gpt-oss's clamped SwiGLU,
// (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g) with g = min(gate, limit).
enum class ExpertActivation { Silu, ClampedSwiglu };

using tandem::ExpertScoring;
using tandem::ExpertSelection;
using tandem::RouterSpec;

struct GenerationDefaults {
    bool doSample = false;
    float temperature = 1.0f;
    float topP = 1.0f;
    int topK = 0;
    float minP = 0.0f;
    float repetitionPenalty = 1.0f;
};

struct Family;

struct ModelConfig {
    std::string modelType;
    const Family* family = nullptr;  // model/family.h
    AttentionKind attention = AttentionKind::Gqa;

    int vocabSize = 0;
    int hiddenSize = 0;
    int numLayers = 0;
    int numHeads = 0;
    int numKvHeads = 0;
    int headDim = 0;  // GQA only
    float rmsNormEps = 1e-6f;
    bool tieWordEmbeddings = false;
    bool qkNorm = false;                   // Qwen3 per-head q/k RMSNorm (GLM-4.5's use_qk_norm)
    bool attentionBias = false;            // GLM-4.5: q, k and v projections with biases
    int rotaryDim = 0;                     // GQA: the leading dimensions of a head that rotate (GLM-4.5's
                                           // partial_rotary_factor); 0: all of them
    bool attentionOutputBias = false;      // gpt-oss: o_proj with a bias too
    bool attentionSinks = false;           // gpt-oss: a learned logit per head that joins every softmax
    std::optional<int> slidingWindow;      // GQA families only
    std::vector<bool> slidingLayers;       // gpt-oss's layer_types: the layers slidingWindow applies to
                                           // (empty: all of them)
    int maxPositionEmbeddings = 0;

    double ropeTheta = 10000.0;
    std::optional<YarnScaling> yarn;
    bool ropeInterleaved = false;  // DeepSeek rotates (x[2i], x[2i+1]) pairs; the others rotate halves

    // MLA
    int qLoraRank = 0;  // 0: plain q_proj
    int kvLoraRank = 0;
    int qkNopeHeadDim = 0;
    int qkRopeHeadDim = 0;
    int vHeadDim = 0;

    // Feed-forward
    int intermediateSize = 0;     // dense layers
    int numExperts = 0;
    int moeIntermediateSize = 0;
    int numSharedExperts = 0;     // shared expert MLP has numSharedExperts * moeIntermediateSize rows
    RouterSpec router;
    int firstKDenseReplace = 0;
    int moeLayerFreq = 1;
    int decoderSparseStep = 1;
    std::vector<int> mlpOnlyLayers;
    int numNextnPredictLayers = 0;  // DeepSeek-V3 MTP layers, stored after the last layer, unused
    bool routerBias = false;        // gpt-oss: the router's logits have a bias (it moves choice and weights)
    bool expertBiases = false;      // gpt-oss: each routed expert's gate, up and down carry biases
    ExpertActivation expertActivation = ExpertActivation::Silu;
    float swigluAlpha = 1.702f;
    float swigluLimit = 7.0f;
    // gpt-oss's release (quantization_config mxfp4): the routed experts are MXFP4 blocks and scales, fused
    // per layer (mlp.experts.gate_up_proj_blocks ...); everything else is bf16.
    bool mxfp4Experts = false;

    // compressed-tensors checkpoints (quantization_config, io/compressed_tensors.h: Kimi-K2-Thinking): the
    // quantized Linears, its routed experts, are int4 with one bf16 scale per group of this many inputs; 0: none.
    int packedInt4Group = 0;

    // FP8 checkpoints (quantization_config): weights are e4m3 with one scale per block of this many rows
    // and columns.
    bool fp8 = false;
    int fp8BlockRows = 128;
    int fp8BlockCols = 128;

    std::vector<int> eosTokenIds;
    std::optional<int> bosTokenId;
    GenerationDefaults generation;

    // Every decoder layer as the forward pass runs it (planLayers).
    std::vector<LayerPlan> layers;

    bool isMoeLayer(int layer) const { return layers[static_cast<std::size_t>(layer)].moe; }
    int moeLayerCount() const;
    // Rotary dimension and the query/key width the softmax scale is computed from.
    int ropeDim() const { return attention == AttentionKind::Mla ? qkRopeHeadDim : rotaryDim > 0 ? rotaryDim : headDim; }
    int qkHeadDim() const { return attention == AttentionKind::Mla ? qkNopeHeadDim + qkRopeHeadDim : headDim; }
};

// Fills config.layers from the family and the fields read (parseModelConfig does; a configuration
// built by hand, like the synthetic models', calls it once it is complete).
void planLayers(ModelConfig& config);

// Reads DIR/config.json and, when present, DIR/generation_config.json. Throws tandem::Error naming
// the file and the field for anything missing, malformed or unsupported.
ModelConfig loadModelConfig(const std::filesystem::path& dir);
// The same from JSON text, for tests; `where` names the source in errors.
ModelConfig parseModelConfig(const std::string& configJson, const std::string& generationJson,
                             const std::string& where);

}  // namespace tandem::model
