// Token choice: greedy, and seeded temperature / top-k / top-p sampling.
#include <QTest>
#include <map>

#include "runtime/sampler.h"

using tandem::SamplingOptions;
using tandem::runtime::Sampler;

class SamplerTest : public QObject {
    Q_OBJECT

    const std::vector<float> logits_{0.5f, 2.0f, 1.9f, -1.0f, 2.0f};

private slots:
    void greedyTakesFirstMaximum() {
        Sampler s(SamplingOptions{});
        QCOMPARE(s.pick(logits_), 1);
        QCOMPARE(tandem::runtime::argmax(logits_), 1);
    }

    void sameSeedSameTokens() {
        SamplingOptions o;
        o.temperature = 1.0f;
        o.seed = 42;
        Sampler a(o), b(o);
        std::vector<int> first, second;
        for (int i = 0; i < 50; ++i) {
            first.push_back(a.pick(logits_));
            second.push_back(b.pick(logits_));
        }
        QCOMPARE(first, second);
        o.seed = 43;
        Sampler c(o);
        std::vector<int> third;
        for (int i = 0; i < 50; ++i) third.push_back(c.pick(logits_));
        QVERIFY(third != first);
    }

    void topKOneIsGreedy() {
        SamplingOptions o;
        o.temperature = 5.0f;
        o.topK = 1;
        Sampler s(o);
        for (int i = 0; i < 20; ++i) QCOMPARE(s.pick(logits_), 1);
    }

    void topPKeepsOnlyTheNucleus() {
        SamplingOptions o;
        o.temperature = 1.0f;
        o.topP = 0.6f;  // tokens 1 and 4 (equal logits) hold ~0.64 of the mass together
        Sampler s(o);
        std::map<int, int> counts;
        for (int i = 0; i < 400; ++i) ++counts[s.pick(logits_)];
        for (const auto& [token, n] : counts) QVERIFY2(token == 1 || token == 4, qPrintable(QString::number(token)));
        QVERIFY(counts[1] > 100 && counts[4] > 100);
    }

    void temperatureSpreadsChoices() {
        SamplingOptions o;
        o.temperature = 1.0f;
        Sampler s(o);
        std::map<int, int> counts;
        for (int i = 0; i < 2000; ++i) ++counts[s.pick(logits_)];
        QCOMPARE(counts.size(), std::size_t(5));
        // Token 2 has probability e^1.9 / Σ ≈ 0.29; token 3 ≈ 0.016.
        QVERIFY(counts[2] > 450 && counts[2] < 700);
        QVERIFY(counts[3] < 80);
    }
};

QTEST_APPLESS_MAIN(SamplerTest)
#include "tst_sampler.moc"
