// A GPU that fails in the middle of a conversation: the session moves to the CPU, runs the context
// again there and goes on, so the conversation is not lost and the tokens are the ones the CPU path
// gives. The GPU is a stand-in (flaky_gpu.h) that runs the CPU path until its Nth forward pass, then
// throws the way the CUDA backend reports a device error.
#include <QTest>
#include <algorithm>

#include "flaky_gpu.h"
#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

// Two threads, the GPU when there is one (the stand-in), and contextLength (0: the default).
EngineOptions standInOptions(int contextLength = 0) {
    EngineOptions o;
    o.threads = 2;
    o.device = Device::Auto;
    if (contextLength > 0) o.contextLength = contextLength;
    return o;
}

// An engine whose "GPU" fails on its runner's failOn-th forward pass (1: the prefill).
std::unique_ptr<Engine> flakyEngine(const QString& fixture, int failOn) {
    const FlakyGpu gpu(failOn);
    return Engine::load(fixturePath(fixture).toStdString(), standInOptions());
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

    // A backend that runs the layers as a pipeline over several GPUs (issue 29) reports each GPU's share,
    // and the engine passes it on in ModelInfo::gpuStages, as it is; one GPU reports none.
    void theGpusSharesReachTheModelInfo() {
        const std::vector<std::string> stages{"GPU 0 (A): layers 0-0, 1.00 MB dense + KV, 2.00 GB for experts",
                                              "GPU 1 (B): layer 1, 1.00 MB dense + KV, 3.00 GB for experts"};
        {
            const FlakyGpu gpu(1000, stages);
            EngineOptions o;
            o.threads = 2;
            o.device = Device::Auto;
            auto engine = Engine::load(fixturePath("tiny-mixtral").toStdString(), o);
            QCOMPARE(engine->info().device, std::string("Stand-in GPU"));
            QCOMPARE(engine->info().gpuStages, stages);
        }
        auto one = flakyEngine("tiny-mixtral", 1000);
        QVERIFY(one->info().gpuStages.empty());
    }

    // The sessions a server holds at once (EngineOptions::gpuSessions: serve's --batch and kept
    // conversations) reach the GPU's plan, which reserves each one's KV cache at the session's context:
    // one by default, never fewer than one.
    void theGpuPlanIsToldHowManySessions() {
        const FlakyGpu gpu(1000);
        EngineOptions o = standInOptions(256);
        const auto path = fixturePath("tiny-mixtral").toStdString();
        auto one = Engine::load(path, o);
        QCOMPARE(gpu.lastSessions, 1);
        QCOMPARE(gpu.lastCapacity, 256);
        o.gpuSessions = 4;
        auto four = Engine::load(path, o);
        QCOMPARE(gpu.lastSessions, 4);
        QCOMPARE(four->info().device, std::string("Stand-in GPU"));
        QCOMPARE(four->info().gpuSessions, 4);
        QVERIFY(four->info().gpuSessionsNotice.empty());
        o.gpuSessions = 0;
        auto atLeastOne = Engine::load(path, o);
        QCOMPARE(gpu.lastSessions, 1);
        QCOMPARE(atLeastOne->info().gpuSessions, 1);
    }

    // Sessions beyond the first that do not fit beside the model (the plan throws, as createGpuBackend does
    // when the KV caches are too large): the GPU keeps the model with one session and says why, rather than
    // the CPU taking it all. One session that does not fit is the CPU's, as before.
    void sessionsThatDoNotFitLeaveTheModelOnTheGpu() {
        FlakyGpu gpu(1000);
        gpu.mostSessions = 1;
        EngineOptions o = standInOptions(256);
        o.gpuSessions = 5;
        auto engine = Engine::load(fixturePath("tiny-mixtral").toStdString(), o);
        QCOMPARE(engine->info().device, std::string("Stand-in GPU"));
        QCOMPARE(engine->info().gpuSessions, 1);
        const std::string& notice = engine->info().gpuSessionsNotice;
        QVERIFY2(notice.find("one session, not the 5 asked for") != std::string::npos, notice.c_str());
        QVERIFY2(notice.find("does not fit") != std::string::npos, notice.c_str());
        gpu.mostSessions = -1;  // not even one
        auto cpu = Engine::load(fixturePath("tiny-mixtral").toStdString(), o);
        QCOMPARE(cpu->info().device, std::string("CPU"));
        QCOMPARE(cpu->info().gpuSessions, 0);
        QVERIFY2(cpu->info().deviceNotice.find("does not fit") != std::string::npos, cpu->info().deviceNotice.c_str());
    }

    // The GPUs chosen (EngineOptions::gpuDevices: Settings' GPU, --gpus) reach the GPU backend as they were
    // given; none chosen leaves the choice to it (TANDEM_GPU_DEVICES, else the GPU with the most memory).
    void theGpuBackendIsToldWhichGpus() {
        const FlakyGpu gpu(1000);
        EngineOptions o = standInOptions(128);
        const auto path = fixturePath("tiny-mixtral").toStdString();
        auto chosen = Engine::load(path, o);
        QVERIFY(gpu.lastDevices.empty());
        o.gpuDevices = {1};
        auto second = Engine::load(path, o);
        QCOMPARE(gpu.lastDevices, std::vector<int>{1});
        o.gpuDevices = {2, 0};
        auto pipeline = Engine::load(path, o);
        QCOMPARE(gpu.lastDevices, (std::vector<int>{2, 0}));
    }

    // --gpus and TANDEM_GPU_DEVICES take distinct GPU numbers separated by commas; anything else is an
    // error that names where it came from.
    void gpuListsAreParsed() {
        QCOMPARE(parseGpuDevices("1", "--gpus"), std::vector<int>{1});
        QCOMPARE(parseGpuDevices("0,1", "--gpus"), (std::vector<int>{0, 1}));
        QCOMPARE(parseGpuDevices("3,0,2", "--gpus"), (std::vector<int>{3, 0, 2}));
        QCOMPARE(parseGpuDevices("all", "--gpus"), std::vector<int>{kEveryGpu});
        for (const char* bad : {"", "1,1", "0,,1", "gpu1", "-1", "64", "1 ", "0,1,"}) {
            try {
                parseGpuDevices(bad, "--gpus");
                QFAIL(qPrintable(QString("no error for '%1'").arg(bad)));
            } catch (const Error& e) {
                QVERIFY2(QString(e.what()).startsWith("--gpus='") && QString(e.what()).contains("distinct GPU numbers"), e.what());
            }
        }
    }

    // Sessions decoded together (Session::decodeTogether) when the GPU fails in their step: all of them go
    // on on the CPU, and their tokens are the CPU path's.
    void sessionsDecodedTogetherFallBackTogether() {
        const Golden chat = loadGolden("tiny-mixtral", "chat"), longer = loadGolden("tiny-mixtral", "long");
        auto engine = flakyEngine("tiny-mixtral", 3);  // each runner: the prefill, one step, then the failure
        EngineOptions o;
        o.threads = 2;
        o.device = Device::Cpu;
        auto cpu = Engine::load(fixturePath("tiny-mixtral").toStdString(), o);
        const std::vector<std::vector<int>> prompts{chat.promptIds, longer.promptIds};
        std::vector<std::unique_ptr<Session>> owned;
        std::vector<Session*> sessions;
        std::vector<int> tokens;
        for (const auto& prompt : prompts) {
            owned.push_back(engine->newSession());
            sessions.push_back(owned.back().get());
            const auto& logits = owned.back()->append(prompt);
            tokens.push_back(static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        }
        std::vector<std::vector<int>> got(prompts.size());
        for (int step = 0; step < 6; ++step) {
            const auto rows = Session::decodeTogether(sessions, tokens);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                got[i].push_back(tokens[i]);
                tokens[i] = static_cast<int>(std::max_element(rows[i].begin(), rows[i].end()) - rows[i].begin());
            }
        }
        QVERIFY(engine->info().deviceNotice.find("the GPU failed") == 0);
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            got[i].push_back(tokens[i]);
            auto reference = cpu->newSession();
            QCOMPARE(generate(*reference, prompts[i], 7), got[i]);
        }
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
