#include "runtime/stage_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "convert/layer_footprint.h"
#include "core/expert_budget.h"
#include "model/kv_cache.h"
#include "tandem/byte_size.h"
#include "tandem/error.h"

namespace tandem::runtime {

namespace {

std::string gpuName(const GpuMemory& gpu) {
    return "GPU " + std::to_string(gpu.device) + (gpu.name.empty() ? "" : " (" + gpu.name + ")");
}

std::string layerSpan(int first, int end) {
    return end - first == 1 ? "layer " + std::to_string(first) : "layers " + std::to_string(first) + "-" + std::to_string(end - 1);
}

// The GPUs that get a stage: those with memory, and with fewer layers than those, the largest (the
// earlier of equal ones), kept in their order.
std::vector<GpuMemory> usedGpus(const std::vector<GpuMemory>& gpus, std::size_t layers) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < gpus.size(); ++i)
        if (gpus[i].bytes > 0) order.push_back(i);
    if (order.size() > layers) {
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return gpus[a].bytes > gpus[b].bytes; });
        order.resize(layers);
        std::sort(order.begin(), order.end());
    }
    std::vector<GpuMemory> used;
    for (const std::size_t i : order) used.push_back(gpus[i]);
    return used;
}


}  // namespace

std::vector<StagePlan> planStages(const std::vector<LayerCost>& layers, std::uint64_t embedBytes, std::uint64_t headBytes,
                                  const std::vector<GpuMemory>& gpus) {
    if (gpus.empty()) throw Error("no GPU was given to place the model's layers on");
    if (layers.empty()) throw Error("the model has no layers to place on the GPUs");
    const std::vector<GpuMemory> used = usedGpus(gpus, layers.size());
    if (used.empty()) throw Error("none of the " + std::to_string(gpus.size()) + " GPUs has memory for the model");

    const int L = static_cast<int>(layers.size());
    const int G = static_cast<int>(used.size());
    std::vector<std::uint64_t> prefix(layers.size() + 1, 0);  // prefix[k]: layers [0, k)
    for (int l = 0; l < L; ++l) prefix[l + 1] = prefix[l] + layers[l].denseBytes + layers[l].kvBytes;
    const std::uint64_t total = prefix[L] + embedBytes + headBytes;
    std::uint64_t memory = 0;
    for (const GpuMemory& g : used) memory += g.bytes;
    if (total > memory)
        throw Error("the model's dense weights and KV cache (with the embedding and output head) need " + formatBytes(total) +
                    ", more than the " + std::to_string(G) + (G == 1 ? " GPU has (" : " GPUs have together (") +
                    formatBytes(memory) + ")");

    std::vector<StagePlan> stages;
    int start = 0;
    std::uint64_t memoryBefore = 0;  // of the GPUs before this one
    for (int i = 0; i < G; ++i) {
        const GpuMemory& gpu = used[static_cast<std::size_t>(i)];
        const bool first = i == 0, last = i == G - 1;
        const std::uint64_t extra = (first ? embedBytes : 0) + (last ? headBytes : 0);
        const auto fixedOf = [&](int end) { return prefix[end] - prefix[start] + extra; };
        const std::uint64_t memoryAfter = memory - memoryBefore - gpu.bytes;
        int end = L;
        if (fixedOf(start + 1) > gpu.bytes)
            throw Error(gpuName(gpu) + " has " + formatBytes(gpu.bytes) + ", less than the " + formatBytes(fixedOf(start + 1)) +
                        " that " + layerSpan(start, start + 1) + (first ? " with the embedding" : "") +
                        (last ? " with the output head" : "") + " needs");
        if (!last) {
            const int lo = start + 1, hi = L - (G - 1 - i);  // one layer at least, and one for each GPU after
            // The walk: the cumulative fixed share up to layer e against this GPU's cumulative target.
            const double target = static_cast<double>(total) * static_cast<double>(memoryBefore + gpu.bytes) / static_cast<double>(memory);
            const auto cumulative = [&](int e) { return static_cast<double>(embedBytes + prefix[e]); };
            end = lo;
            while (end < hi && cumulative(end + 1) <= target) ++end;
            if (end < hi && cumulative(end + 1) - target < target - cumulative(end)) ++end;
            // No more than this GPU holds, no fewer than the GPUs after it can hold the rest of.
            int most = lo;
            while (most < hi && fixedOf(most + 1) <= gpu.bytes) ++most;
            int fewest = lo;
            while (fewest <= hi && prefix[L] - prefix[fewest] + headBytes > memoryAfter) ++fewest;
            if (fewest > most)
                throw Error("the model's layers cannot be split across the GPUs in order: " + gpuName(gpu) + " holds " +
                            layerSpan(start, most) + " (" + formatBytes(fixedOf(most)) + " of its " + formatBytes(gpu.bytes) +
                            "), and the " + formatBytes(prefix[L] - prefix[most] + headBytes) + " left need more than the " +
                            formatBytes(memoryAfter) + " the GPUs after it have");
            end = std::clamp(end, fewest, most);
        } else if (fixedOf(end) > gpu.bytes) {  // the GPUs before left it more than the sizes allowed (not expected)
            throw Error("the model's layers cannot be split across the GPUs in order: " + gpuName(gpu) + " would need " +
                        formatBytes(fixedOf(end)) + " for " + layerSpan(start, end) + " and has " + formatBytes(gpu.bytes));
        }
        StagePlan s;
        s.device = gpu.device;
        s.firstLayer = start;
        s.endLayer = end;
        s.embeds = first;
        s.heads = last;
        s.fixedBytes = fixedOf(end);
        s.expertBudget = gpu.bytes - s.fixedBytes;
        stages.push_back(s);
        start = end;
        memoryBefore += gpu.bytes;
    }
    return stages;
}

std::string describeStages(const std::vector<StagePlan>& stages, const std::vector<GpuMemory>& gpus) {
    std::string text;
    for (const StagePlan& s : stages) {
        GpuMemory gpu;
        gpu.device = s.device;
        for (const GpuMemory& g : gpus)
            if (g.device == s.device) gpu.name = g.name;
        if (!text.empty()) text += '\n';
        text += gpuName(gpu) + ": " + layerSpan(s.firstLayer, s.endLayer) + ", " + formatBytes(s.fixedBytes) + " dense + KV, " +
                formatBytes(s.expertBudget) + " for experts";
    }
    return text;
}

std::vector<std::uint64_t> stageExpertBudgets(const std::vector<StagePlan>& stages, const std::vector<GpuMemory>& gpus,
                                              std::int64_t requested, std::uint64_t scratchBytes,
                                              const std::vector<std::uint64_t>& needs) {
    if (needs.size() != stages.size()) throw std::logic_error("stageExpertBudgets: one need a stage");
    std::vector<std::uint64_t> room;  // what each stage has for experts beside the scratch
    std::uint64_t total = 0;
    for (const StagePlan& s : stages) {
        room.push_back(s.expertBudget > scratchBytes ? s.expertBudget - scratchBytes : 0);
        total += room.back();
    }
    std::vector<std::uint64_t> budgets(stages.size(), 0);
    if (requested == 0) return budgets;
    if (requested < 0) {
        for (std::size_t i = 0; i < stages.size(); ++i) {
            std::uint64_t memory = 0;
            for (const GpuMemory& g : gpus)
                if (g.device == stages[i].device) memory = g.bytes;
            const std::uint64_t margin = std::min<std::uint64_t>(memory / 10, kExpertMarginBytes);
            budgets[i] = std::min(room[i] > margin ? room[i] - margin : 0, needs[i]);
        }
        return budgets;
    }
    const auto wanted = static_cast<std::uint64_t>(requested);
    if (wanted > total)
        throw Error("the routed experts were given " + formatBytes(wanted) + " of GPU memory, but the " +
                    std::to_string(stages.size()) + (stages.size() == 1 ? " GPU has only " : " GPUs have only ") +
                    formatBytes(total) + " free besides the rest of the model and the context; give them less (--gpu-memory)");
    // Shares in proportion to the room of the stages that can still take more, until all is given or none can.
    std::vector<std::uint64_t> cap(stages.size());
    for (std::size_t i = 0; i < stages.size(); ++i) cap[i] = std::min(room[i], needs[i]);
    std::uint64_t left = wanted;
    while (left > 0) {
        long double open = 0;
        for (std::size_t i = 0; i < stages.size(); ++i)
            if (budgets[i] < cap[i]) open += static_cast<long double>(room[i]);
        if (open == 0) break;
        std::uint64_t given = 0;
        for (std::size_t i = 0; i < stages.size(); ++i) {
            if (budgets[i] >= cap[i]) continue;
            const auto share = static_cast<std::uint64_t>(static_cast<long double>(left) * static_cast<long double>(room[i]) / open);
            const std::uint64_t g = std::min(share, cap[i] - budgets[i]);
            budgets[i] += g;
            given += g;
        }
        if (given == 0) break;  // only a rounding's bytes left
        left -= given;
    }
    return budgets;
}

std::vector<StageExperts> planStageExperts(const model::ModelConfig& config, const std::vector<StagePlan>& stages,
                                           const std::vector<std::uint64_t>& budgets, std::uint64_t expertBytes,
                                           const ExpertUsage& usage, bool streaming) {
    if (budgets.size() != stages.size()) throw std::logic_error("planStageExperts: one budget a stage");
    const std::uint64_t layerBytes = expertBytes * static_cast<std::uint64_t>(config.numExperts);
    std::vector<StageExperts> plan;
    for (std::size_t i = 0; i < stages.size(); ++i) {
        int moeLayers = 0;
        for (int l = stages[i].firstLayer; l < stages[i].endLayer; ++l) moeLayers += config.isMoeLayer(l) ? 1 : 0;
        const ExpertBudget split = splitExpertBudget(budgets[i], layerBytes, moeLayers, streaming && moeLayers > 0);
        PlacementRequest request;
        request.expertBytes = expertBytes;
        request.budgetBytes = split.layersBytes;
        request.usage = usage;
        request.firstLayer = stages[i].firstLayer;
        request.endLayer = stages[i].endLayer;
        plan.push_back({planPlacement(config, request), split.stagingBytes > 0});
    }
    return plan;
}

std::vector<LayerCost> layerCosts(const model::ModelConfig& config, int contextTokens, KvCacheType kvCache) {
    // One layer's cache a position, as the engine shapes it (runtime/engine.cpp): int8 groups of a key head
    // (GQA) or a whole row (MLA), as the GPU's 8-bit cache has them too.
    const std::uint64_t kvPerPosition =
        config.attention == model::AttentionKind::Mla
            ? model::KvCache::bytesPerPosition(1, {config.kvLoraRank, config.qkRopeHeadDim}, {}, kvCache)
            : model::KvCache::bytesPerPosition(1, {config.numKvHeads * config.headDim, config.numKvHeads * config.headDim},
                                               {config.headDim, config.headDim}, kvCache);
    const std::uint64_t positions = static_cast<std::uint64_t>(std::max(0, contextTokens));
    std::vector<LayerCost> costs(static_cast<std::size_t>(config.numLayers));
    for (int l = 0; l < config.numLayers; ++l) {
        LayerCost& c = costs[static_cast<std::size_t>(l)];
        c.denseBytes = 2 * layerDenseParameters(config, config.isMoeLayer(l));
        c.kvBytes = kvPerPosition * positions;
    }
    return costs;
}

}  // namespace tandem::runtime
