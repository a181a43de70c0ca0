// Decoding several sessions together (Session::decodeTogether, issue 27): on the CPU path one forward
// pass of several sequences, each at its own position of its own cache, with the routed experts run as one
// call. Its greedy tokens equal each session decoded alone and its logits stay within 1e-5 relative L2.
#include <QTest>
#include <algorithm>
#include <memory>

#include "expect_error.h"
#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

Q_DECLARE_METATYPE(tandem::ExpertPrecision)

namespace {

constexpr int kSteps = 12;
constexpr double kTolerance = 1e-5;

std::unique_ptr<Engine> load(const QString& fixture, ExpertPrecision experts = ExpertPrecision::Auto) {
    EngineOptions o;
    o.threads = 2;
    o.device = Device::Cpu;
    o.experts = experts;
    return Engine::load(fixturePath(fixture).toStdString(), o);
}

int greedy(std::span<const float> logits) { return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin()); }

// Four prompts of different lengths (so the sequences sit at different positions), from the fixture's
// golden prompts; the longest passes a sliding window (tiny-gpt-oss: 16).
std::vector<std::vector<int>> prompts(const QString& fixture) {
    const Golden chat = loadGolden(fixture, "chat"), longer = loadGolden(fixture, "long");
    const auto prefix = [&](std::size_t n) {
        return std::vector<int>(longer.promptIds.begin(), longer.promptIds.begin() + static_cast<std::ptrdiff_t>(std::min(n, longer.promptIds.size())));
    };
    return {prefix(3), chat.promptIds, prefix(40), longer.promptIds};
}

// Greedy decode steps and the logits each token was chosen from.
struct Run {
    std::vector<std::vector<int>> tokens;
    std::vector<std::vector<std::vector<float>>> logits;  // [sequence][step][vocab]
    std::vector<int> positions;                           // each session's position at the end
};

Run alone(Engine& engine, const std::vector<std::vector<int>>& prompts, int deferral) {
    Run run;
    for (const auto& prompt : prompts) {
        auto session = engine.newSession();
        session->setDeferral(deferral);
        std::vector<float> logits = session->append(prompt);
        run.tokens.emplace_back();
        run.logits.emplace_back();
        for (int step = 0; step < kSteps; ++step) {
            const int token = greedy(logits);
            run.tokens.back().push_back(token);
            run.logits.back().push_back(logits);
            logits = session->append(std::span<const int>(&token, 1));
        }
        run.positions.push_back(session->position());
    }
    return run;
}

// Sessions given as `deferrals` (one each) decode together.
Run together(Engine& engine, const std::vector<std::vector<int>>& prompts, const std::vector<int>& deferrals) {
    Run run;
    std::vector<std::unique_ptr<Session>> owned;
    std::vector<Session*> sessions;
    std::vector<std::vector<float>> logits;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        owned.push_back(engine.newSession());
        owned.back()->setDeferral(deferrals[i]);
        sessions.push_back(owned.back().get());
        logits.push_back(owned.back()->append(prompts[i]));
    }
    run.tokens.resize(prompts.size());
    run.logits.resize(prompts.size());
    for (int step = 0; step < kSteps; ++step) {
        std::vector<int> tokens;
        for (std::size_t i = 0; i < sessions.size(); ++i) {
            tokens.push_back(greedy(logits[i]));
            run.tokens[i].push_back(tokens.back());
            run.logits[i].push_back(logits[i]);
        }
        const auto rows = Session::decodeTogether(sessions, tokens);
        for (std::size_t i = 0; i < sessions.size(); ++i) logits[i].assign(rows[i].begin(), rows[i].end());
    }
    for (const Session* s : sessions) run.positions.push_back(s->position());
    return run;
}

void compare(const Run& got, const Run& want) {
    QCOMPARE(got.positions, want.positions);
    double worst = 0;
    for (std::size_t i = 0; i < want.tokens.size(); ++i) {
        QCOMPARE(got.tokens[i], want.tokens[i]);
        for (std::size_t step = 0; step < want.logits[i].size(); ++step) {
            const auto& a = got.logits[i][step];
            const auto& b = want.logits[i][step];
            QCOMPARE(a.size(), b.size());
            worst = std::max(worst, relativeL2(a.data(), b.data(), a.size()));
        }
    }
    qInfo("worst relative L2 against alone: %.2e", worst);
    QVERIFY2(worst <= kTolerance, qPrintable(QString::number(worst)));
}

}  // namespace

class DecodeBatchTest : public QObject {
    Q_OBJECT
private slots:
    // GQA (tiny-qwen3moe, packed bf16 and int4 experts), MLA with shared experts and a dense first layer
    // (tiny-deepseekv2), sliding windows, sinks and expert biases (tiny-gpt-oss), the float32 reference
    // experts (tiny-deepseekv3-fp8), and Expert Deferral in the batch (every session deferring 2).
    void togetherEqualsAlone_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<ExpertPrecision>("experts");
        QTest::addColumn<int>("deferral");
        QTest::newRow("tiny-qwen3moe") << QString("tiny-qwen3moe") << ExpertPrecision::Auto << 0;
        QTest::newRow("tiny-qwen3moe int4") << QString("tiny-qwen3moe") << ExpertPrecision::INT4 << 0;
        QTest::newRow("tiny-qwen3moe deferral 2") << QString("tiny-qwen3moe") << ExpertPrecision::Auto << 2;
        QTest::newRow("tiny-deepseekv2") << QString("tiny-deepseekv2") << ExpertPrecision::Auto << 0;
        QTest::newRow("tiny-deepseekv2 deferral 1") << QString("tiny-deepseekv2") << ExpertPrecision::Auto << 1;
        QTest::newRow("tiny-gpt-oss") << QString("tiny-gpt-oss") << ExpertPrecision::Auto << 0;
        QTest::newRow("tiny-deepseekv3-fp8 reference") << QString("tiny-deepseekv3-fp8") << ExpertPrecision::Auto << 0;
    }
    void togetherEqualsAlone() {
        QFETCH(QString, fixture);
        QFETCH(ExpertPrecision, experts);
        QFETCH(int, deferral);
        auto engine = load(fixture, experts);
        const auto p = prompts(fixture);
        compare(together(*engine, p, std::vector<int>(p.size(), deferral)), alone(*engine, p, deferral));
    }

    // Sessions with different deferral settings run in separate batches of one step, each still equal to
    // its own decode.
    void mixedDeferralsEachMatch() {
        auto engine = load("tiny-qwen3moe");
        const auto p = prompts("tiny-qwen3moe");
        const Run got = together(*engine, p, {0, 2, 0, 2});
        const Run zero = alone(*engine, p, 0), two = alone(*engine, p, 2);
        for (std::size_t i = 0; i < p.size(); ++i) {
            const Run& want = i % 2 == 0 ? zero : two;
            QCOMPARE(got.tokens[i], want.tokens[i]);
            for (int step = 0; step < kSteps; ++step)
                QVERIFY(relativeL2(got.logits[i][step].data(), want.logits[i][step].data(), want.logits[i][step].size()) <= kTolerance);
        }
    }

    // Each session's routing observer sees its own row of every MoE layer, the same scores as alone.
    void routingObserversSeeTheirOwnRows() {
        auto engine = load("tiny-deepseekv2");
        const auto p = prompts("tiny-deepseekv2");
        std::vector<std::vector<float>> seen(2), want(2);
        std::vector<std::unique_ptr<Session>> owned;
        std::vector<Session*> sessions;
        std::vector<int> tokens;
        for (std::size_t i = 0; i < 2; ++i) {
            auto alone = engine->newSession();
            const int token = greedy(alone->append(p[i]));
            alone->setRoutingObserver([&, i](int, std::size_t rows, int experts, const float* scores) {
                QCOMPARE(rows, std::size_t{1});
                want[i].insert(want[i].end(), scores, scores + experts);
            });
            alone->append(std::span<const int>(&token, 1));

            owned.push_back(engine->newSession());
            owned.back()->append(p[i]);
            owned.back()->setRoutingObserver([&, i](int, std::size_t rows, int experts, const float* scores) {
                QCOMPARE(rows, std::size_t{1});
                seen[i].insert(seen[i].end(), scores, scores + experts);
            });
            sessions.push_back(owned.back().get());
            tokens.push_back(token);
        }
        Session::decodeTogether(sessions, tokens);
        for (std::size_t i = 0; i < 2; ++i) {
            QCOMPARE(seen[i].size(), want[i].size());
            QVERIFY(!seen[i].empty());
            QVERIFY(relativeL2(seen[i].data(), want[i].data(), seen[i].size()) <= kTolerance);
        }
    }

    // Generation::decodeTogether runs generations of several sessions in one step; the tokens are those of
    // Session::generate.
    void generationsDecodeTogether() {
        auto engine = load("tiny-qwen3moe");
        const auto p = prompts("tiny-qwen3moe");
        GenerateOptions o;
        o.maxNewTokens = 10;
        o.stopAtEos = false;
        std::vector<std::vector<int>> want;
        for (const auto& prompt : p) {
            want.emplace_back();
            engine->newSession()->generate(prompt, o, [&](int t) {
                want.back().push_back(t);
                return true;
            });
        }
        std::vector<std::unique_ptr<Session>> sessions;
        std::vector<std::unique_ptr<Generation>> generations;
        std::vector<std::vector<int>> got(p.size());
        for (const auto& prompt : p) {
            sessions.push_back(engine->newSession());
            generations.push_back(std::make_unique<Generation>(*sessions.back(), prompt, o));
        }
        while (true) {
            std::vector<Generation*> running;
            for (std::size_t i = 0; i < generations.size(); ++i)
                if (const auto token = generations[i]->next()) {
                    got[i].push_back(*token);
                    if (!generations[i]->full()) running.push_back(generations[i].get());
                }
            if (running.empty()) break;
            Generation::decodeTogether(running);
        }
        QCOMPARE(got, want);
        const auto stats = generations[0]->finish();
        QCOMPARE(stats.generatedTokens, 10);
        QCOMPARE(stats.decode.steps, 9L);
    }

    void refusesWhatCannotRunTogether() {
        auto engine = load("tiny-qwen3moe");
        auto other = load("tiny-qwen3moe");
        auto a = engine->newSession(), b = other->newSession();
        a->append(std::vector<int>{1, 2});
        b->append(std::vector<int>{1, 2});
        std::vector<Session*> mixed{a.get(), b.get()};
        const std::vector<int> two{3, 4};
        expectError([&] { Session::decodeTogether(mixed, two); }, {"one engine"});
        std::vector<Session*> twice{a.get(), a.get()};
        expectError([&] { Session::decodeTogether(twice, two); }, {"given twice"});
        auto c = engine->newSession();
        c->append(std::vector<int>{1, 2, 3});
        std::vector<Session*> same{a.get(), c.get()};
        expectError([&] { Session::decodeTogether(same, std::vector<int>{3, engine->info().vocabSize}); }, {"outside the model's vocabulary"});
        // All or nothing: the refused step changed no context.
        QCOMPARE(a->position(), 2);
        QCOMPARE(c->position(), 3);
        Session::decodeTogether(same, two);
        QCOMPARE(a->context(), (std::vector<int>{1, 2, 3}));
        QCOMPARE(c->context(), (std::vector<int>{1, 2, 3, 4}));
    }
};

QTEST_GUILESS_MAIN(DecodeBatchTest)
#include "tst_decode_batch.moc"
