// The engine worker on its own thread, with the real tiny-qwen3moe model: loading, streaming an answer
// identical to the engine's own chat turn (tandem-cli's), stop strings, stopping, deferral reaching the
// engine, failures, and the UI thread's event loop turning while the engine is busy.
#include <functional>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include "flaky_gpu.h"
#include "tandem/chat.h"
#include "tandem/error.h"
#include "test_support.h"
#include "ui/worker/engine_host.h"
#include "ui/worker/loaded_model.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

LoadRequest fixtureRequest(int contextLength = 4096) {
    LoadRequest r;
    r.modelDir = test::fixturePath("tiny-qwen3moe");
    r.threads = 1;
    r.contextLength = contextLength;
    return r;
}

GenerationRequest question(quint64 id, int maxNewTokens = 24) {
    GenerationRequest r;
    r.id = id;
    r.messages = {{"system", "Be brief."}, {"user", "What is a mixture of experts?"}};
    r.options.maxNewTokens = maxNewTokens;
    r.options.stopAtEos = false;  // a fixed number of tokens, whatever the tiny model samples
    return r;
}

// Records what the worker reports, received on this (the UI) thread through queued connections as the
// app receives them.
class EngineEvents : public QObject {
public:
    explicit EngineEvents(EngineWorker* worker) {
        connect(worker, &EngineWorker::modelLoaded, this, [this](const ModelSummary& s) { loaded.append(s); });
        connect(worker, &EngineWorker::modelLoadFailed, this, [this](const QString&, const QString& m) { loadErrors << m; });
        connect(worker, &EngineWorker::answerStarted, this, [this](quint64, int tokens) { promptTokens << tokens; });
        connect(worker, &EngineWorker::answerTextArrived, this, [this](quint64 id, const QString& a, const QString& r) {
            textIds << id;
            answer += a;
            reasoning += r;
        });
        connect(worker, &EngineWorker::answerFinished, this, [this](quint64 id, const AnswerStats& s) {
            finishedIds << id;
            finished << s;
        });
        connect(worker, &EngineWorker::answerFailed, this, [this](quint64, const QString& m) { failures << m; });
        connect(worker, &EngineWorker::deferralApplied, this, [this](int d) { deferrals << d; });
        connect(worker, &EngineWorker::liveStatsMeasured, this, [this](const LiveEngineStats& s) { live << s; });
    }

    QList<ModelSummary> loaded;
    QStringList loadErrors;
    QList<int> promptTokens;
    QList<quint64> textIds;
    QString answer;
    QString reasoning;
    QList<quint64> finishedIds;
    QList<AnswerStats> finished;
    QStringList failures;
    QList<int> deferrals;
    QList<LiveEngineStats> live;
};

// Waits for events of the worker; the limit only keeps a broken build from hanging.
bool waitFor(const std::function<bool()>& condition) { return QTest::qWaitFor(condition, 60000); }

// Loads through a queued call, as the app does, and waits for the outcome.
bool load(EngineWorker* worker, const LoadRequest& request) {
    EngineEvents events(worker);
    QMetaObject::invokeMethod(worker, "loadModel", Qt::QueuedConnection, Q_ARG(tandem::ui::LoadRequest, request));
    return waitFor([&] { return events.loaded.size() + events.loadErrors.size() > 0; }) && events.loaded.size() == 1;
}

void generate(EngineWorker* worker, const GenerationRequest& request) {
    QMetaObject::invokeMethod(worker, "generate", Qt::QueuedConnection, Q_ARG(tandem::ui::GenerationRequest, request));
}

}  // namespace

class EngineWorkerTest : public QObject {
    Q_OBJECT

private slots:
    // The load request's settings as the engine takes them: the experts' GPU memory in GB, automatic
    // below 0; CPU only as the CPU device.
    void loadRequestsBecomeEngineOptions() {
        LoadRequest request;
        QCOMPARE(engineOptionsFor(request).gpuExpertMemory, std::int64_t{-1});
        QVERIFY(engineOptionsFor(request).dense == tandem::DensePrecision::Int8);  // the default
        request.int8Dense = false;
        QVERIFY(engineOptionsFor(request).dense == tandem::DensePrecision::Checkpoint);
        QVERIFY(engineOptionsFor(request).device == tandem::Device::Auto);
        request.gpuExpertMemoryGb = 24;
        QCOMPARE(engineOptionsFor(request).gpuExpertMemory, std::int64_t{24'000'000'000});
        request.gpuExpertMemoryGb = 0;
        QCOMPARE(engineOptionsFor(request).gpuExpertMemory, std::int64_t{0});
        request.gpuDevice = -1;
        QVERIFY(engineOptionsFor(request).device == tandem::Device::Cpu);
        // Settings' GPU: automatic (0) leaves the engine's default (the GPU with the most memory, or
        // TANDEM_GPU_DEVICES); one chosen is asked for by number.
        request.gpuDevice = 0;
        QVERIFY(engineOptionsFor(request).gpuDevices.empty());
        request.gpuDevice = 1;
        QCOMPARE(engineOptionsFor(request).gpuDevices, std::vector<int>{1});
        request.gpuDevice = kFirstGpuDevice;  // GPU 0 chosen in particular
        QCOMPARE(engineOptionsFor(request).gpuDevices, std::vector<int>{0});
        QVERIFY(engineOptionsFor(request).device == tandem::Device::Auto);
        request.gpuDevice = kEveryGpuDevice;  // every GPU: the engine's own word for it
        QCOMPARE(engineOptionsFor(request).gpuDevices, std::vector<int>{tandem::kEveryGpu});
        QVERIFY(engineOptionsFor(request).device == tandem::Device::Auto);
    }

    void runsOnItsOwnThread() {
        EngineHost host;
        QVERIFY(host.worker()->thread() != QThread::currentThread());
        QVERIFY(host.worker()->thread()->isRunning());
    }

    void loadsAndDescribesTheModel() {
        EngineHost host;
        EngineEvents events(host.worker());
        QVERIFY(load(host.worker(), fixtureRequest()));
        QVERIFY(waitFor([&] { return !events.loaded.isEmpty(); }));
        const ModelSummary summary = events.loaded.first();
        QCOMPARE(summary.name, QStringLiteral("tiny-qwen3moe"));
        QCOMPARE(summary.modelType, QStringLiteral("qwen3_moe"));
        QCOMPARE(summary.layers, 3);
        QCOMPARE(summary.experts, 16);
        QCOMPARE(summary.expertsPerToken, 4);
        QCOMPARE(summary.threads, 1);
        QCOMPARE(summary.textHandling, QStringLiteral("the model's tokenizer and chat template"));
    }

    void streamsTheEnginesAnswer() {
        EngineHost host;
        QVERIFY(load(host.worker(), fixtureRequest()));
        EngineEvents events(host.worker());
        generate(host.worker(), question(7));
        QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
        for (const quint64 id : events.textIds) QCOMPARE(id, quint64(7));
        QCOMPARE(events.finishedIds, QList<quint64>{7});
        const QString answer = events.answer;
        const QString reasoning = events.reasoning;
        const AnswerStats stats = events.finished.first();
        QCOMPARE(stats.generatedTokens, 24);
        QVERIFY(!stats.stoppedByUser);
        QVERIFY(stats.timeToFirstTokenSeconds > 0);
        QCOMPARE(stats.contextLength, 4096);
        // The dashboard hears the speed at least once, with the answer's full count last.
        QVERIFY(!events.live.isEmpty());
        QCOMPARE(events.live.last().generatedTokens, 24);
        QVERIFY(events.live.last().expertPoolBusy);  // the engine's decode profile
        QVERIFY(*events.live.last().expertPoolBusy > 0 && *events.live.last().expertPoolBusy <= 1);
        QVERIFY(!events.live.last().gpuBusy);  // CPU only here
        QVERIFY(!stats.layerSplit.isEmpty());

        // The same conversation straight through the engine's own chat turn (tandem-cli's) gives the same text.
        const auto formatter = makeChatFormatter(test::fixturePath("tiny-qwen3moe"), "qwen3_moe");
        const std::vector<int> prompt = formatter->encodeConversation(question(7).messages);
        QCOMPARE(events.promptTokens, QList<int>{static_cast<int>(prompt.size())});
        QCOMPARE(stats.promptTokens, static_cast<int>(prompt.size()));
        tandem::EngineOptions engineOptions = engineOptionsFor(fixtureRequest());  // the worker's, int8 dense included
        engineOptions.threads = 1;
        auto engine = tandem::Engine::load(test::fixturePath("tiny-qwen3moe").toStdString(), engineOptions);
        auto session = engine->newSession();
        const tandem::Chat chat(*engine, test::fixturePath("tiny-qwen3moe").toStdString());
        tandem::ChatOptions options;
        options.generate = question(7).options;
        const tandem::ChatReply expected = chat.reply(*session, {{"system", "Be brief.", ""}, {"user", "What is a mixture of experts?", ""}},
                                                      options, [](tandem::TextKind, std::string_view) { return true; });
        QCOMPARE(expected.stats.promptTokens, static_cast<int>(prompt.size()));
        QCOMPARE(answer, QString::fromStdString(expected.answer));
        QCOMPARE(reasoning, QString::fromStdString(expected.reasoning));
        QVERIFY(!(answer + reasoning).isEmpty());
        QVERIFY(!stats.stoppedByStopString);
    }

    void aStopStringEndsTheAnswerBeforeIt() {
        QString free;
        {
            EngineHost host;
            QVERIFY(load(host.worker(), fixtureRequest()));
            EngineEvents events(host.worker());
            generate(host.worker(), question(1));
            QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
            free = events.answer;
        }
        QVERIFY2(free.size() >= 6, qPrintable(free));

        // Stop at a piece of what the model says anyway: a fresh engine with the same seed says the same
        // up to there.
        GenerationRequest stopped = question(2);
        const QString stop = free.mid(3, 2);
        stopped.stopStrings = {stop};
        EngineHost host;
        QVERIFY(load(host.worker(), fixtureRequest()));
        EngineEvents events(host.worker());
        generate(host.worker(), stopped);
        QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
        const AnswerStats stats = events.finished.first();
        QVERIFY(stats.stoppedByStopString);
        QVERIFY(!stats.stoppedByUser && !stats.stoppedAtEos && !stats.filledContext);
        QCOMPARE(events.answer, free.left(free.indexOf(stop)));
        QVERIFY(stats.generatedTokens < 24);
    }

    void stopEndsTheAnswerAtTheNextToken() {
        auto gate = std::make_shared<test::ModelGate>();
        EngineHost host(test::gatedModelLoader(gate));
        QVERIFY(load(host.worker(), fixtureRequest()));
        EngineEvents events(host.worker());
        gate->holdAtToken = 3;
        generate(host.worker(), question(11, 200));
        QVERIFY(gate->reached.tryAcquire(1, 60000));
        host.worker()->stop(11);
        gate->release.release();
        QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
        const AnswerStats stats = events.finished.first();
        QVERIFY(stats.stoppedByUser);
        QCOMPARE(stats.generatedTokens, 3);
    }

    void stopEndsAPromptWhoseTemplateNeverFinishes() {
        // A hostile template: without a cancel the render runs until its step limit (seconds), and the
        // answer would fail with that instead of stopping when the user asks.
        QTemporaryDir dir;
        QVERIFY(test::copyFixture("tiny-qwen3moe", dir.path()));
        QJsonObject config = QJsonDocument::fromJson(test::readFile(dir.filePath("tokenizer_config.json"))).object();
        config["chat_template"] = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        QVERIFY(test::writeFile(dir.filePath("tokenizer_config.json"), QJsonDocument(config).toJson()));
        EngineHost host;
        LoadRequest request = fixtureRequest();
        request.modelDir = dir.path();
        QVERIFY(load(host.worker(), request));
        EngineEvents events(host.worker());
        generate(host.worker(), question(21));
        QTest::qWait(200);  // the render is under way
        host.worker()->stop(21);
        QVERIFY(waitFor([&] { return !events.finished.isEmpty() || !events.failures.isEmpty(); }));
        QCOMPARE(events.failures, QStringList());
        QVERIFY(events.finished.first().stoppedByUser);
        QCOMPARE(events.finished.first().generatedTokens, 0);
    }

    void stopBeforeTheAnswerStartsGeneratesNothing() {
        EngineHost host;
        QVERIFY(load(host.worker(), fixtureRequest()));
        EngineEvents events(host.worker());
        host.worker()->stop(5);
        generate(host.worker(), question(5));
        QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
        const AnswerStats stats = events.finished.first();
        QVERIFY(stats.stoppedByUser);
        QCOMPARE(stats.generatedTokens, 0);
    }

    void deferralReachesTheEngine() {
        auto gate = std::make_shared<test::ModelGate>();
        EngineHost host(test::gatedModelLoader(gate));
        LoadRequest request = fixtureRequest();
        request.deferredExperts = 1;
        EngineEvents events(host.worker());
        QVERIFY(load(host.worker(), request));
        QVERIFY(waitFor([&] { return events.deferrals == QList<int>{1}; }));
        QCOMPARE(gate->engineDeferral.load(), 1);

        host.worker()->setDeferral(2);
        QVERIFY(waitFor([&] { return events.deferrals.size() == 2; }));
        QCOMPARE(events.deferrals.last(), 2);
        QCOMPARE(gate->engineDeferral.load(), 2);
        host.worker()->setDeferral(99);  // clamped by the engine to k-1
        QVERIFY(waitFor([&] { return events.deferrals.size() == 3; }));
        QCOMPARE(events.deferrals.last(), 3);
        QCOMPARE(gate->engineDeferral.load(), 3);

        // While an answer streams, a new value applies from the next token on.
        gate->holdAtToken = 4;
        generate(host.worker(), question(3, 10));
        QVERIFY(gate->reached.tryAcquire(1, 60000));
        host.worker()->setDeferral(0);
        gate->release.release();
        QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
        QCOMPARE(events.deferrals.last(), 0);
        QCOMPARE(gate->deferralPerToken, (std::vector<int>{3, 3, 3, 3, 0, 0, 0, 0, 0, 0}));
        QCOMPARE(gate->engineDeferral.load(), 0);
    }

    void loadFailuresAreReportedAndTheWorkerStaysUsable() {
        EngineHost host;
        EngineEvents events(host.worker());
        LoadRequest missing = fixtureRequest();
        missing.modelDir = "/nonexistent/model";
        QVERIFY(!load(host.worker(), missing));
        QVERIFY(waitFor([&] { return events.loadErrors.size() == 1; }));
        QVERIFY(events.loadErrors.last().contains("does not exist"));

        QTemporaryDir broken;  // a config.json that is not JSON
        QVERIFY(test::copyFixture("tiny-qwen3moe", broken.path()));
        QVERIFY(test::writeFile(broken.filePath("config.json"), "{ not json"));
        LoadRequest brokenRequest;
        brokenRequest.modelDir = broken.path();
        QVERIFY(!load(host.worker(), brokenRequest));
        QVERIFY(waitFor([&] { return events.loadErrors.size() == 2; }));
        QVERIFY2(events.loadErrors.last().contains("config.json"), qPrintable(events.loadErrors.last()));

        QTemporaryDir noTokenizer;
        QVERIFY(test::copyFixture("tiny-qwen3moe", noTokenizer.path()));
        QVERIFY(QFile::remove(noTokenizer.filePath("tokenizer.json")));
        LoadRequest noTokenizerRequest;
        noTokenizerRequest.modelDir = noTokenizer.path();
        QVERIFY(!load(host.worker(), noTokenizerRequest));
        QVERIFY(waitFor([&] { return events.loadErrors.size() == 3; }));
        QVERIFY(events.loadErrors.last().contains("tokenizer.json"));

        generate(host.worker(), question(1));
        QVERIFY(waitFor([&] { return !events.failures.isEmpty(); }));
        QVERIFY(events.failures.first().contains("No model is loaded"));

        QVERIFY(load(host.worker(), fixtureRequest()));
        generate(host.worker(), question(2));
        QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
        QCOMPARE(events.finished.first().generatedTokens, 24);
    }

    void aConversationLongerThanTheContextIsRefused() {
        EngineHost host;
        QVERIFY(load(host.worker(), fixtureRequest(256)));
        EngineEvents events(host.worker());
        GenerationRequest r = question(9);
        r.messages.append({"user", QString("word ").repeated(100)});
        generate(host.worker(), r);
        QVERIFY(waitFor([&] { return !events.failures.isEmpty(); }));
        QVERIFY2(events.failures.first().contains("more than the 256 the context holds"), qPrintable(events.failures.first()));

        // One that fits gets the room that is left, and says the context filled up.
        GenerationRequest fits = question(10, 1000);
        generate(host.worker(), fits);
        QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
        const AnswerStats stats = events.finished.first();
        QVERIFY(stats.filledContext);
        QCOMPARE(stats.contextUsed(), 256);
    }

    // A GPU that fails in the middle of an answer: the answer still arrives whole (the same text as on
    // the CPU) and its stats carry the engine's notice, which the chat shows.
    void aGpuFailureFinishesTheAnswerOnTheCpu() {
        QString cpuAnswer;
        {
            EngineHost host;
            LoadRequest cpuOnly = fixtureRequest();
            cpuOnly.gpuDevice = -1;
            // The default int8 dense weights, as the model loaded for the GPU holds them too (and its
            // CPU fallback reads).
            QVERIFY(load(host.worker(), cpuOnly));
            EngineEvents events(host.worker());
            generate(host.worker(), question(3));
            QVERIFY(waitFor([&] { return !events.finished.isEmpty(); }));
            QVERIFY(events.finished.first().gpuFailure.isEmpty());
            cpuAnswer = events.answer;
        }
        const test::FlakyGpu gpu(5);  // the prefill and three decode steps, then a device error
        EngineHost host;
        QVERIFY(load(host.worker(), fixtureRequest()));
        EngineEvents events(host.worker());
        generate(host.worker(), question(4));
        QVERIFY(waitFor([&] { return !events.finished.isEmpty() || !events.failures.isEmpty(); }));
        QVERIFY2(events.failures.isEmpty(), qPrintable(events.failures.value(0)));
        const AnswerStats stats = events.finished.first();
        QCOMPARE(stats.generatedTokens, 24);
        QCOMPARE(events.answer, cpuAnswer);
        QVERIFY2(stats.gpuFailure.startsWith("the GPU failed (CUDA error: an illegal memory access"), qPrintable(stats.gpuFailure));
    }

    void theUiEventLoopTurnsWhileTheEngineWorks() {
        auto gate = std::make_shared<test::ModelGate>();
        EngineHost host(test::gatedModelLoader(gate));
        int ticks = 0;
        QTimer timer;
        connect(&timer, &QTimer::timeout, [&] { ++ticks; });
        timer.start(1);

        // The load is held inside the engine thread: this thread keeps handling its events.
        EngineEvents events(host.worker());
        gate->holdLoad = true;
        QMetaObject::invokeMethod(host.worker(), "loadModel", Qt::QueuedConnection,
                                  Q_ARG(tandem::ui::LoadRequest, fixtureRequest()));
        QVERIFY(QTest::qWaitFor([&] { return gate->reached.tryAcquire(); }, 60000));
        const int before = ticks;
        QTRY_VERIFY_WITH_TIMEOUT(ticks >= before + 5, 60000);
        QCOMPARE(events.loaded.size(), 0);
        gate->release.release();
        QVERIFY(waitFor([&] { return events.loaded.size() == 1; }));

        // The same while an answer is held after its second token.
        gate->holdAtToken = 2;
        generate(host.worker(), question(4));
        QVERIFY(QTest::qWaitFor([&] { return gate->reached.tryAcquire(); }, 60000));
        const int during = ticks;
        QTRY_VERIFY_WITH_TIMEOUT(ticks >= during + 5, 60000);
        QCOMPARE(events.finished.size(), 0);
        gate->release.release();
        QVERIFY(waitFor([&] { return events.finished.size() == 1; }));
    }
};

QTEST_MAIN(EngineWorkerTest)
#include "tst_engine_worker.moc"
