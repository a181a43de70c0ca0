// Token choice: greedy, and seeded temperature / top-k / top-p sampling.
#include <QTest>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "runtime/sampler.h"
#include "tandem/error.h"

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

    void minPDropsUnlikelyTokens() {
        SamplingOptions o;
        o.temperature = 1.0f;
        o.minP = 0.5f;  // keeps tokens with at least half the top probability: 1, 2 (e^-0.1 = 0.90) and 4
        Sampler s(o);
        std::map<int, int> counts;
        for (int i = 0; i < 600; ++i) ++counts[s.pick(logits_)];
        QCOMPARE(counts.size(), std::size_t(3));
        QVERIFY(counts.count(1) && counts.count(2) && counts.count(4));
    }

    void repetitionPenaltyAvoidsContextTokens() {
        SamplingOptions o;
        o.repetitionPenalty = 2.0f;  // token 1's logit 2.0 becomes 1.0; token 4 ties it no more
        Sampler s(o);
        const std::vector<int> context{1, 1};
        QCOMPARE(s.pick(logits_, context), 4);
        o.repetitionPenalty = 1.0f;
        o.frequencyPenalty = 0.12f;  // token 1: 2.0 - 0.24, token 4: 2.0 - 0.12 = 1.88, both below 1.9
        const std::vector<int> both{1, 1, 4};
        Sampler f(o);
        QCOMPARE(f.pick(logits_, both), 2);
        o.frequencyPenalty = 0.0f;
        o.presencePenalty = 0.05f;   // once per token: 1.95 for tokens 1 and 4, still above 1.9
        Sampler p(o);
        QCOMPARE(p.pick(logits_, both), 1);
        o.penaltyWindow = 1;         // only the last context token (4) is penalized
        o.presencePenalty = 1.0f;
        Sampler w(o);
        QCOMPARE(w.pick(logits_, both), 1);
    }

    void negativeLogitsArePenalizedDownward() {
        SamplingOptions o;
        o.repetitionPenalty = 3.0f;
        const std::vector<float> negative{-1.0f, -1.2f};
        Sampler s(o);
        QCOMPARE(s.pick(negative, std::vector<int>{0}), 1);  // -1 * 3 = -3 < -1.2
    }

    void invalidSettingsAreRejected() {
        SamplingOptions o;
        o.topP = 0.0f;
        QVERIFY_THROWS_EXCEPTION(tandem::Error, Sampler{o});
        o = {};
        o.minP = 1.5f;
        QVERIFY_THROWS_EXCEPTION(tandem::Error, Sampler{o});
        o = {};
        o.temperature = -1.0f;
        QVERIFY_THROWS_EXCEPTION(tandem::Error, Sampler{o});
        // NaN fails every comparison, so it must not slip past a check or be called "negative".
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (float SamplingOptions::*field : {&SamplingOptions::temperature, &SamplingOptions::topP, &SamplingOptions::minP,
                                              &SamplingOptions::repetitionPenalty, &SamplingOptions::presencePenalty,
                                              &SamplingOptions::frequencyPenalty}) {
            o = {};
            o.*field = nan;
            QVERIFY_THROWS_EXCEPTION(tandem::Error, Sampler{o});
        }
        o = {};
        o.temperature = nan;
        try {
            Sampler{o};
        } catch (const tandem::Error& e) {
            QVERIFY2(!QString(e.what()).contains("negative"), e.what());
        }
        o = {};
        o.temperature = std::numeric_limits<float>::infinity();
        QVERIFY_THROWS_EXCEPTION(tandem::Error, Sampler{o});
    }

    void largeVocabularyTopP() {
        // A peaked distribution over 150k tokens: the nucleus is found without sorting everything.
        std::vector<float> big(150000, 0.0f);
        for (int i = 0; i < 10; ++i) big[static_cast<std::size_t>(i * 997)] = 12.0f;
        SamplingOptions o;
        o.temperature = 1.0f;
        o.topP = 0.9f;
        Sampler s(o);
        for (int i = 0; i < 100; ++i) QCOMPARE(s.pick(big) % 997, 0);
    }

    void argmaxFindsTheFirstMaximumAnywhere() {
        // The scans run in blocks of 16: the maximum in a partial last block, and ties across blocks.
        std::vector<float> v(1000 + 7, -3.0f);
        v[1005] = 4.0f;
        QCOMPARE(tandem::runtime::argmax(v), 1005);
        v[40] = 4.0f;
        v[17] = 4.0f;
        QCOMPARE(tandem::runtime::argmax(v), 17);
        const std::vector<float> masked(33, -std::numeric_limits<float>::infinity());
        QCOMPARE(tandem::runtime::argmax(masked), 0);
    }

    void flatLargeVocabularyFilters() {
        // Every weight equal: the weight floor must come down to zero before top-k or top-p are satisfied,
        // and ties go to the lower token.
        const std::vector<float> flat(20000 + 5, 1.0f);
        SamplingOptions o;
        o.temperature = 1.0f;
        o.topK = 50;
        Sampler k(o);
        for (int i = 0; i < 100; ++i) QVERIFY(k.pick(flat) < 50);
        o.topK = 0;
        o.topP = 0.5f;
        Sampler p(o);
        std::set<int> seen;
        for (int i = 0; i < 300; ++i) {
            const int t = p.pick(flat);
            QVERIFY2(t < 10003, qPrintable(QString::number(t)));
            seen.insert(t);
        }
        QVERIFY(seen.size() > 250);  // spread over the nucleus, not stuck on its head
    }

    void topPBoundaryOnPowersOfTwo() {
        // Weights 1, 1/2, 1/4, ... (each on a power of two, where the nucleus search cuts the candidates
        // by binade) spread over a large vocabulary with a tail too small to count: top-p 0.9 of a total of
        // ~2 keeps exactly the first four (1.875).
        std::vector<float> v(50000 + 9, -60.0f);
        const float ln2 = std::log(2.0f);
        for (int i = 0; i < 20; ++i) v[static_cast<std::size_t>(i * 2477 + 5)] = -static_cast<float>(i) * ln2;
        SamplingOptions o;
        o.temperature = 1.0f;
        o.topP = 0.9f;
        o.seed = 11;
        Sampler s(o);
        std::set<int> seen;
        for (int i = 0; i < 400; ++i) seen.insert(s.pick(v));
        QCOMPARE(seen, (std::set<int>{5, 2477 + 5, 2 * 2477 + 5, 3 * 2477 + 5}));
    }

    void unfilteredSamplingReachesEveryBlock() {
        // Without top-k or top-p the vocabulary is walked block by block: masked tokens are never chosen,
        // and a token in the partial last block is.
        std::vector<float> v(100 + 3, -std::numeric_limits<float>::infinity());
        v[5] = 0.0f;
        v[101] = 0.0f;
        SamplingOptions o;
        o.temperature = 0.8f;
        o.seed = 3;
        Sampler s(o);
        std::map<int, int> counts;
        for (int i = 0; i < 400; ++i) ++counts[s.pick(v)];
        QCOMPARE(counts.size(), std::size_t(2));
        QVERIFY(counts[5] > 140 && counts[101] > 140);
        o.minP = 0.5f;
        v[60] = -1.0f;  // weight e^-1.25 = 0.29 of the top: min-p drops it
        Sampler m(o);
        for (int i = 0; i < 200; ++i) QVERIFY(m.pick(v) != 60);
    }

    void nothingToWeighFallsBackToGreedy() {
        // All -inf (or NaN) logits give no weights to sample by: the first token, as greedy, and no crash.
        SamplingOptions o;
        o.temperature = 0.8f;
        o.topP = 0.9f;
        Sampler s(o);
        const std::vector<float> masked(40, -std::numeric_limits<float>::infinity());
        QCOMPARE(s.pick(masked), 0);
        const std::vector<float> broken(40, std::numeric_limits<float>::quiet_NaN());
        QCOMPARE(s.pick(broken), 0);
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
