#pragma once
// The tensors of a model, looked up by their Hugging Face names (in a checkpoint folder, or a GGUF file
// through model/gguf_tensors.h), checked against the config's shapes, and held as views into the
// memory mapping. Only small vectors (norms, biases, FP8 block
// scales) are copied, into float32.
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "cpu/dense/packed_matrix.h"
#include "cpu/pool/thread_pool.h"
#include "cpu/weight_matrix.h"
#include "io/tensor_lookup.h"
#include "model/config.h"

namespace tandem::model {

using cpu::WeightMatrix;

struct GqaWeights {
    WeightMatrix q, k, v, o;
    std::vector<float> qNorm, kNorm;  // Qwen3, and GLM-4.5 with use_qk_norm
    std::vector<float> qBias, kBias, vBias;  // GLM-4.5 and gpt-oss (attention_bias); empty otherwise
    std::vector<float> oBias;                // gpt-oss
    std::vector<float> sinks;                // gpt-oss: one logit per query head
};

struct MlaWeights {
    std::optional<WeightMatrix> qA;  // with q LoRA: q = qB(norm(qA(x)))
    std::vector<float> qANorm;
    WeightMatrix q;                  // qB with LoRA, else q_proj: [heads * (nope + rope), ...]
    WeightMatrix kvA;                // [kvLoraRank + rope, hidden]
    std::vector<float> kvANorm;
    WeightMatrix kvB;                // [heads * (nope + v), kvLoraRank]
    WeightMatrix o;
};

struct MlpWeights {
    WeightMatrix gate, up, down;
};

struct MoeWeights {
    WeightMatrix router;                  // [experts, hidden]
    std::vector<float> correctionBias;    // DeepSeek-V3
    std::vector<float> routerBias;        // gpt-oss: added to the logits
    std::vector<MlpWeights> experts;
    // gpt-oss: every routed expert's biases, expert e's at e * moeIntermediateSize (gate, up) and
    // e * hiddenSize (down); empty for the other families.
    std::vector<float> gateBias, upBias, downBias;
    // The routed experts' gated activation (the config's, kept here for whoever runs them).
    ExpertActivation activation = ExpertActivation::Silu;
    float swigluAlpha = 1.702f, swigluLimit = 7.0f;
    std::optional<MlpWeights> shared;
};

struct LayerWeights {
    std::vector<float> inputNorm, postAttentionNorm;
    GqaWeights gqa;
    MlaWeights mla;
    std::optional<MlpWeights> dense;
    std::optional<MoeWeights> moe;
};

struct ModelWeights {
    WeightMatrix embed;   // [vocab, hidden]
    WeightMatrix lmHead;  // [vocab, hidden]
    std::vector<float> finalNorm;
    std::vector<LayerWeights> layers;
    std::deque<std::vector<float>> scaleStore;  // owns the FP8 block scales (and int8 row scales) the matrices point to
    std::deque<std::vector<std::int8_t>> int8Store;  // owns the int8 dense weights (quantizeDenseInt8)
    // Owns the int4 dense weights (packDenseInt4); shared, so a copy of the weights views the same.
    std::vector<std::shared_ptr<const cpu::PackedMatrix>> packedStore;
};

// Dense products in int8 with a scale per row (cpu/dense/quantize_dense.h), for the CPU path and the GPU's
// upload: attention's projections (not MLA's kv_b, which attention reads row by row), dense and shared
// MLPs and the output head; the embedding, norms, routers and routed experts stay as they are. Replaces
// those matrices in place; keepFp8 leaves FP8 matrices as they are (the GPU reads them as bytes already).
void quantizeDenseInt8(ModelWeights& weights, const ModelConfig& config, cpu::ThreadPool& pool, bool keepFp8 = false);

// The same products packed in int4 (groups of 32 inputs) for the CPU's expert kernels
// (cpu/dense/packed_matrix.h): a quarter of bf16's bytes per decode step, for the CPU path only (the GPU
// does not read packed matrices). Each matrix keeps its view and gains `packed`.
void packDenseInt4(ModelWeights& weights, const ModelConfig& config, cpu::ThreadPool& pool);

// Those dense products with their tensor names as loadWeights reads them ("lm_head.weight" is named
// only when the model has its own; a tied output head is the embedding, which stays as it is in a store).
void forEachDenseProduct(ModelWeights& weights, const ModelConfig& config,
                         const std::function<void(const std::string& name, WeightMatrix& matrix)>& fn);

// The suffix of a dense product's int8 row scales in a store (convert --dense int8): NAME is I8 and
// NAME + kRowScaleSuffix holds its float32 scales, one per row.
inline constexpr const char* kRowScaleSuffix = "_row_scale";

// Throws tandem::Error naming the tensor, its shard and the problem (missing, wrong shape, wrong type).
// Without routedExperts the routed experts are left out (a packed store holds them elsewhere).
ModelWeights loadWeights(const io::TensorLookup& tensors, const ModelConfig& config, bool routedExperts = true);

}  // namespace tandem::model
