// The placement plan (runtime/placement.h): for given VRAM budgets, which routed experts go to the GPU.
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <numeric>
#include <thread>

#include "model/config.h"
#include "runtime/placement.h"
#include "tandem/convert.h"
#include "tandem/engine.h"
#include "tandem/byte_size.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using runtime::ExpertUsage;
using runtime::planPlacement;

class PlacementTest : public QObject {
    Q_OBJECT

    // tiny-qwen3moe: 3 MoE layers of 16 experts; tiny-deepseekv2: a dense layer, then 2 MoE layers of 16.
    model::ModelConfig qwen_ = model::loadModelConfig(test::fixturePath("tiny-qwen3moe").toStdString());
    model::ModelConfig deepseek_ = model::loadModelConfig(test::fixturePath("tiny-deepseekv2").toStdString());
    static constexpr std::uint64_t kExpert = 1000;

    static int onGpu(const runtime::ExpertPlacement& p, int layer) {
        int n = 0;
        for (const bool b : p.gpu[static_cast<std::size_t>(layer)]) n += b ? 1 : 0;
        return n;
    }

private slots:
    void noBudgetKeepsEverythingOnTheCpu() {
        const auto p = planPlacement(qwen_, {kExpert, kExpert - 1, {}});
        QCOMPARE(p.gpuExperts, 0);
        QCOMPARE(QString::fromStdString(p.describe(qwen_)), QString("all routed experts on the CPU"));
    }

    void wholeLayersComeFirstFromTheLast() {
        const auto p = planPlacement(qwen_, {kExpert, 2 * 16 * kExpert, {}});
        QCOMPARE(p.wholeLayers, 2);
        QVERIFY(!p.wholeLayer(0) && p.wholeLayer(1) && p.wholeLayer(2));
        QCOMPARE(onGpu(p, 0), 0);
        QCOMPARE(p.gpuBytes, 32 * kExpert);
        QVERIFY2(QString::fromStdString(p.describe(qwen_)).startsWith("2 of 3 MoE layers wholly on the GPU"),
                 p.describe(qwen_).c_str());
    }

    void denseLayersHoldNoExperts() {
        const auto p = planPlacement(deepseek_, {kExpert, 100 * 16 * kExpert, {}});
        QCOMPARE(p.wholeLayers, 2);
        QVERIFY(p.gpu[0].empty());
        QVERIFY(!p.wholeLayer(0) && !p.splitLayer(0));
        QCOMPARE(p.gpuExperts, 32);
        QCOMPARE(p.gpuBytes, 32 * kExpert);  // the budget beyond every expert stays unused
    }

    void theRestGoesToTheMostUsedExperts() {
        ExpertUsage usage = ExpertUsage::empty(qwen_);
        // Layer 1 (the next CPU layer) barely used, layer 0's experts 3 and 7 used most.
        usage.counts[0][3] = 50;
        usage.counts[0][7] = 40;
        usage.counts[0][1] = 10;
        usage.counts[1][5] = 1;
        usage.counts[1][6] = 99;
        const auto p = planPlacement(qwen_, {kExpert, 16 * kExpert + 3 * kExpert + kExpert / 2, usage});
        QCOMPARE(p.wholeLayers, 1);
        QVERIFY(p.wholeLayer(2));
        // Shares: layer 1 expert 6 has 0.99 of its layer, layer 0 experts 3 and 7 0.5 and 0.4.
        QVERIFY(p.onGpu(1, 6));
        QVERIFY(p.onGpu(0, 3));
        QVERIFY(p.onGpu(0, 7));
        QCOMPARE(p.gpuExperts, 19);
        QVERIFY(p.splitLayer(0) && p.splitLayer(1));
        QVERIFY2(QString::fromStdString(p.describe(qwen_)).contains("3 single experts in 2 more layers"), p.describe(qwen_).c_str());
    }

    // A split layer keeps the CPU's hand-over, so it defers and takes deferred experts as a CPU layer does.
    void aSplitLayerDefersAsACpuLayer() {
        const auto p = planPlacement(qwen_, {kExpert, 5 * kExpert, {}});
        QVERIFY(p.splitLayer(2) && p.wholeLayers == 0);
        const auto placed = runtime::placedLayers(qwen_.layers, p);
        for (std::size_t l = 0; l < placed.size(); ++l) {
            QCOMPARE(placed[l].mayDefer, qwen_.layers[l].mayDefer);
            QCOMPARE(placed[l].deferredFrom, qwen_.layers[l].deferredFrom);
        }
    }

    // A pipeline stage (issue 29) keeps deferral inside its layers: with stages [0, 1) and [1, 3), layer 0
    // would defer into layer 1 on the other GPU, so it does not, and layer 1 takes nothing; inside the
    // second stage layer 1 still defers into layer 2. Both stages agree.
    void deferralStopsAtAStagesEdges() {
        QCOMPARE(qwen_.layers.size(), std::size_t{3});
        QVERIFY(qwen_.layers[0].mayDefer && qwen_.layers[1].deferredFrom == 0 && qwen_.layers[2].deferredFrom == 1);
        for (const auto& stage : {runtime::stageLayers(qwen_.layers, 0, 1), runtime::stageLayers(qwen_.layers, 1, 3)}) {
            QCOMPARE(stage.size(), qwen_.layers.size());
            QVERIFY(!stage[0].mayDefer);
            QCOMPARE(stage[1].deferredFrom, -1);
            QVERIFY(stage[1].mayDefer);
            QCOMPARE(stage[2].deferredFrom, 1);
        }
        // One stage of every layer: the model's own plan.
        const auto whole = runtime::stageLayers(qwen_.layers, 0, 3);
        for (std::size_t l = 0; l < whole.size(); ++l) {
            QCOMPARE(whole[l].mayDefer, qwen_.layers[l].mayDefer);
            QCOMPARE(whole[l].deferredFrom, qwen_.layers[l].deferredFrom);
        }
    }

    // Deferral hands a layer's deferred experts to the next MoE layer on the CPU: with layer 2 on the GPU,
    // layer 1 may not defer into it, and layer 2 takes nothing; layer 0 still defers into layer 1.
    void layersOnTheGpuNeitherDeferNorTakeDeferredExperts() {
        QVERIFY(qwen_.layers[1].mayDefer && qwen_.layers[2].deferredFrom == 1);
        const runtime::PlacementRequest request{kExpert, 16 * kExpert, {}};
        const auto placed = runtime::placedLayers(qwen_.layers, planPlacement(qwen_, request));
        QCOMPARE(placed.size(), qwen_.layers.size());
        QVERIFY(placed[0].mayDefer);
        QCOMPARE(placed[1].deferredFrom, 0);
        QVERIFY(!placed[1].mayDefer);
        QVERIFY(!placed[2].mayDefer);
        QCOMPARE(placed[2].deferredFrom, -1);
        // Everything on the CPU: the model's own plan.
        const auto none = runtime::placedLayers(qwen_.layers, planPlacement(qwen_, {kExpert, 0, {}}));
        for (std::size_t l = 0; l < none.size(); ++l) {
            QCOMPARE(none[l].mayDefer, qwen_.layers[l].mayDefer);
            QCOMPARE(none[l].deferredFrom, qwen_.layers[l].deferredFrom);
        }
    }

    // --gpu-memory's sizes.
    // Prefill streaming's CPU share: the CPU's time for its experts equals the link's for the rest, less
    // a tenth; more tokens per chunk make the CPU's share smaller.
    void theCpuShareOfAStreamedLayerBalancesTheLink() {
        runtime::StreamCost cost;
        QCOMPARE(runtime::streamCpuExperts(cost, 128, 512), 0);  // not measured
        cost.linkBytesPerSecond = 50e9;
        cost.expertBytes = 2'500'000;                           // 50 us a copy
        cost.cpu = {{256, 0.2e-6}, {2048, 0.1e-6}};
        QCOMPARE(cost.cpuSecondsPerTokenExpert(100), 0.2e-6);   // below the first size: the first
        QCOMPARE(cost.cpuSecondsPerTokenExpert(4096), 0.1e-6);  // above the last: the last
        QVERIFY(std::abs(cost.cpuSecondsPerTokenExpert(1152) - 0.15e-6) < 1e-12);
        // 256 tokens: 51.2 us a CPU expert against 50 us a copy: 0.9 x 128 x 50 / 101.2 = 56.9.
        QCOMPARE(runtime::streamCpuExperts(cost, 128, 256), 56);
        // 2048 tokens: 204.8 us against 50: 0.9 x 128 x 50 / 254.8 = 22.6.
        QCOMPARE(runtime::streamCpuExperts(cost, 128, 2048), 22);
        // With the GPU's attention taking 2 ms before the CPU starts: 0.9 x (128 x 50 - 2000) / 254.8 = 15.5.
        QCOMPARE(runtime::streamCpuExperts(cost, 128, 2048, 2e-3), 15);
        QCOMPARE(runtime::streamCpuExperts(cost, 128, 2048, 7e-3), 0);  // longer than the whole copy
        // The hand-over's copies count as the attention does: 0.9 x (6400 - 2000 - 3000) / 254.8 = 4.9,
        // but 4 experts would make the layer max(124 x 50, 5000 + 4 x 204.8) = 6200 us against 6400: under
        // the 5% a share must gain, so none.
        QCOMPARE(runtime::streamCpuExperts(cost, 128, 2048, 2e-3, 3e-3), 0);
        // 512 tokens with the same costs per token (the CPU's 0.186 us per token-expert there, 95.1 us an
        // expert): 0.9 x (6400 - 500 - 750) / 145.1 = 31.9; the layer max(97 x 50, 1250 + 31 x 95.1) =
        // 4850 us, 24% faster.
        QCOMPARE(runtime::streamCpuExperts(cost, 128, 512, 0.5e-3, 0.75e-3), 31);
        cost.cpu = {{256, 1e-12}};  // a CPU far faster than the link still leaves the GPU one expert
        QCOMPARE(runtime::streamCpuExperts(cost, 128, 256), 115);
        QVERIFY(QString::fromStdString(cost.describe()).startsWith("link 50.0 GB/s, CPU "));
    }

    // A share the model chose is dropped for chunks of a size where it made the streamed layers slower
    // than the link alone: as timed for that size when known, else as predicted.
    void aShareSlowerThanTheLinkAloneIsDropped() {
        runtime::StreamShareVerdicts v;
        QVERIFY(!v.vetoed(2048));
        v.record(512, 31, 9.0e-3, 6.2e-3);  // the first chunk (cold pages and kernels): not judged
        QVERIFY(!v.vetoed(512));
        v.record(512, 31, 4.4e-3, 6.2e-3);  // faster than the predicted 6.2 ms: kept
        QVERIFY(!v.vetoed(512));
        v.record(2048, 10, 7.1e-3, 6.2e-3);  // slower than predicted: dropped for 1025-2048 tokens
        QVERIFY(v.vetoed(2048));
        QVERIFY(v.vetoed(1500));
        QVERIFY(!v.vetoed(512));
        QVERIFY(!v.vetoed(4096));
        // The link alone timed at 1024 tokens (a share of 0) is what a share is held against there.
        v.record(1024, 0, 8.0e-3, 6.2e-3);
        v.record(1024, 12, 7.0e-3, 6.2e-3);  // slower than predicted, faster than the link alone timed
        QVERIFY(!v.vetoed(1024));
        v.record(1024, 12, 7.9e-3, 6.2e-3);  // within 2% of the link alone: no gain worth the hand-over
        QVERIFY(v.vetoed(1000));
        v.record(256, 20, 0.0, 6.2e-3);  // not timed: no verdict
        QVERIFY(!v.vetoed(256));
    }

    void streamCopiesRoutedExpertsWhereThatIsFaster() {
        runtime::StreamCopyChoice c;
        QVERIFY(!c.routed(512));  // nothing counted yet: whole layers
        QCOMPARE(c.routedShare(512), 1.0);
        c.record(512, false, 0.62, 9.0e-3);  // the first chunk: counted, not timed
        QCOMPARE(c.routedShare(512), 0.62);
        QVERIFY(c.routed(512));  // routed copies untried: tried
        QVERIFY(!c.routed(2048));
        c.record(2048, false, 0.97, 6.3e-3);  // nearly every expert chosen: whole layers
        QVERIFY(!c.routed(2048));
        c.record(512, true, 0.61, 4.8e-3);
        c.record(512, false, 0.63, 6.2e-3);
        QVERIFY(c.routed(512));  // timed the faster
        c.record(512, true, 0.60, 6.5e-3);
        QVERIFY(!c.routed(400));  // now the slower (same bucket)
        c.record(512, false, 0.95, 6.2e-3);
        QVERIFY(!c.routed(512));  // too many chosen to try
        // Whole layers never timed warm: routed copies are held against the link's copy of a whole layer.
        runtime::StreamCopyChoice d;
        d.record(2048, false, 0.8, 9e-3, 6.2e-3);  // the first chunk: counted
        QVERIFY(d.routed(2048));
        d.record(2048, true, 0.8, 8.0e-3, 6.2e-3);  // slower than the link would copy whole layers
        QVERIFY(!d.routed(2048));
    }

    void gpuMemorySizesParse() {
        QCOMPARE(parseByteSize("0", "--gpu-memory"), std::uint64_t{0});
        QCOMPARE(parseByteSize("16G", "--gpu-memory"), std::uint64_t{16'000'000'000});
        QCOMPARE(parseByteSize("16 gb", "--gpu-memory"), std::uint64_t{16'000'000'000});
        QCOMPARE(parseByteSize("800M", "--gpu-memory"), std::uint64_t{800'000'000});
        QCOMPARE(parseByteSize("1.5GiB", "--gpu-memory"), std::uint64_t{1610612736});
        QCOMPARE(parseByteSize("4096", "--gpu-memory"), std::uint64_t{4096});
        for (const char* bad : {"", "lots", "-1G", "16X", "G", "1e30"}) {
            try {
                parseByteSize(bad, "--gpu-memory");
                QFAIL(qPrintable(QString("accepted '%1'").arg(bad)));
            } catch (const Error& e) {
                QVERIFY2(QString(e.what()).startsWith("--gpu-memory takes a size"), e.what());
            }
        }
    }

    void withoutCountsTheNextLayerFillsInOrder() {
        const auto p = planPlacement(qwen_, {kExpert, 16 * kExpert + 5 * kExpert, {}});
        QVERIFY(p.wholeLayer(2));
        QCOMPARE(onGpu(p, 1), 5);
        for (int e = 0; e < 5; ++e) QVERIFY(p.onGpu(1, e));
        QCOMPARE(onGpu(p, 0), 0);
    }

    // ModelInfo::expertLayers on the CPU: 'C' for each MoE layer, '-' for the dense ones; and what a loaded
    // model reports (the fixture on the CPU).
    void theLayerMapMarksEachLayer() {
        QCOMPARE(QString::fromStdString(runtime::cpuExpertLayerMap(qwen_)), QString("CCC"));
        QCOMPARE(QString::fromStdString(runtime::cpuExpertLayerMap(deepseek_)), QString("-CC"));
        tandem::EngineOptions options;
        options.device = tandem::Device::Cpu;
        options.dense = tandem::DensePrecision::Int8;
        const auto engine = tandem::Engine::load(test::fixturePath("tiny-deepseekv2").toStdString(), options);
        QCOMPARE(QString::fromStdString(engine->info().expertLayers), QString("-CC"));
        // On the CPU a decode step reads the dense weights as held and the chosen experts: int8 dense
        // weights read less than the checkpoint's.
        const tandem::ModelInfo& info = engine->info();
        QVERIFY(info.routedBytesPerToken > 0 && info.cpuBytesPerToken > info.routedBytesPerToken);
        options.dense = tandem::DensePrecision::Checkpoint;
        const auto full = tandem::Engine::load(test::fixturePath("tiny-deepseekv2").toStdString(), options);
        QVERIFY2(full->info().cpuBytesPerToken - full->info().routedBytesPerToken > info.cpuBytesPerToken - info.routedBytesPerToken,
                 qPrintable(QString("%1 / %2").arg(full->info().cpuBytesPerToken).arg(info.cpuBytesPerToken)));
    }

    // A store's model counts every routing choice it computes and saves the counts beside the store when
    // it is unloaded; the next load starts from them.
    void aStoreKeepsItsExpertUsage() {
        QTemporaryDir dir;
        const std::string store = dir.filePath("store").toStdString();
        QVERIFY(!tandem::convertModel({test::fixturePath("tiny-qwen3moe").toStdString(), store, tandem::ExpertPrecision::INT8, 2}).cancelled);
        const std::uint64_t perToken = static_cast<std::uint64_t>(qwen_.router.topK * qwen_.moeLayerCount());
        tandem::EngineOptions options;
        options.device = tandem::Device::Cpu;
        for (const int tokens : {5, 2}) {
            auto engine = tandem::Engine::load(store, options);
            auto session = engine->newSession();
            std::vector<int> ids(static_cast<std::size_t>(tokens));
            std::iota(ids.begin(), ids.end(), 7);
            session->append(ids);
        }
        const ExpertUsage saved = ExpertUsage::load(store, qwen_);
        QCOMPARE(saved.total(), 7 * perToken);
        for (const auto& row : saved.counts)
            if (!row.empty()) QCOMPARE(std::accumulate(row.begin(), row.end(), std::uint64_t{0}), 7 * static_cast<std::uint64_t>(qwen_.router.topK));
    }

    void usageCountersAddFromManyThreads() {
        runtime::UsageCounter counter(ExpertUsage::empty(qwen_));
        const int ids[] = {0, 1, 2, 3};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t)
            threads.emplace_back([&] {
                for (int i = 0; i < 1000; ++i) counter.add(1, ids, 4);
            });
        for (auto& t : threads) t.join();
        QCOMPARE(counter.added(), std::uint64_t{16000});
        QCOMPARE(counter.snapshot().counts[1][3], std::uint64_t{4000});
        counter.add(99, ids, 4);  // no such layer: nothing
        QCOMPARE(counter.added(), std::uint64_t{16000});
    }

    void usageIsCountedSavedAndLoaded() {
        QTemporaryDir dir;
        ExpertUsage usage = ExpertUsage::empty(qwen_);
        const int ids[] = {1, 2, 2, 15, -1, 99};
        usage.add(1, ids, 6);
        QCOMPARE(usage.total(), std::uint64_t{4});
        QCOMPARE(usage.counts[1][2], std::uint64_t{2});
        std::string problem;
        QVERIFY(usage.save(dir.path().toStdString(), problem));
        const ExpertUsage back = ExpertUsage::load(dir.path().toStdString(), qwen_);
        QCOMPARE(back.counts, usage.counts);
        // Another model's counts (other shape) are ignored, not an error.
        const ExpertUsage other = ExpertUsage::load(dir.path().toStdString(), deepseek_);
        QCOMPARE(other.total(), std::uint64_t{0});
    }
};

QTEST_GUILESS_MAIN(PlacementTest)
#include "tst_placement.moc"
