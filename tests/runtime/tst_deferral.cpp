// Expert Deferral on the CPU path: exact at d = 0, and deferring loses less than skipping.
#include <QTest>
#include <algorithm>
#include <cmath>

#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

// Teacher-forced logits of the `long` prompt with the given deferral applied to the prompt too, so that
// each row is computed as a decode step with deferral would be.
std::vector<float> prefillLogits(Engine& engine, const std::vector<int>& prompt, int deferred, bool skip) {
    auto session = engine.newSession();
    session->setDeferral(deferred, skip);
    session->setPrefillDeferral(true);
    return session->append(prompt, Logits::All);
}

// Mean KL(p_ref || p) over rows.
double meanKl(const std::vector<float>& ref, const std::vector<float>& got, std::size_t vocab) {
    double total = 0;
    const std::size_t rows = ref.size() / vocab;
    for (std::size_t r = 0; r < rows; ++r) {
        const float* a = &ref[r * vocab];
        const float* b = &got[r * vocab];
        const double ma = *std::max_element(a, a + vocab), mb = *std::max_element(b, b + vocab);
        double za = 0, zb = 0;
        for (std::size_t i = 0; i < vocab; ++i) {
            za += std::exp(a[i] - ma);
            zb += std::exp(b[i] - mb);
        }
        double kl = 0;
        for (std::size_t i = 0; i < vocab; ++i) {
            const double la = a[i] - ma - std::log(za), lb = b[i] - mb - std::log(zb);
            kl += std::exp(la) * (la - lb);
        }
        total += kl;
    }
    return total / static_cast<double>(rows);
}

}  // namespace

class DeferralTest : public QObject {
    Q_OBJECT
private slots:
    void deferralTradesLessThanSkipping_data() {
        QTest::addColumn<QString>("fixture");
        for (const auto& f : fixtureNames()) QTest::newRow(qPrintable(f)) << f;
    }
    void deferralTradesLessThanSkipping() {
        QFETCH(QString, fixture);
        EngineOptions o;
        o.threads = 2;
        o.device = Device::Cpu;
        o.experts = ExpertPrecision::Reference;  // compared with the float32 reference below
        auto engine = Engine::load(fixturePath(fixture).toStdString(), o);
        const std::size_t V = static_cast<std::size_t>(engine->info().vocabSize);
        const int k = engine->info().expertsPerToken;
        const Golden g = loadGolden(fixture, "long");

        const auto exact = prefillLogits(*engine, g.promptIds, 0, false);
        QCOMPARE(exact, prefillLogits(*engine, g.promptIds, 0, true));  // d = 0 is exact either way
        for (std::size_t r = 0; r < g.promptIds.size(); r += 37)
            QVERIFY(relativeL2(&exact[r * V], &g.prefillLogits[r * V], V) < 1e-3);

        const int d = k - 1;
        const double klDefer = meanKl(exact, prefillLogits(*engine, g.promptIds, d, false), V);
        const double klSkip = meanKl(exact, prefillLogits(*engine, g.promptIds, d, true), V);
        qInfo("%s, d = %d of %d: KL defer %.4f, skip %.4f", qPrintable(fixture), d, k, klDefer, klSkip);
        QVERIFY(klDefer > 0);  // deferral changes the computation...
        QVERIFY2(klDefer < klSkip, "deferring lost more than skipping");  // ...but keeps what skipping drops
    }

    void promptIsExactByDefault_data() {
        QTest::addColumn<QString>("fixture");
        for (const auto& f : fixtureNames()) QTest::newRow(qPrintable(f)) << f;
    }
    void promptIsExactByDefault() {
        // Expert Deferral is a decode technique: by default a prompt's logits (and so its KV cache) do not
        // depend on the setting, and the decode steps after it still defer.
        QFETCH(QString, fixture);
        EngineOptions o;
        o.threads = 2;
        o.device = Device::Cpu;
        auto engine = Engine::load(fixturePath(fixture).toStdString(), o);
        const Golden g = loadGolden(fixture, "chat");
        const int d = std::min(3, engine->info().expertsPerToken - 1);
        auto exact = engine->newSession();
        auto deferring = engine->newSession();
        deferring->setDeferral(d);
        QVERIFY(!deferring->prefillDeferral());
        const std::vector<float> exactPrompt = exact->append(g.promptIds, Logits::All);
        QCOMPARE(deferring->append(g.promptIds, Logits::All), exactPrompt);

        const int next = g.genIds.front();
        const std::vector<float> exactStep = exact->append(std::span<const int>(&next, 1));
        QVERIFY(deferring->append(std::span<const int>(&next, 1)) != exactStep);

        auto prefillToo = engine->newSession();
        prefillToo->setDeferral(d);
        prefillToo->setPrefillDeferral(true);
        QVERIFY(prefillToo->append(g.promptIds, Logits::All) != exactPrompt);  // the explicit option
    }

    void deferralIsClampedBelowK() {
        // Deferring all k experts would leave a layer with nothing to wait for; the engine keeps one.
        EngineOptions o;
        o.threads = 2;
        o.device = Device::Cpu;
        auto engine = Engine::load(fixturePath("tiny-mixtral").toStdString(), o);
        const Golden g = loadGolden("tiny-mixtral", "chat");
        QCOMPARE(prefillLogits(*engine, g.promptIds, 99, false), prefillLogits(*engine, g.promptIds, 1, false));
    }

    void deviceChoiceIsExplained() {
        EngineOptions o;
        o.threads = 2;
        o.device = Device::Gpu;
        bool haveGpu = false;
        try {
            // Where a GPU is usable this loads, on it; elsewhere (CI) the error says why not.
            haveGpu = Engine::load(fixturePath("tiny-qwen3moe").toStdString(), o)->info().device != "CPU";
            QVERIFY(haveGpu);
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).startsWith("cannot run on the GPU: "), e.what());
        }
        o.device = Device::Auto;
        auto engine = Engine::load(fixturePath("tiny-qwen3moe").toStdString(), o);
        QCOMPARE(engine->info().device == "CPU", !haveGpu);
        QCOMPARE(engine->info().deviceNotice.find("running on the CPU only") == 0, !haveGpu);
    }
};

QTEST_GUILESS_MAIN(DeferralTest)
#include "tst_deferral.moc"
