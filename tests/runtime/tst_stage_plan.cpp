// Several GPUs (issue 29): the layer pipeline's stages (runtime/stage_plan.h) and the routed experts of a
// stage's range (runtime/placement.h).
#include <QTest>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>

#include "core/expert_budget.h"
#include "model/config.h"
#include "runtime/placement.h"
#include "runtime/stage_plan.h"
#include "tandem/byte_size.h"
#include "tandem/convert.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using runtime::ExpertUsage;
using runtime::GpuMemory;
using runtime::LayerCost;
using runtime::planStages;
using runtime::StagePlan;

namespace {

constexpr std::uint64_t GB = 1'000'000'000;

std::vector<LayerCost> uniform(int layers, std::uint64_t dense, std::uint64_t kv) {
    return std::vector<LayerCost>(static_cast<std::size_t>(layers), LayerCost{dense, kv});
}

std::uint64_t fixedOf(const std::vector<LayerCost>& layers, int first, int end) {
    std::uint64_t n = 0;
    for (int l = first; l < end; ++l) n += layers[static_cast<std::size_t>(l)].denseBytes + layers[static_cast<std::size_t>(l)].kvBytes;
    return n;
}

const GpuMemory& gpuOf(const std::vector<GpuMemory>& gpus, int device) {
    for (const GpuMemory& g : gpus)
        if (g.device == device) return g;
    throw std::logic_error("no such device");
}

// What every plan must be: contiguous ranges covering every layer once, at least one layer each, the
// embedding on the first and the head on the last, fixed as the layers add up, fixed + budget = memory.
void checkPlan(const std::vector<StagePlan>& stages, const std::vector<LayerCost>& layers, std::uint64_t embed, std::uint64_t head,
               const std::vector<GpuMemory>& gpus) {
    QVERIFY(!stages.empty());
    int next = 0;
    for (std::size_t i = 0; i < stages.size(); ++i) {
        const StagePlan& s = stages[i];
        QCOMPARE(s.firstLayer, next);
        QVERIFY2(s.endLayer > s.firstLayer, qPrintable(QString("stage %1 is empty").arg(i)));
        QCOMPARE(s.embeds, i == 0);
        QCOMPARE(s.heads, i + 1 == stages.size());
        QCOMPARE(s.fixedBytes, fixedOf(layers, s.firstLayer, s.endLayer) + (s.embeds ? embed : 0) + (s.heads ? head : 0));
        QCOMPARE(s.fixedBytes + s.expertBudget, gpuOf(gpus, s.device).bytes);
        QVERIFY(s.fixedBytes <= gpuOf(gpus, s.device).bytes);
        if (i > 0) QVERIFY(stages[i - 1].device != s.device);
        next = s.endLayer;
    }
    QCOMPARE(next, static_cast<int>(layers.size()));
}

}  // namespace

class StagePlanTest : public QObject {
    Q_OBJECT

    // tiny-qwen3moe: GQA, 3 MoE layers of 16 experts; tiny-deepseekv2: MLA, a dense layer, then 2 MoE layers.
    model::ModelConfig qwen_ = model::loadModelConfig(test::fixturePath("tiny-qwen3moe").toStdString());
    model::ModelConfig deepseek_ = model::loadModelConfig(test::fixturePath("tiny-deepseekv2").toStdString());
    static constexpr std::uint64_t kExpert = 1000;

private slots:
    void oneGpuGetsEveryLayer() {
        const auto layers = uniform(48, 150'000'000, 40'000'000);
        const std::vector<GpuMemory> gpus{{3, 80 * GB, "NVIDIA H100"}};
        const auto stages = planStages(layers, 1 * GB, 1 * GB, gpus);
        QCOMPARE(stages.size(), std::size_t{1});
        checkPlan(stages, layers, 1 * GB, 1 * GB, gpus);
        QCOMPARE(stages[0].device, 3);
        QVERIFY(stages[0].embeds && stages[0].heads);
        QCOMPARE(stages[0].endLayer, 48);
        QCOMPARE(stages[0].fixedBytes, 48 * 190'000'000ull + 2 * GB);
        QCOMPARE(stages[0].expertBudget, 80 * GB - 48 * 190'000'000ull - 2 * GB);
    }

    void twoEqualGpusSplitAUniformModelInHalves() {
        const auto layers = uniform(48, 150'000'000, 40'000'000);
        const std::vector<GpuMemory> gpus{{0, 40 * GB, "A"}, {1, 40 * GB, "B"}};
        // An embedding as large as the head: exactly 24 and 24.
        auto stages = planStages(layers, GB, GB, gpus);
        QCOMPARE(stages.size(), std::size_t{2});
        checkPlan(stages, layers, GB, GB, gpus);
        QCOMPARE(stages[0].endLayer, 24);
        QCOMPARE(stages[0].device, 0);
        QCOMPARE(stages[1].device, 1);
        // A large embedding (no head to match) tips it: the first GPU takes fewer layers (1 GB is 5.3
        // layers, half of it 2.6: 21 or 22).
        stages = planStages(layers, GB, 0, gpus);
        checkPlan(stages, layers, GB, 0, gpus);
        QVERIFY2(stages[0].endLayer == 21 || stages[0].endLayer == 22, qPrintable(QString::number(stages[0].endLayer)));
        // A small one only by one layer at most.
        stages = planStages(layers, 100'000'000, 0, gpus);
        checkPlan(stages, layers, 100'000'000, 0, gpus);
        QVERIFY(std::abs(stages[0].endLayer - 24) <= 1);
        // The boundary closer to the target: 48 layers x 190 MB + 100 MB, half of it 4.61 GB; 24 layers
        // with the embedding are 4.66 GB, 23 are 4.47 GB.
        QCOMPARE(stages[0].endLayer, 24);
    }

    void memoryInProportion() {
        const auto layers = uniform(48, 150'000'000, 40'000'000);
        const std::vector<GpuMemory> gpus{{0, 24 * GB, "small"}, {1, 48 * GB, "large"}};
        const auto stages = planStages(layers, GB / 2, GB / 2, gpus);
        QCOMPARE(stages.size(), std::size_t{2});
        checkPlan(stages, layers, GB / 2, GB / 2, gpus);
        QVERIFY2(std::abs(stages[0].endLayer - 16) <= 1, qPrintable(QString::number(stages[0].endLayer)));
        // Each GPU's fixed share in proportion to its memory (within a layer), so the budgets are too.
        const double share = static_cast<double>(stages[0].fixedBytes) / static_cast<double>(stages[0].fixedBytes + stages[1].fixedBytes);
        QVERIFY2(std::abs(share - 1.0 / 3.0) < 0.03, qPrintable(QString::number(share)));
        QVERIFY(std::abs(static_cast<double>(stages[1].expertBudget) / static_cast<double>(stages[0].expertBudget) - 2.0) < 0.1);
        // Order is the GPUs' order, not their size.
        const std::vector<GpuMemory> swapped{{0, 48 * GB, "large"}, {1, 24 * GB, "small"}};
        const auto other = planStages(layers, GB / 2, GB / 2, swapped);
        checkPlan(other, layers, GB / 2, GB / 2, swapped);
        QVERIFY2(std::abs(other[0].endLayer - 32) <= 1, qPrintable(QString::number(other[0].endLayer)));
    }

    // Uneven layers (a dense first layer, larger KV in some), several GPUs: the invariants, and every
    // boundary within a layer of its proportional target.
    void unevenLayersAndManyGpus() {
        std::mt19937 random(29);
        for (int round = 0; round < 200; ++round) {
            const int count = 2 + static_cast<int>(random() % 80);
            std::vector<LayerCost> layers;
            std::uint64_t largest = 0;
            for (int l = 0; l < count; ++l) {
                layers.push_back({100'000'000 + random() % 400'000'000, random() % 100'000'000});
                largest = std::max(largest, layers.back().denseBytes + layers.back().kvBytes);
            }
            const std::uint64_t embed = random() % 2'000'000'000, head = random() % 2'000'000'000;
            std::vector<GpuMemory> gpus;
            const int n = 1 + static_cast<int>(random() % 8);
            for (int g = 0; g < n; ++g) gpus.push_back({g, (48 + random() % 100) * GB, "GPU"});
            std::vector<StagePlan> stages;
            try {
                stages = planStages(layers, embed, head, gpus);
            } catch (const Error& e) {
                QFAIL(e.what());  // these models fit easily: 44 GB at most against 48 GB a GPU at least
            }
            QCOMPARE(stages.size(), static_cast<std::size_t>(std::min(n, count)));
            checkPlan(stages, layers, embed, head, gpus);
            if (static_cast<int>(stages.size()) < n) continue;
            std::uint64_t total = embed + head + fixedOf(layers, 0, count), memory = 0;
            for (const GpuMemory& g : gpus) memory += g.bytes;
            std::uint64_t memoryBefore = 0;
            for (std::size_t i = 0; i + 1 < stages.size(); ++i) {
                memoryBefore += gpuOf(gpus, stages[i].device).bytes;
                const double target = static_cast<double>(total) * static_cast<double>(memoryBefore) / static_cast<double>(memory);
                const double reached = static_cast<double>(embed + fixedOf(layers, 0, stages[i].endLayer));
                // The one-layer-each rule may hold a boundary away from its target; else within a layer.
                const bool heldByCount = stages[i].endLayer == stages[i].firstLayer + 1 ||
                                         stages[i].endLayer == count - static_cast<int>(stages.size() - 1 - i);
                if (!heldByCount)
                    QVERIFY2(std::abs(reached - target) <= static_cast<double>(largest),
                             qPrintable(QString("round %1 stage %2: %3 against %4").arg(round).arg(i).arg(reached).arg(target)));
            }
            QCOMPARE(planStages(layers, embed, head, gpus).back().endLayer, count);  // deterministic
        }
    }

    void aModelThatDoesNotFitThrowsNamingBothSizes() {
        const auto layers = uniform(48, 1 * GB, 0);
        const std::vector<GpuMemory> gpus{{0, 24 * GB, "A"}, {1, 20 * GB, "B"}};
        try {
            planStages(layers, GB, GB, gpus);
            QFAIL("a 50 GB fixed share was placed on 44 GB");
        } catch (const Error& e) {
            const QString message = e.what();
            QVERIFY2(message.contains(QString::fromStdString(formatBytes(50 * GB))), e.what());
            QVERIFY2(message.contains(QString::fromStdString(formatBytes(44 * GB))), e.what());
            QVERIFY2(message.contains("2 GPUs"), e.what());
        }
    }

    void aLayerLargerThanItsGpuThrows() {
        // Enough memory in all, but the one GPU's share of layer 0 with the embedding does not fit it.
        std::vector<LayerCost> layers = uniform(4, GB, 0);
        layers[0].denseBytes = 10 * GB;
        const std::vector<GpuMemory> gpus{{0, 8 * GB, "A"}, {1, 40 * GB, "B"}};
        try {
            planStages(layers, GB, 0, gpus);
            QFAIL("an 11 GB first layer was placed on an 8 GB GPU");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("GPU 0 (A) has 8.00 GB, less than the 11.00 GB that layer 0 with the embedding needs"),
                     e.what());
        }
        // Whole layers that add up but cannot be packed in order: 3 x 6 GB on 9 + 9 GB.
        try {
            planStages(uniform(3, 6 * GB, 0), 0, 0, {{0, 9 * GB, "A"}, {1, 9 * GB, "B"}});
            QFAIL("three 6 GB layers were placed on two 9 GB GPUs");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("cannot be split"), e.what());
        }
    }

    void noGpuThrows() {
        QVERIFY_THROWS_EXCEPTION(Error, planStages(uniform(4, GB, 0), 0, 0, {}));
        QVERIFY_THROWS_EXCEPTION(Error, planStages(uniform(4, GB, 0), 0, 0, {{0, 0, "A"}, {1, 0, "B"}}));
    }

    void aGpuWithoutMemoryGetsNoStage() {
        const auto layers = uniform(10, GB, 0);
        const std::vector<GpuMemory> gpus{{0, 20 * GB, "A"}, {1, 0, "B"}, {2, 20 * GB, "C"}};
        const auto stages = planStages(layers, 0, 0, gpus);
        QCOMPARE(stages.size(), std::size_t{2});
        checkPlan(stages, layers, 0, 0, gpus);
        QCOMPARE(stages[0].device, 0);
        QCOMPARE(stages[1].device, 2);
        QCOMPARE(stages[0].endLayer, 5);
    }

    // Not an error: as many GPUs as layers, the largest, in their order.
    void fewerLayersThanGpus() {
        const auto layers = uniform(2, GB, 0);
        const std::vector<GpuMemory> gpus{{0, 16 * GB, "A"}, {1, 48 * GB, "B"}, {2, 16 * GB, "C"}, {3, 32 * GB, "D"}};
        const auto stages = planStages(layers, 0, 0, gpus);
        QCOMPARE(stages.size(), std::size_t{2});
        checkPlan(stages, layers, 0, 0, gpus);
        QCOMPARE(stages[0].device, 1);
        QCOMPARE(stages[1].device, 3);
        // Equal sizes: the earlier ones.
        const auto one = planStages(uniform(1, GB, 0), 0, 0, {{0, 16 * GB, "A"}, {1, 16 * GB, "B"}});
        QCOMPARE(one.size(), std::size_t{1});
        QCOMPARE(one[0].device, 0);
        QVERIFY(one[0].embeds && one[0].heads);
    }

    void stagesAreDescribed() {
        const auto layers = uniform(48, 150'000'000, 40'000'000);
        const std::vector<GpuMemory> gpus{{0, 40 * GB, "NVIDIA H200"}, {1, 40 * GB, ""}};
        const auto stages = planStages(layers, GB, GB, gpus);
        const QString text = QString::fromStdString(runtime::describeStages(stages, gpus));
        const QStringList lines = text.split('\n');
        QCOMPARE(lines.size(), 2);
        QCOMPARE(lines[0], QString("GPU 0 (NVIDIA H200): layers 0-23, 5.56 GB dense + KV, 34.44 GB for experts"));
        QCOMPARE(lines[1], QString("GPU 1: layers 24-47, 5.56 GB dense + KV, 34.44 GB for experts"));
    }

    // The KV cache as the GPU keeps it (float32 by default): GQA keys and values, MLA's latent and rotary key.
    void layerCostsCountTheKvCache() {
        const auto gqa = runtime::layerCosts(qwen_, 1000);
        QCOMPARE(gqa.size(), std::size_t{3});
        for (const LayerCost& c : gqa) QCOMPARE(c.kvBytes, std::uint64_t{2 * 2 * 32 * 4 * 1000});  // 2 KV heads of 32
        const auto mla = runtime::layerCosts(deepseek_, 1000);
        QCOMPARE(mla.size(), std::size_t{3});
        for (const LayerCost& c : mla) QCOMPARE(c.kvBytes, std::uint64_t{(32 + 16) * 4 * 1000});  // kv_lora 32, rope 16
        // A dense MLP of 384 against 16 routers' rows and 2 shared experts of 64: the dense layer is larger.
        QVERIFY(mla[0].denseBytes > mla[1].denseBytes);
        QCOMPARE(mla[1].denseBytes, mla[2].denseBytes);
        // Qwen3 layer: norms 2 x 128, q 128x128, k and v 64x128, o 128x128, q/k norms 2 x 32, router 16x128.
        QCOMPARE(gqa[0].denseBytes, std::uint64_t{2 * (2 * 128 + 128 * 128 + 2 * 64 * 128 + 128 * 128 + 2 * 32 + 16 * 128)});
        QCOMPARE(runtime::layerCosts(qwen_, 0)[0].kvBytes, std::uint64_t{0});
        // The 8-bit cache (KvCacheType::Int8, the GPU's too): a byte a value and a float scale a key head
        // (GQA) or a row (MLA's latent and rope rows).
        for (const LayerCost& c : runtime::layerCosts(qwen_, 1000, KvCacheType::Int8))
            QCOMPARE(c.kvBytes, std::uint64_t{2 * 2 * (32 + 4) * 1000});
        for (const LayerCost& c : runtime::layerCosts(deepseek_, 1000, KvCacheType::Int8))
            QCOMPARE(c.kvBytes, std::uint64_t{(32 + 16 + 2 * 4) * 1000});
    }

    // The same dense bytes as the model wizard's footprint (convert/footprint.cpp counts every tensor the
    // same way): the layers plus the embedding, the output head and the final norm; the same KV cache.
    void layerCostsAgreeWithTheFootprint() {
        for (const char* name : {"tiny-qwen3moe", "tiny-deepseekv2", "tiny-deepseekv3-fp8", "tiny-glm4moe", "tiny-gpt-oss",
                                 "tiny-kimi-k2-int4", "tiny-mixtral"}) {
            const model::ModelConfig config = model::loadModelConfig(test::fixturePath(name).toStdString());
            const Footprint f = estimateFootprint(test::fixturePath(name).toStdString(), ExpertPrecision::INT8, 256);
            std::uint64_t dense = 0, kv = 0, kv8 = 0;
            for (const LayerCost& c : runtime::layerCosts(config, f.contextLength)) {
                dense += c.denseBytes;
                kv += c.kvBytes;
            }
            for (const LayerCost& c : runtime::layerCosts(config, f.contextLength, KvCacheType::Int8)) kv8 += c.kvBytes;
            QVERIFY2(kv8 == f.kvCacheInt8Bytes, qPrintable(QString("%1: int8 %2 against %3").arg(name).arg(kv8).arg(f.kvCacheInt8Bytes)));
            const std::uint64_t table = 2 * static_cast<std::uint64_t>(config.vocabSize) * static_cast<std::uint64_t>(config.hiddenSize);
            dense += table + (config.tieWordEmbeddings ? 0 : table) + 2 * static_cast<std::uint64_t>(config.hiddenSize);
            QVERIFY2(dense == f.denseBytes, qPrintable(QString("%1: %2 against %3").arg(name).arg(dense).arg(f.denseBytes)));
            QVERIFY2(kv == f.kvCacheBytes, qPrintable(QString("%1: %2 against %3").arg(name).arg(kv).arg(f.kvCacheBytes)));
        }
    }

    // A stage's placement: whole layers from the range's last backwards, then single experts, all inside
    // the range and within the budget.
    void aPlacementKeepsToItsRange() {
        runtime::PlacementRequest request{kExpert, 16 * kExpert + 3 * kExpert + kExpert / 2, {}};
        request.firstLayer = 0;
        request.endLayer = 2;
        const auto first = runtime::planPlacement(qwen_, request);
        QVERIFY(first.wholeLayer(1));  // the range's last, not the model's
        QVERIFY(!first.wholeLayer(2) && !first.splitLayer(2));
        QCOMPARE(first.gpuExperts, 19);
        for (int e = 0; e < 3; ++e) QVERIFY(first.onGpu(0, e));
        QVERIFY(first.gpuBytes <= request.budgetBytes);
        QCOMPARE(first.gpuBytes, 19 * kExpert);

        // More budget than the range has experts: only the range's.
        runtime::PlacementRequest second{kExpert, 100 * kExpert, {}};
        second.firstLayer = 2;
        const auto last = runtime::planPlacement(qwen_, second);
        QCOMPARE(last.gpuExperts, 16);
        QCOMPARE(last.wholeLayers, 1);
        QVERIFY(last.wholeLayer(2) && !last.splitLayer(0) && !last.splitLayer(1) && !last.wholeLayer(1));

        // With counts: the most used of the range's layers, never those outside it.
        ExpertUsage usage = ExpertUsage::empty(qwen_);
        usage.counts[2][9] = 1000;  // outside
        usage.counts[1][4] = 10;
        runtime::PlacementRequest counted{kExpert, 2 * kExpert, usage};
        counted.endLayer = 2;
        const auto mostUsed = runtime::planPlacement(qwen_, counted);
        QVERIFY(mostUsed.onGpu(1, 4));
        QVERIFY(!mostUsed.onGpu(2, 9));
        QCOMPARE(mostUsed.gpuExperts, 2);

        // The union of the two stages.
        const auto merged = runtime::mergePlacements(qwen_, {first, last});
        QCOMPARE(merged.gpu.size(), std::size_t{3});
        for (int l = 0; l < 3; ++l)
            for (int e = 0; e < 16; ++e) QCOMPARE(merged.onGpu(l, e), first.onGpu(l, e) || last.onGpu(l, e));
        QCOMPARE(merged.wholeLayers, 2);
        QCOMPARE(merged.gpuExperts, 35);
        QCOMPARE(merged.gpuBytes, 35 * kExpert);
        QVERIFY2(QString::fromStdString(merged.describe(qwen_)).startsWith("2 of 3 MoE layers wholly on the GPU, 3 single experts in 1 more layer"),
                 merged.describe(qwen_).c_str());
        QCOMPARE(runtime::mergePlacements(qwen_, {}).gpuExperts, 0);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, runtime::mergePlacements(qwen_, {first, mostUsed}));  // layer 1 twice
        QVERIFY_THROWS_EXCEPTION(std::logic_error, runtime::mergePlacements(qwen_, {runtime::planPlacement(deepseek_, {})}));
    }

    // The default range is every layer: the same plan as before ranges existed.
    void theDefaultRangeIsTheWholeModel() {
        const runtime::PlacementRequest request{kExpert, 2 * 16 * kExpert + 5 * kExpert, {}};
        runtime::PlacementRequest explicitRange = request;
        explicitRange.firstLayer = 0;
        explicitRange.endLayer = 3;
        const auto a = runtime::planPlacement(qwen_, request);
        const auto b = runtime::planPlacement(qwen_, explicitRange);
        QCOMPARE(a.gpu, b.gpu);
        QVERIFY(a.wholeLayer(1) && a.wholeLayer(2));
        QCOMPARE(a.gpuExperts, 37);
    }

    // The stages and their placements together: each stage's experts inside its layers and budget.
    void stagesAndTheirPlacements() {
        const auto costs = runtime::layerCosts(deepseek_, 4096);
        const std::uint64_t fixed = fixedOf(costs, 0, 3);
        const std::vector<GpuMemory> gpus{{0, fixed, "A"}, {1, fixed, "B"}};
        const auto stages = planStages(costs, 1000, 1000, gpus);
        QCOMPARE(stages.size(), std::size_t{2});
        checkPlan(stages, costs, 1000, 1000, gpus);
        std::vector<runtime::ExpertPlacement> parts;
        for (const StagePlan& s : stages) {
            runtime::PlacementRequest request{kExpert, s.expertBudget, {}};
            request.firstLayer = s.firstLayer;
            request.endLayer = s.endLayer;
            parts.push_back(runtime::planPlacement(deepseek_, request));
            QVERIFY(parts.back().gpuBytes <= s.expertBudget);
            for (int l = 0; l < deepseek_.numLayers; ++l)
                if (l < s.firstLayer || l >= s.endLayer) QVERIFY(!parts.back().wholeLayer(l) && !parts.back().splitLayer(l));
        }
        const auto merged = runtime::mergePlacements(deepseek_, parts);
        QCOMPARE(merged.gpuExperts, parts[0].gpuExperts + parts[1].gpuExperts);
        QVERIFY(merged.gpuExperts > 0);
    }

    // Each stage's budget for experts: automatic (its room less the scratch and a margin), none, or a total
    // shared in proportion to the stages' room; more than the room throws. No stage gets more than its
    // layers' experts need; what it cannot take goes to the others.
    void stageBudgets() {
        StagePlan a;
        a.device = 0;
        a.endLayer = 2;
        a.expertBudget = 10 * GB;
        StagePlan b;
        b.device = 1;
        b.firstLayer = 2;
        b.endLayer = 3;
        b.expertBudget = 5 * GB;
        const std::vector<StagePlan> stages{a, b};
        const std::vector<GpuMemory> gpus{{0, 40 * GB, "A"}, {1, 12 * GB, "B"}};
        const std::vector<std::uint64_t> lots{1000 * GB, 1000 * GB};  // needs no budget reaches
        // Margins: a tenth of each GPU, at most 2 GiB.
        const auto automatic = runtime::stageExpertBudgets(stages, gpus, -1, 1 * GB, lots);
        QCOMPARE(automatic.size(), std::size_t{2});
        QCOMPARE(automatic[0], 9 * GB - kExpertMarginBytes);
        QCOMPARE(automatic[1], 4 * GB - 12 * GB / 10);
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, 0, 1 * GB, lots), (std::vector<std::uint64_t>{0, 0}));
        // 6.5 GB over rooms of 9 and 4 GB: 4.5 and 2 GB.
        const auto shared = runtime::stageExpertBudgets(stages, gpus, static_cast<std::int64_t>(6.5 * GB), 1 * GB, lots);
        QCOMPARE(shared[0], 4'500'000'000ull);
        QCOMPARE(shared[1], 2'000'000'000ull);
        // All the room is allowed; a byte more is not, and the message names both sizes.
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, static_cast<std::int64_t>(13 * GB), 1 * GB, lots),
                 (std::vector<std::uint64_t>{9 * GB, 4 * GB}));
        try {
            runtime::stageExpertBudgets(stages, gpus, static_cast<std::int64_t>(13 * GB) + 1, 1 * GB, lots);
            QFAIL("no error for more than the stages have room for");
        } catch (const Error& e) {
            const QString message = e.what();
            QVERIFY2(message.contains("2 GPUs have only") && message.contains(QString::fromStdString(formatBytes(13 * GB))) &&
                         message.contains("--gpu-memory"),
                     e.what());
        }
        // A scratch larger than a stage's room leaves it nothing, automatic or shared.
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, -1, 6 * GB, lots)[1], std::uint64_t{0});
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, static_cast<std::int64_t>(2 * GB), 6 * GB, lots)[1], std::uint64_t{0});

        // Needs: stage a's layers take 2 GB of experts, b's 10. 6.5 GB: a is given its 2, b its room of 4
        // (4.5 GB shared first, a capped; the rest to b), and the half GB neither can take is left.
        const std::vector<std::uint64_t> needs{2 * GB, 10 * GB};
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, static_cast<std::int64_t>(6.5 * GB), 1 * GB, needs),
                 (std::vector<std::uint64_t>{2 * GB, 4 * GB}));
        // 3 GB: a's share of 2.08 is capped at 2, b takes the rest.
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, static_cast<std::int64_t>(3 * GB), 1 * GB, needs),
                 (std::vector<std::uint64_t>{2 * GB, 1 * GB}));
        // Automatic: no more than the need; a stage of dense layers only (need 0) gets nothing.
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, -1, 1 * GB, needs)[0], 2 * GB);
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, -1, 1 * GB, {0, 10 * GB})[0], std::uint64_t{0});
        QCOMPARE(runtime::stageExpertBudgets(stages, gpus, static_cast<std::int64_t>(3 * GB), 1 * GB, {0, 10 * GB}),
                 (std::vector<std::uint64_t>{0, 3 * GB}));
        QVERIFY_THROWS_EXCEPTION(std::logic_error, runtime::stageExpertBudgets(stages, gpus, -1, 1 * GB, {GB}));
    }

    // Each stage's experts are planned within its layers and budget; a stage whose layers do not all fit
    // keeps two of them as staging for prompt streaming, when streaming is allowed.
    void stageExpertsKeepToTheirStages() {
        StagePlan a;
        a.endLayer = 2;
        StagePlan b;
        b.device = 1;
        b.firstLayer = 2;
        b.endLayer = 3;
        ExpertUsage usage = ExpertUsage::empty(qwen_);
        usage.counts[0][7] = 50;
        // Stage a: 1.5 layers' budget (less than 2 staging layers: no streaming), layer 1 whole and the 8
        // most used of layer 0 (expert 7 among them). Stage b: its one layer fits whole.
        const auto plan = runtime::planStageExperts(qwen_, {a, b}, {24 * kExpert, 40 * kExpert}, kExpert, usage, true);
        QCOMPARE(plan.size(), std::size_t{2});
        QVERIFY(plan[0].placement.wholeLayer(1) && plan[0].placement.splitLayer(0) && plan[0].placement.onGpu(0, 7));
        QVERIFY(!plan[0].placement.wholeLayer(2) && !plan[0].placement.splitLayer(2));
        QCOMPARE(plan[0].placement.gpuExperts, 24);
        QVERIFY(!plan[0].streams);
        QVERIFY(plan[1].placement.wholeLayer(2) && !plan[1].placement.wholeLayer(1) && !plan[1].placement.splitLayer(0));
        QCOMPARE(plan[1].placement.gpuExperts, 16);
        QVERIFY(!plan[1].streams);  // every one of its layers fits
        QCOMPARE(runtime::mergePlacements(qwen_, {plan[0].placement, plan[1].placement}).gpuExperts, 40);

        // One stage of all three layers with 2.5 layers' budget: two layers' staging, 8 experts placed.
        StagePlan all;
        all.endLayer = 3;
        const auto streamed = runtime::planStageExperts(qwen_, {all}, {40 * kExpert}, kExpert, {}, true);
        QVERIFY(streamed[0].streams);
        QCOMPARE(streamed[0].placement.gpuExperts, 8);
        const auto unstreamed = runtime::planStageExperts(qwen_, {all}, {40 * kExpert}, kExpert, {}, false);
        QVERIFY(!unstreamed[0].streams);
        QCOMPARE(unstreamed[0].placement.gpuExperts, 40);
        QVERIFY_THROWS_EXCEPTION(std::logic_error, runtime::planStageExperts(qwen_, {a, b}, {kExpert}, kExpert, {}, true));
    }
};

QTEST_GUILESS_MAIN(StagePlanTest)
#include "tst_stage_plan.moc"
