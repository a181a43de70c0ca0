#include "ui/shell/screenshot.h"

#include <QApplication>
#include <QEventLoop>
#include <QPixmap>
#include <QTemporaryDir>
#include <QTimer>
#include <cmath>
#include <cstdio>

#include "ui/shell/tandem_app.h"
#include "ui/widgets/chat_view.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/message_view.h"
#include "ui/widgets/reasoning_section.h"

namespace tandem::ui {
namespace {

const char* const kQuestion = "How does Tandem run a 671B-parameter model on one GPU?";

const char* const kReasoning =
    "The user asks how hybrid inference works. Explain the split: the dense, latency-critical parts on the GPU, "
    "the routed experts on the CPU, and why that fits in memory. Then mention expert deferral and show a short "
    "sketch of one decode step.";

const char* const kAnswer = R"(## Two processors, one token

A Mixture-of-Experts layer activates only **8 of its 256 experts** for each token, so most of the weights sit idle. Tandem splits the work where it fits best:

| Part | Runs on | Why |
|---|---|---|
| Attention, shared experts, router | GPU | dense and latency-critical |
| Routed experts | CPU | huge, but only a few are read per token |

The CPU reads the chosen experts straight from RAM with AVX-512 kernels while the GPU computes the shared expert:

```cpp
for (int layer = 0; layer < layers; ++layer) {
    gpu.attention(layer);
    auto chosen = gpu.route(layer);   // top-k experts and weights
    cpu.submit(layer, chosen);        // runs while the GPU continues
    gpu.sharedExpert(layer);
    gpu.add(cpu.wait(layer));
}
```

With *expert deferral* the least important experts finish while the next layer's attention already runs.)";

void addDemoConversations(ConversationStore& store, const QString& modelName) {
    const auto add = [&](const QString& title, const QString& question, const QString& answer, const QString& reasoning,
                         const AnswerMetrics& metrics) {
        const qint64 id = store.createConversation(title);
        ChatMessage user;
        user.conversationId = id;
        user.role = QStringLiteral("user");
        user.content = question;
        store.appendMessage(user);
        ChatMessage reply;
        reply.conversationId = id;
        reply.role = QStringLiteral("assistant");
        reply.model = modelName;
        store.appendMessage(reply);
        reply.content = answer;
        reply.reasoning = reasoning;
        reply.metrics = metrics;
        store.finishMessage(reply);
        return id;
    };
    add(QStringLiteral("Rust lifetimes in iterators"), QStringLiteral("Why does my iterator borrow outlive the vector?"),
        QStringLiteral("Because `iter()` borrows the vector for as long as the iterator lives."), {}, {48, 96, 22.4, 0.6});
    add(QStringLiteral("Plan a weekend in Kyoto"), QStringLiteral("Two days in Kyoto in November: what should I see?"),
        QStringLiteral("Start early at Fushimi Inari, then Tofuku-ji for the autumn leaves."), {}, {40, 211, 21.9, 0.7});
    add(QStringLiteral("Summarize the KTransformers paper"), QStringLiteral("Summarize the KTransformers paper in five bullets."),
        QStringLiteral("- CPU/GPU hybrid MoE inference\n- AMX and AVX-512 expert kernels"), {}, {612, 180, 20.8, 1.9});
    const qint64 main = add(QStringLiteral("How Tandem runs a 671B model"), QString::fromUtf8(kQuestion),
                            QString::fromUtf8(kAnswer), QString::fromUtf8(kReasoning), {34, 412, 21.7, 0.84});
    store.setLastConversationId(main);
}

// A minute of readings shaped like a session: idle, an answer streaming, idle again.
void addDemoReadings(StatsModel& stats) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    for (int i = 0; i < StatsModel::kWindowRows; ++i) {
        const double t = i * 0.5;
        const bool answering = t > 14 && t < 46;
        const double wobble = std::sin(t * 1.7) * 0.5 + std::sin(t * 0.6) * 0.5;
        stats.setGenerating(answering);
        if (answering) {
            LiveEngineStats live;
            live.decodeTokensPerSecond = 21.0 + 1.6 * wobble;
            live.expertPoolBusy = 0.82 + 0.05 * wobble;
            stats.setLiveEngineStats(live);
        }
        SystemSample s;
        s.seconds = t;
        s.cpuBusy = answering ? 0.86 + 0.05 * wobble : 0.04 + 0.02 * std::abs(wobble);
        s.memoryTotal = static_cast<quint64>(125 * kGiB);
        s.memoryUsed = static_cast<quint64>((answering ? 96.4 : 95.8) * kGiB);
        s.appResident = static_cast<quint64>(92.3 * kGiB);
        s.gpu = GpuReading{QStringLiteral("NVIDIA H200"), answering ? 0.58 + 0.08 * wobble : 0.01,
                           static_cast<quint64>((answering ? 41.5 : 40.9) * kGiB), static_cast<quint64>(141 * kGiB)};
        stats.addSample(s);
    }
    stats.setGenerating(false);
}

}  // namespace

int renderScreenshot(const QString& path, ThemeChoice theme) {
    QTemporaryDir dir;
    auto settings = std::make_unique<QSettings>(dir.filePath(QStringLiteral("settings.ini")), QSettings::IniFormat);
    settings->setValue("appearance/theme", static_cast<int>(theme));
    TandemAppOptions options;
    options.inMemoryDatabase = true;
    options.settings = std::move(settings);
    options.monitorSystem = false;
    options.offerModelWizard = false;
    TandemApp app(std::move(options));

    QEventLoop wait;
    QObject::connect(app.model(), &ModelController::stateChanged, &wait, [&](ModelController::State s) {
        if (s == ModelController::State::Ready || s == ModelController::State::Failed) wait.quit();
    });
    QTimer::singleShot(60000, &wait, &QEventLoop::quit);
    app.start();
    if (app.model()->state() == ModelController::State::Loading) wait.exec();
    if (!app.model()->isReady())
        std::fprintf(stderr, "note: no default model loaded (%s); the screenshot shows the window without one\n",
                     qPrintable(app.model()->lastError()));

    addDemoConversations(*app.store(), app.model()->isReady() ? app.model()->summary().name : QStringLiteral("Assistant"));
    app.chat()->openLastConversation();
    addDemoReadings(*app.stats());

    MainWindow* window = app.window();
    window->setFitToScreen(false);  // 1440x900 whatever the (offscreen) screen
    window->resize(1440, 900);
    window->show();
    for (int i = 0; i < 5; ++i) {
        QApplication::processEvents();
        window->chatView()->renderPending();
    }
    // Open the answer's reasoning, to show the collapsible section.
    if (MessageView* answer = window->chatView()->messageView(1)) answer->reasoningSection()->setExpanded(true);
    QApplication::processEvents();
    const QPixmap shot = window->grab();
    if (!shot.save(path)) {
        std::fprintf(stderr, "error: could not write %s\n", qPrintable(path));
        return 1;
    }
    std::printf("wrote %s (%dx%d)\n", qPrintable(path), shot.width(), shot.height());
    return 0;
}

}  // namespace tandem::ui
