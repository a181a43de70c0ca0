#pragma once
// Several GPUs (issue 29): a pipeline by layer. Each GPU runs a contiguous range of layers (attention,
// dense MLPs, shared experts, its KV cache); the first also embeds, the last applies the final norm and
// the output head. The ranges are sized so that each GPU's fixed share (its layers' dense weights and
// KV cache, plus the embedding or head) is in proportion to its memory; what is left of each GPU's
// memory is its budget for routed experts of its own layers (planPlacement with the range,
// runtime/placement.h; mergePlacements joins the stages' placements).
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "tandem/engine.h"
#include "runtime/placement.h"

namespace tandem::runtime {

struct LayerCost {
    std::uint64_t denseBytes = 0;
    std::uint64_t kvBytes = 0;
};

struct GpuMemory {
    int device = 0;
    std::uint64_t bytes = 0;  // bytes usable for the model
    std::string name;
};

struct StagePlan {
    int device = 0;
    int firstLayer = 0, endLayer = 0;  // [firstLayer, endLayer)
    bool embeds = false, heads = false;
    std::uint64_t fixedBytes = 0;    // dense weights + KV cache of its layers (+ embedding / head)
    std::uint64_t expertBudget = 0;  // what is left for routed experts
};

// The stages, in the order the GPUs are given (GPUs with 0 bytes get no stage).
//
// Splitting rule: the GPUs' cumulative targets are the whole fixed share (every layer, the embedding and
// the head) times their cumulative share of the memory. Layers are walked in order: GPU i takes layers
// while the cumulative fixed share (the embedding and the layers so far) stays at or below its target,
// then takes one more if that brings the cumulative share closer to the target (a tie: not). Every GPU
// keeps at least one layer. Within that, a GPU never takes more than its memory holds, and never so few
// that the layers left need more than the GPUs after it have together. Deterministic.
//
// Fewer layers than GPUs with memory: not an error; only as many GPUs as there are layers are used, the
// largest (equal sizes: the earlier in the list), kept in their order.
//
// Throws tandem::Error: when no GPU is given or none has memory; when the GPUs together cannot hold the
// fixed share (the message names both sizes); when a GPU cannot hold the one layer it must take (with
// the embedding or head it carries); or when whole layers cannot be fitted into the GPUs in order
// although the sizes add up.
std::vector<StagePlan> planStages(const std::vector<LayerCost>& layers, std::uint64_t embedBytes, std::uint64_t headBytes,
                                  const std::vector<GpuMemory>& gpus);

// "GPU 0 (NVIDIA H200): layers 0-23, 9.10 GB dense + KV, 30.20 GB for experts", one such line per stage
// (joined by '\n', no trailing newline); the name from `gpus` by device ("GPU 0: ..." without one).
std::string describeStages(const std::vector<StagePlan>& stages, const std::vector<GpuMemory>& gpus);

// Each stage's budget for routed experts of its own layers. A stage's room is its plan's expertBudget less
// `scratchBytes` (what the stage's runners need beside them to compute experts on the GPU); its need is
// needs[i], the bytes of every routed expert of its layers (0 for a stage of dense layers only). Then
//   requested < 0 (automatic): the room less a margin of a tenth of its GPU's memory (`gpus`, by device),
//                              at most kExpertMarginBytes, as automaticExpertBudget leaves on one GPU, and no
//                              more than the need;
//   requested == 0:            nothing (every routed expert on the CPU);
//   requested > 0:             that many bytes in all, shared in proportion to the stages' room, no stage
//                              given more than its room or its need: what a stage cannot take goes to the
//                              others in the same proportion, and what none can take is left unused.
// Throws tandem::Error when `requested` is more than the stages have room for together (naming both).
std::vector<std::uint64_t> stageExpertBudgets(const std::vector<StagePlan>& stages, const std::vector<GpuMemory>& gpus,
                                              std::int64_t requested, std::uint64_t scratchBytes,
                                              const std::vector<std::uint64_t>& needs);

// A stage's routed experts: its placement, planned within its own layers and budget (whole MoE layers
// from the stage's last backwards, then single experts; planPlacement), and whether it keeps two layers of
// its budget as prefill streaming's staging (splitExpertBudget over the stage's MoE layers, when
// `streaming` and not every one of its layers fits).
struct StageExperts {
    ExpertPlacement placement;
    bool streams = false;
};
// One per stage, budgets[i] for stages[i]; expertBytes is one routed expert as the GPU holds it.
std::vector<StageExperts> planStageExperts(const model::ModelConfig& config, const std::vector<StagePlan>& stages,
                                           const std::vector<std::uint64_t>& budgets, std::uint64_t expertBytes,
                                           const ExpertUsage& usage, bool streaming);

// Per-layer costs of a model from its config: dense bytes of each layer as the GPU holds them (bf16:
// attention projections and biases, norms, a dense MLP or the router and shared experts) and the KV
// cache of `contextTokens` positions (float32 keys and values for GQA: 2 * numKvHeads * headDim * 4 bytes
// a position; MLA: (kvLoraRank + qkRopeHeadDim) * 4 bytes). The embedding, the final norm and the output
// head are not in any layer: the caller adds them as embedBytes and headBytes.
// With kvCache Int8, the 8-bit cache's codes and scales instead (the GPU runner's one layer of float32 rows
// beside it is part of its activations).
std::vector<LayerCost> layerCosts(const model::ModelConfig& config, int contextTokens,
                                  KvCacheType kvCache = KvCacheType::Float32);

}  // namespace tandem::runtime
