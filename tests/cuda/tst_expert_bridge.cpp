// The expert bridge's protocol, with the test playing the GPU: it fills a slot, signals it as the host
// nodes do, and waits for the immediate and deferred parts, which must add up to exact MoE output. The
// bridge is served as the engine thread serves it (pumpUntil), or from a second thread while the test
// waits as a host node does.
// Run with the reference experts (computed on the bridge thread) and with the packed CPU engine, whose
// parts are queued on the pool.
#include <QTest>
#include <chrono>
#include <optional>
#include <thread>

#include "cpu/moe/moe_layer.h"
#include "cpu/pool/thread_pool.h"
#include "runtime/gpu/expert_bridge.h"
#include "io/checkpoint.h"
#include "model/config.h"
#include "model/feed_forward.h"
#include "model/routed_experts.h"
#include "model/weights.h"
#include "runtime/packed_experts.h"
#include "test_support.h"

using namespace tandem;

class ExpertBridgeTest : public QObject {
    Q_OBJECT

    struct Fixture {
        model::ModelConfig config = model::loadModelConfig(test::fixturePath("tiny-qwen3moe").toStdString());
        io::Checkpoint checkpoint{test::fixturePath("tiny-qwen3moe").toStdString()};
        model::ModelWeights weights = model::loadWeights(checkpoint, config);
        cpu::ThreadPool pool{2};
        std::unique_ptr<runtime::PackedExperts> packed;

        // The experts of a data row: "reference", or "packed" (bf16 experts, whose parts are exact to
        // rounding against a whole run of the same kernels).
        std::unique_ptr<model::QueuedRoutedExperts> experts(const QString& kind) {
            if (kind == "reference") return model::computeOnSubmit(model::makeReferenceExperts(weights, pool));
            if (!packed) packed = std::make_unique<runtime::PackedExperts>(config, weights, io::ExpertType::BF16, pool);
            return packed->newRunner();
        }
    };

    static void addRows() {
        QTest::addColumn<QString>("experts");
        QTest::newRow("reference") << "reference";
        QTest::newRow("packed") << "packed";
    }

    // Serves the bridge until the GPU's wait at this slot (and the previous one's deferred part) is over.
    static void serve(cuda::ExpertBridge& bridge, const cuda::ExpertSlot& slot, const cuda::ExpertSlot* previous = nullptr) {
        bridge.pumpUntil([&] {
            return slot.control->immediateDone >= slot.control->ready &&
                   (!previous || previous->control->deferredDone >= previous->control->ready);
        });
    }
    static void serveDeferred(cuda::ExpertBridge& bridge, const cuda::ExpertSlot& slot) {
        bridge.pumpUntil([&] { return slot.control->deferredDone >= slot.control->ready; });
    }

private slots:
    void immediatePlusDeferredIsExact_data() { addRows(); }
    void immediatePlusDeferredIsExact() {
        QFETCH(QString, experts);
        Fixture f;
        auto runner = f.experts(experts);
        auto whole = f.experts(experts);  // the same computation in one part, for comparison
        const int H = f.config.hiddenSize, k = f.config.router.topK, T = 3;
        std::vector<float> x(static_cast<std::size_t>(T * H));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
        const auto& moe = *f.weights.layers[1].moe;
        std::vector<int> ids(static_cast<std::size_t>(T * k));
        std::vector<float> weights(ids.size());
        model::routeTokens(f.config, moe, x.data(), T, ids.data(), weights.data(), f.pool);
        std::vector<float> exact(x.size());
        whole->run(1, x.data(), T, ids.data(), weights.data(), k, 0, k, exact.data());

        std::vector<float> immediate(x.size()), deferred(x.size(), 1.0f);
        cuda::SlotControl control{};
        cuda::ExpertSlot slot;
        slot.x = x.data();
        slot.ids = ids.data();
        slot.weights = weights.data();
        slot.immediateOut = immediate.data();
        slot.deferredOut = deferred.data();
        slot.control = &control;
        slot.tokens = T;
        cuda::ExpertBridge bridge(f.config, f.config.layers, std::move(runner), {&slot});
        // Host-node style: a second thread serves the bridge while this one waits in waitFromHost.
        std::optional<cuda::ExpertBridge::ServeMeanwhile> server(std::in_place, bridge);

        std::vector<float> deferredImmediate;
        for (const bool skip : {false, true}) {
            bridge.setDeferral(2, skip);
            cuda::ExpertBridge::submitFromHost(slot, 1);  // layer 1 is followed by MoE layer 2: may defer
            cuda::ExpertBridge::waitFromHost(slot, nullptr);
            while (control.deferredDone < control.ready) std::this_thread::yield();
            if (skip) QCOMPARE(deferred, std::vector<float>(deferred.size(), 0.0f));
            for (std::size_t i = 0; i < x.size(); ++i) {
                if (skip) {  // the same immediate part; the deferred part dropped
                    QCOMPARE(immediate[i], deferredImmediate[i]);
                    QCOMPARE(deferred[i], 0.0f);
                } else {
                    const float sum = immediate[i] + deferred[i];
                    QVERIFY2(std::abs(sum - exact[i]) < 1e-5f * (1 + std::abs(exact[i])), qPrintable(QString::number(i)));
                }
            }
            if (!skip) QVERIFY(std::any_of(deferred.begin(), deferred.end(), [](float v) { return v != 0.0f; }));
            deferredImmediate = immediate;
        }

        // The last layer defers nothing, whatever the setting.
        bridge.setDeferral(2, false);
        model::routeTokens(f.config, *f.weights.layers[2].moe, x.data(), T, ids.data(), weights.data(), f.pool);
        whole->run(2, x.data(), T, ids.data(), weights.data(), k, 0, k, exact.data());
        cuda::ExpertBridge::submitFromHost(slot, 2);
        cuda::ExpertBridge::waitFromHost(slot, nullptr);
        for (std::size_t i = 0; i < x.size(); ++i) QVERIFY(std::abs(immediate[i] - exact[i]) < 1e-5f * (1 + std::abs(exact[i])));
        while (control.deferredDone < control.ready) std::this_thread::yield();
        server.reset();
        QCOMPARE(control.ready, std::uint64_t(3));
        QCOMPARE(control.immediateDone, std::uint64_t(3));
        bridge.rethrowFailure();
    }

    void cpuFailureIsReportedNotHung_data() { addRows(); }
    void cpuFailureIsReportedNotHung() {
        // An expert id out of range makes the CPU side throw: the GPU side must still be released,
        // and the failure must reach the engine thread.
        QFETCH(QString, experts);
        Fixture f;
        const int H = f.config.hiddenSize, k = f.config.router.topK;
        std::vector<float> x(static_cast<std::size_t>(H), 0.5f), out(x.size()), deferred(x.size());
        std::vector<int> ids(static_cast<std::size_t>(k), 0);
        ids[0] = 10000;
        std::vector<float> weights(ids.size(), 0.25f);
        cuda::SlotControl control{};
        cuda::ExpertSlot slot{x.data(), ids.data(), weights.data(), out.data(), deferred.data(), &control, 1, 0};
        cuda::ExpertBridge bridge(f.config, f.config.layers, f.experts(experts), {&slot});
        bridge.setDeferral(1, false);
        cuda::ExpertBridge::submitFromHost(slot, 1);
        serve(bridge, slot);
        serveDeferred(bridge, slot);
        QVERIFY_THROWS_EXCEPTION(std::exception, bridge.rethrowFailure());
    }

    // A layer split between the GPU and the CPU: the CPU computes neither the experts the placement
    // holds on the GPU nor, in a streamed prompt chunk, the copied ones (setGpuFrom), and computes all
    // of them again once those are lifted.
    void theGpusExpertsAreLeftOut_data() { addRows(); }
    void theGpusExpertsAreLeftOut() {
        QFETCH(QString, experts);
        Fixture f;
        auto whole = f.experts(experts);
        const int H = f.config.hiddenSize, k = f.config.router.topK, T = 5, E = f.config.numExperts;
        std::vector<float> x(static_cast<std::size_t>(T * H));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.29f * static_cast<float>(i));
        std::vector<int> ids(static_cast<std::size_t>(T * k));
        std::vector<float> weights(ids.size());
        model::routeTokens(f.config, *f.weights.layers[1].moe, x.data(), T, ids.data(), weights.data(), f.pool);
        std::vector<std::vector<bool>> held(static_cast<std::size_t>(f.config.numLayers));
        held[1].assign(static_cast<std::size_t>(E), false);
        held[1][static_cast<std::size_t>(ids[0])] = true;  // the first token's top expert
        const int gpuFrom = E - 2;
        std::vector<int> cpuIds = ids, allIds = ids;
        for (int& e : cpuIds)
            if (e >= gpuFrom || held[1][static_cast<std::size_t>(e)]) e = cpu::kComputedElsewhere;
        QVERIFY(cpuIds != ids);
        std::vector<float> expected(x.size()), all(x.size());
        whole->run(1, x.data(), T, cpuIds.data(), weights.data(), k, 0, k, expected.data());
        whole->run(1, x.data(), T, allIds.data(), weights.data(), k, 0, k, all.data());

        std::vector<float> immediate(x.size()), deferred(x.size());
        cuda::SlotControl control{};
        cuda::ExpertSlot slot{x.data(), ids.data(), weights.data(), immediate.data(), deferred.data(), &control, T, 0};
        cuda::ExpertBridge bridge(f.config, f.config.layers, f.experts(experts), {&slot});
        bridge.setDeferral(1, false);  // the masked slots may fall in either part
        auto check = [&](const std::vector<float>& want) {
            cuda::ExpertBridge::submitFromHost(slot, 1);
            serve(bridge, slot);
            serveDeferred(bridge, slot);
            bridge.rethrowFailure();
            for (std::size_t i = 0; i < x.size(); ++i)
                QVERIFY2(std::abs(immediate[i] + deferred[i] - want[i]) < 1e-5f * (1 + std::abs(want[i])), qPrintable(QString::number(i)));
        };
        runtime::UsageCounter usage(runtime::ExpertUsage::empty(f.config));
        bridge.countUsage(&usage);
        bridge.computeOnGpu(held);
        bridge.setGpuFrom(1, gpuFrom);
        check(expected);
        QVERIFY(ids == allIds);  // the slot's routing itself is left as the GPU wrote it
        // Every choice is counted, the GPU's experts' too: the next placement ranks them all.
        QCOMPARE(usage.added(), static_cast<std::uint64_t>(T * k));
        QVERIFY(usage.snapshot().counts[1][static_cast<std::size_t>(ids[0])] >= 1);
        bridge.computeOnGpu({});
        bridge.setGpuFrom(1, E);
        check(all);
    }

    // The decode pattern: MoE layers alternate between two slots, and each layer waits for its own
    // immediate part and for the previous layer's deferred part, as the GPU does. Every layer's
    // immediate + deferred must equal the whole computation, with the pool busy on one slot's deferred
    // part while the other slot's immediate part is queued behind it.
    void alternatingSlotsOverlap_data() { addRows(); }
    void alternatingSlotsOverlap() {
        QFETCH(QString, experts);
        Fixture f;
        auto whole = f.experts(experts);
        const int H = f.config.hiddenSize, k = f.config.router.topK;
        struct Data {
            std::vector<float> x, immediate, deferred, weights;
            std::vector<int> ids;
            cuda::SlotControl control{};
            cuda::ExpertSlot slot;
        };
        Data d[2];
        for (auto& s : d) {
            s.x.resize(static_cast<std::size_t>(H));
            s.immediate.resize(s.x.size());
            s.deferred.resize(s.x.size());
            s.ids.resize(static_cast<std::size_t>(k));
            s.weights.resize(s.ids.size());
            s.slot = {s.x.data(), s.ids.data(), s.weights.data(), s.immediate.data(), s.deferred.data(), &s.control, 1, 0};
        }
        cuda::ExpertBridge bridge(f.config, f.config.layers, f.experts(experts), {&d[0].slot, &d[1].slot});
        bridge.setDeferral(k / 2, false);
        std::vector<float> exact(static_cast<std::size_t>(H));
        const int layers = f.config.numLayers;
        const auto begin = std::chrono::steady_clock::now();
        for (int step = 0; step < 3; ++step) {
            Data* previous = nullptr;
            int previousLayer = -1;
            for (int l = 0, moe = 0; l < layers; ++l) {
                if (!f.config.isMoeLayer(l)) continue;
                Data& s = d[moe++ % 2];
                for (int i = 0; i < H; ++i) s.x[static_cast<std::size_t>(i)] = std::cos(0.11f * static_cast<float>(i * (l + 2) + step));
                model::routeTokens(f.config, *f.weights.layers[static_cast<std::size_t>(l)].moe, s.x.data(), 1, s.ids.data(),
                                   s.weights.data(), f.pool);
                cuda::ExpertBridge::submitFromHost(s.slot, l);
                serve(bridge, s.slot, previous ? &previous->slot : nullptr);
                if (previous) QVERIFY(previous->control.deferredDone == previous->control.ready);
                const bool last = l + 1 == layers;
                if (last) serveDeferred(bridge, s.slot);
                // Check the previous layer now that its deferred part is in, and the last layer at once.
                auto check = [&](Data& c, int layer) {
                    whole->run(layer, c.x.data(), 1, c.ids.data(), c.weights.data(), k, 0, k, exact.data());
                    for (int i = 0; i < H; ++i) {
                        const auto u = static_cast<std::size_t>(i);
                        QVERIFY2(std::abs(c.immediate[u] + c.deferred[u] - exact[u]) < 1e-5f * (1 + std::abs(exact[u])),
                                 qPrintable(QString("step %1 layer %2 column %3").arg(step).arg(layer).arg(i)));
                    }
                };
                if (previous) check(*previous, previousLayer);
                if (last) {
                    check(s, l);
                    QVERIFY(std::all_of(s.deferred.begin(), s.deferred.end(), [](float v) { return v == 0.0f; }));
                }
                previous = &s;
                previousLayer = l;
            }
        }
        bridge.rethrowFailure();
        // The profile books CPU time to every MoE layer, and no more than the wall time that passed.
        const auto cpu = bridge.takeCpuSeconds();
        double total = 0;
        for (int l = 0; l < layers; ++l)
            if (f.config.isMoeLayer(l)) {
                QVERIFY2(cpu[static_cast<std::size_t>(l)] > 0, qPrintable(QString("layer %1").arg(l)));
                total += cpu[static_cast<std::size_t>(l)];
            }
        QVERIFY(total < std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    }
};

QTEST_GUILESS_MAIN(ExpertBridgeTest)
#include "tst_expert_bridge.moc"
