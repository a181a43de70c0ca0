// A GPU that fails in the middle of a conversation: the session moves to the CPU, runs the context
// again there and goes on, so the conversation is not lost and the tokens are the ones the CPU path
// gives. The GPU is a stand-in (flaky_gpu.h) that runs the CPU path until its Nth forward pass, then
// throws the way the CUDA backend reports a device error.
#include <QTest>

#include "flaky_gpu.h"
#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

// An engine whose "GPU" fails on its runner's failOn-th forward pass (1: the prefill).
std::unique_ptr<Engine> flakyEngine(const QString& fixture, int failOn) {
    const FlakyGpu gpu(failOn);
    EngineOptions o;
    o.threads = 2;
    o.device = Device::Auto;
    return Engine::load(fixturePath(fixture).toStdString(), o);
}

std::vector<int> generate(Session& session, const std::vector<int>& conversation, int count, GenerationStats* stats = nullptr) {
    GenerateOptions o;
    o.maxNewTokens = count;
    o.stopAtEos = false;
    std::vector<int> tokens;
    const GenerationStats s = session.generate(conversation, o, [&](int t) {
        tokens.push_back(t);
        return true;
    });
    if (stats) *stats = s;
    return tokens;
}

}  // namespace

class GpuFallbackTest : public QObject {
    Q_OBJECT
private slots:
    // Failing on the prefill (1), on the first decode step (2) and later (7): the greedy tokens are
    // the reference's, the stats and the engine's notice say what happened, and the same session then
    // goes on with the conversation.
    void failureMovesTheConversationToTheCpu_data() {
        QTest::addColumn<int>("failOn");
        QTest::newRow("prefill") << 1;
        QTest::newRow("first decode step") << 2;
        QTest::newRow("seventh pass") << 7;
    }
    void failureMovesTheConversationToTheCpu() {
        QFETCH(int, failOn);
        const Golden g = loadGolden("tiny-mixtral", "chat");
        auto engine = flakyEngine("tiny-mixtral", failOn);
        QCOMPARE(engine->info().device, std::string("Stand-in GPU"));
        auto session = engine->newSession();
        const int count = static_cast<int>(g.genIds.size());
        GenerationStats stats;
        const std::vector<int> tokens = generate(*session, g.promptIds, count, &stats);
        QCOMPARE(tokens, g.genIds);
        QVERIFY(stats.fellBackToCpu);
        QCOMPARE(stats.generatedTokens, count);
        const std::string& notice = engine->info().deviceNotice;
        QVERIFY2(notice.find("the GPU failed (CUDA error: an illegal memory access") == 0, notice.c_str());
        QVERIFY2(notice.find("continuing on the CPU") != std::string::npos, notice.c_str());

        // The next turn runs on the CPU from the cached context: only the new tokens are prefilled, and
        // the logits are the CPU path's.
        std::vector<int> conversation = g.promptIds;
        conversation.insert(conversation.end(), tokens.begin(), tokens.end());
        GenerationStats next;
        const std::vector<int> more = generate(*session, conversation, 4, &next);
        QCOMPARE(static_cast<int>(more.size()), 4);
        QVERIFY(!next.fellBackToCpu);
        QCOMPARE(next.reusedTokens, static_cast<int>(g.promptIds.size()) + count - 1);

        EngineOptions o;
        o.threads = 2;
        o.device = Device::Cpu;
        auto cpu = Engine::load(fixturePath("tiny-mixtral").toStdString(), o);
        auto reference = cpu->newSession();
        QCOMPARE(generate(*reference, g.promptIds, count), tokens);
        QCOMPARE(generate(*reference, conversation, 4), more);
    }

    // Without a failure the stand-in serves the whole conversation and nothing is reported.
    void noFailureNoNotice() {
        const Golden g = loadGolden("tiny-mixtral", "chat");
        auto engine = flakyEngine("tiny-mixtral", 1000);
        auto session = engine->newSession();
        GenerationStats stats;
        QCOMPARE(generate(*session, g.promptIds, static_cast<int>(g.genIds.size()), &stats), g.genIds);
        QVERIFY(!stats.fellBackToCpu);
        QVERIFY(engine->info().deviceNotice.empty());
    }
};

QTEST_GUILESS_MAIN(GpuFallbackTest)
#include "tst_gpu_fallback.moc"
