// Sessions: generation stops at the model's EOS ids, the cache holds the context, capacity errors.
#include <QJsonArray>
#include <algorithm>
#include <cmath>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

Q_DECLARE_METATYPE(tandem::DensePrecision)

class SessionTest : public QObject {
    Q_OBJECT

    static std::unique_ptr<Engine> load(const QString& dir, int context = 4096) {
        EngineOptions o;
        o.threads = 2;
        o.contextLength = context;
        return Engine::load(dir.toStdString(), o);
    }

private slots:
    void greedyGenerationMatchesReference() {
        const Golden g = loadGolden("tiny-mixtral", "chat");
        auto engine = load(fixturePath("tiny-mixtral"));
        auto session = engine->newSession();
        GenerateOptions o;
        o.maxNewTokens = static_cast<int>(g.genIds.size());
        std::vector<int> tokens;
        const auto stats = session->generate(g.promptIds, o, [&](int t) {
            tokens.push_back(t);
            return true;
        });
        QCOMPARE(tokens, g.genIds);
        QCOMPARE(stats.promptTokens, static_cast<int>(g.promptIds.size()));
        QCOMPARE(stats.generatedTokens, static_cast<int>(g.genIds.size()));
        QVERIFY(!stats.stoppedAtEos);
        QVERIFY(stats.timeToFirstTokenSeconds > 0 && stats.timeToFirstTokenSeconds <= stats.prefillSeconds + stats.decodeSeconds);
        // The decode profile covers the decode steps only: every generated token but the last was fed back.
        QCOMPARE(stats.decode.steps, static_cast<long>(g.genIds.size()) - 1);
        QCOMPARE(static_cast<int>(stats.decode.layers.size()), 2);  // both Mixtral layers are MoE
        QVERIFY(stats.decode.stepMs > 0);
        QVERIFY(stats.decode.expertPoolBusyFraction > 0 && stats.decode.expertPoolBusyFraction <= 1);
        QCOMPARE(stats.decode.graphLaunches, 0L);  // the CPU path has no graph
        // Every token but the last was fed back: the cache holds the prompt and those.
        QCOMPARE(session->position(), static_cast<int>(g.promptIds.size() + g.genIds.size() - 1));
    }

    // Quantized dense weights on the CPU (tiny-mixtral), reported, with the prompt's logits near the
    // checkpoint's and the same greedy choice at most positions. int8: ~1% relative L2 (measured 7.7e-3
    // median), each position under 5e-2, 90% of choices equal. int4 (packed for the expert kernels, groups
    // of 32 weights with 16 levels): further, each position under 0.4 (measured 0.28), 75% equal.
    void quantizedDenseStaysNearTheCheckpoint_data() {
        QTest::addColumn<DensePrecision>("dense");
        QTest::addColumn<QString>("reported");
        QTest::addColumn<double>("worstBound");
        QTest::addColumn<double>("sameShare");
        QTest::newRow("int8") << DensePrecision::Int8 << QString("int8") << 5e-2 << 0.9;
        QTest::newRow("int4") << DensePrecision::Int4 << QString("int4") << 0.4 << 0.75;
    }
    void quantizedDenseStaysNearTheCheckpoint() {
        QFETCH(DensePrecision, dense);
        QFETCH(QString, reported);
        QFETCH(double, worstBound);
        QFETCH(double, sameShare);
        const Golden g = loadGolden("tiny-mixtral", "chat");
        std::vector<std::vector<float>> logits;
        for (const DensePrecision d : {DensePrecision::Checkpoint, dense}) {
            EngineOptions o;
            o.threads = 2;
            o.device = Device::Cpu;
            o.dense = d;
            auto engine = Engine::load(fixturePath("tiny-mixtral").toStdString(), o);
            QCOMPARE(QString::fromStdString(engine->info().dense), d == dense ? reported : QString("checkpoint"));
            logits.push_back(engine->newSession()->append(g.promptIds, Logits::All));
        }
        const std::size_t vocab = logits[0].size() / g.promptIds.size();
        int same = 0;
        double worst = 0;
        for (std::size_t t = 0; t < g.promptIds.size(); ++t) {
            const float* a = logits[0].data() + t * vocab;
            const float* b = logits[1].data() + t * vocab;
            worst = std::max(worst, relativeL2(b, a, vocab));
            same += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b ? 1 : 0;
        }
        qInfo("%s dense: worst relative L2 %.3f, top-1 %d of %zu", qPrintable(reported), worst, same, g.promptIds.size());
        QVERIFY2(worst < worstBound, qPrintable(QString::number(worst)));
        QVERIFY2(same >= sameShare * static_cast<double>(g.promptIds.size()), qPrintable(QString::number(same)));
    }

    void stopsAtEos() {
        // Declare the 4th greedy token an end-of-sequence id: generation must stop there, unshown.
        const Golden g = loadGolden("tiny-qwen3moe", "chat");
        QTemporaryDir tmp;
        QVERIFY(copyFixture("tiny-qwen3moe", tmp.path()));
        QJsonObject gen = QJsonDocument::fromJson(readFile(tmp.filePath("generation_config.json"))).object();
        const int eos = g.genIds[3];
        gen["eos_token_id"] = QJsonArray{999, eos};
        QVERIFY(writeFile(tmp.filePath("generation_config.json"), QJsonDocument(gen).toJson()));
        QVERIFY(std::find(g.genIds.begin(), g.genIds.begin() + 3, eos) == g.genIds.begin() + 3);

        auto engine = load(tmp.path());
        QCOMPARE(engine->info().eosTokenIds, (std::vector<int>{999, eos}));
        auto session = engine->newSession();
        GenerateOptions o;
        o.maxNewTokens = 20;
        std::vector<int> shown;
        const auto stats = session->generate(g.promptIds, o, [&](int t) {
            shown.push_back(t);
            return true;
        });
        QVERIFY(stats.stoppedAtEos);
        QCOMPARE(shown, std::vector<int>(g.genIds.begin(), g.genIds.begin() + 3));
    }

    void deferralIsClampedToTheExpertsPerToken() {
        auto engine = load(fixturePath("tiny-qwen3moe"));
        auto session = engine->newSession();
        QCOMPARE(session->deferral(), 0);  // exact by default
        session->setDeferral(2);
        QCOMPARE(session->deferral(), 2);
        session->setDeferral(engine->info().expertsPerToken);  // k: at least one stays immediate
        QCOMPARE(session->deferral(), engine->info().expertsPerToken - 1);
        session->setDeferral(-3);
        QCOMPARE(session->deferral(), 0);
    }

    void followUpReusesTheCache() {
        // Turn 1: prompt P, generating G. Turn 2: the whole conversation P + G + U is given again; only
        // what is not cached (the last generated token, which was never fed, and U) is prefilled.
        auto engine = load(fixturePath("tiny-qwen3moe"));
        auto session = engine->newSession();
        const std::vector<int> prompt{1001, 84, 82, 262, 198, 54, 71};
        GenerateOptions o;
        o.maxNewTokens = 6;
        std::vector<int> conversation = prompt;
        auto stats = session->generate(prompt, o, [&](int t) {
            conversation.push_back(t);
            return true;
        });
        QCOMPARE(stats.reusedTokens, 0);
        QCOMPARE(stats.prefilledTokens, 7);
        QCOMPARE(session->position(), 7 + 5);

        const std::vector<int> user{1002, 198, 1001, 84, 82};
        conversation.insert(conversation.end(), user.begin(), user.end());
        std::vector<int> second;
        stats = session->generate(conversation, o, [&](int t) {
            second.push_back(t);
            return true;
        });
        QCOMPARE(stats.reusedTokens, 7 + 5);
        QCOMPARE(stats.prefilledTokens, 1 + 5);

        // Same answer as a fresh session that prefills the whole conversation.
        auto fresh = engine->newSession();
        std::vector<int> reference;
        fresh->generate(conversation, o, [&](int t) {
            reference.push_back(t);
            return true;
        });
        QCOMPARE(second, reference);

        // An edited earlier message: only the shared prefix is kept.
        std::vector<int> edited = conversation;
        edited[3] = 300;
        stats = session->generate(edited, o, [](int) { return true; });
        QCOMPARE(stats.reusedTokens, 3);

        // The same conversation again: everything but the last token is reused.
        stats = session->generate(edited, o, [](int) { return true; });
        QCOMPARE(stats.reusedTokens, static_cast<int>(edited.size()) - 1);
        QCOMPARE(stats.prefilledTokens, 1);
    }

    void callbackCanStop() {
        auto engine = load(fixturePath("tiny-qwen3moe"));
        auto session = engine->newSession();
        GenerateOptions o;
        o.maxNewTokens = 20;
        int calls = 0;
        const auto stats = session->generate(std::vector<int>{1, 2, 3}, o, [&](int) { return ++calls < 5; });
        QCOMPARE(calls, 5);
        QCOMPARE(stats.generatedTokens, 5);
    }

    void contextCapacityIsEnforced() {
        auto engine = load(fixturePath("tiny-qwen3moe"), 8);
        QCOMPARE(engine->info().contextLength, 8);
        // Its KV cache: 3 layers x (keys + values of 2 heads x 32) float32 per position; the model holds 40960.
        QCOMPARE(engine->info().kvBytesPerPosition, std::uint64_t{3} * 2 * 2 * 32 * 4);
        QCOMPARE(engine->info().maxContextLength, 40960);
        // MLA caches the latent and the rotary key: 3 layers x (32 + 16).
        QCOMPARE(load(fixturePath("tiny-deepseekv2"), 8)->info().kvBytesPerPosition, std::uint64_t{3} * (32 + 16) * 4);
        auto session = engine->newSession();
        session->append(std::vector<int>{1, 2, 3, 4, 5, 6});
        try {
            session->append(std::vector<int>{7, 8, 9});
            QFAIL("ran past the context length without an error");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("context length is 8"), e.what());
        }
        session->reset();
        QCOMPARE(session->position(), 0);
        session->append(std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
        QCOMPARE(session->position(), 8);
    }

    void tokenOutsideVocabulary() {
        auto engine = load(fixturePath("tiny-deepseekv2"));
        auto session = engine->newSession();
        QVERIFY_THROWS_EXCEPTION(Error, session->append(std::vector<int>{1, 5000}));
        QCOMPARE(session->position(), 0);
    }

    void expertsChoice() {
        // A bf16 checkpoint is packed for the fast kernels; an FP8 one, which bf16 cannot hold exactly,
        // runs on the reference path and says how to get the fast kernels.
        auto bf16 = load(fixturePath("tiny-qwen3moe"));
        QCOMPARE(bf16->info().experts, std::string("bf16"));
        QVERIFY(bf16->info().expertsNotice.empty());
        QVERIFY(bf16->info().routedBytesPerToken > 0);
        auto fp8 = load(fixturePath("tiny-deepseekv3-fp8"));
        QCOMPARE(fp8->info().experts, std::string("reference"));
        QVERIFY(fp8->info().expertsNotice.find("tandem-cli convert") != std::string::npos);
    }

    void modelInfo() {
        auto engine = load(fixturePath("tiny-deepseekv3-fp8"));
        const auto& info = engine->info();
        QCOMPARE(info.modelType, std::string("deepseek_v3"));
        QCOMPARE(info.numLayers, 3);  // the MTP layer does not count
        QCOMPARE(info.numExperts, 16);
        QCOMPARE(info.expertsPerToken, 4);
        QCOMPARE(info.defaultSampling.temperature, 0.6f);
        QCOMPARE(engine->threads(), 2);
    }
};

QTEST_GUILESS_MAIN(SessionTest)
#include "tst_session.moc"
