// The expert bridge's protocol, with the test playing the GPU: it fills a slot, signals it as the host
// nodes do, and waits for the immediate and deferred parts, which must add up to exact MoE output.
#include <QTest>
#include <thread>

#include "cpu/thread_pool.h"
#include "cuda/expert_bridge.h"
#include "io/checkpoint.h"
#include "model/config.h"
#include "model/feed_forward.h"
#include "model/routed_experts.h"
#include "model/weights.h"
#include "test_support.h"

using namespace tandem;

class ExpertBridgeTest : public QObject {
    Q_OBJECT

    struct Fixture {
        model::ModelConfig config = model::loadModelConfig(test::fixturePath("tiny-qwen3moe").toStdString());
        io::Checkpoint checkpoint{test::fixturePath("tiny-qwen3moe").toStdString()};
        model::ModelWeights weights = model::loadWeights(checkpoint, config);
        cpu::ThreadPool pool{2};
    };

private slots:
    void immediatePlusDeferredIsExact() {
        Fixture f;
        const int H = f.config.hiddenSize, k = f.config.router.topK, T = 3;
        std::vector<float> x(static_cast<std::size_t>(T * H));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
        const auto& moe = *f.weights.layers[1].moe;
        std::vector<int> ids(static_cast<std::size_t>(T * k));
        std::vector<float> weights(ids.size());
        model::routeTokens(f.config, moe, x.data(), T, ids.data(), weights.data(), f.pool);
        std::vector<float> exact(x.size());
        model::routedExperts(moe, x.data(), T, ids.data(), weights.data(), k, 0, k, exact.data(), f.pool);

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
        cuda::ExpertBridge bridge(f.config, model::makeReferenceExperts(f.weights, f.pool), {&slot});
        bridge.setActive(true);

        std::vector<float> deferredImmediate;
        for (const bool skip : {false, true}) {
            bridge.setDeferral(2, skip);
            cuda::ExpertBridge::submitFromHost(slot, 1);  // layer 1 is followed by MoE layer 2: may defer
            cuda::ExpertBridge::waitFromHost(slot, nullptr);
            while (control.deferredDone < control.ready) std::this_thread::yield();
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
        model::routedExperts(*f.weights.layers[2].moe, x.data(), T, ids.data(), weights.data(), k, 0, k, exact.data(), f.pool);
        cuda::ExpertBridge::submitFromHost(slot, 2);
        cuda::ExpertBridge::waitFromHost(slot, nullptr);
        for (std::size_t i = 0; i < x.size(); ++i) QVERIFY(std::abs(immediate[i] - exact[i]) < 1e-5f * (1 + std::abs(exact[i])));
        QCOMPARE(control.ready, std::uint64_t(3));
        QCOMPARE(control.immediateDone, std::uint64_t(3));
        bridge.setActive(false);
        bridge.rethrowFailure();
    }

    void cpuFailureIsReportedNotHung() {
        // An expert id out of range makes the CPU side throw: the GPU side must still be released,
        // and the failure must reach the engine thread.
        Fixture f;
        const int H = f.config.hiddenSize, k = f.config.router.topK;
        std::vector<float> x(static_cast<std::size_t>(H), 0.5f), out(x.size()), deferred(x.size());
        std::vector<int> ids(static_cast<std::size_t>(k), 0);
        ids[0] = 10000;
        std::vector<float> weights(ids.size(), 0.25f);
        cuda::SlotControl control{};
        cuda::ExpertSlot slot{x.data(), ids.data(), weights.data(), out.data(), deferred.data(), &control, 1, 0};
        cuda::ExpertBridge bridge(f.config, model::makeReferenceExperts(f.weights, f.pool), {&slot});
        bridge.setActive(true);
        cuda::ExpertBridge::submitFromHost(slot, 1);
        cuda::ExpertBridge::waitFromHost(slot, nullptr);
        bridge.setActive(false);
        QVERIFY_THROWS_EXCEPTION(std::exception, bridge.rethrowFailure());
    }
};

QTEST_GUILESS_MAIN(ExpertBridgeTest)
#include "tst_expert_bridge.moc"
