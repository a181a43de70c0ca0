#include "ui_test_support.h"

#include <QSettings>
#include <QTest>
#include <algorithm>

#include "tandem/chat.h"
#include "test_support.h"
#include "ui/widgets/composer.h"
#include "ui/widgets/main_window.h"

namespace tandem::test {
namespace {

class GatedModel : public ui::LoadedModel {
public:
    GatedModel(std::unique_ptr<ui::LoadedModel> inner, std::shared_ptr<ModelGate> gate)
        : inner_(std::move(inner)), gate_(std::move(gate)) {
        gate_->engineDeferral = inner_->deferredExperts();
    }

    const tandem::ModelInfo& info() const override { return inner_->info(); }
    int threads() const override { return inner_->threads(); }
    tandem::GenerationStats generate(std::span<const int> conversation, const tandem::GenerateOptions& options,
                                     const std::function<bool(int)>& onToken) override {
        gate_->deferralPerToken.clear();
        gate_->lastPrompt.assign(conversation.begin(), conversation.end());
        gate_->lastOptions = options;
        gate_->prompts.push_back(gate_->lastPrompt);
        int count = 0;
        const auto gatedToken = [&](int token) {
            gate_->deferralPerToken.push_back(inner_->deferredExperts());
            if (++count == gate_->holdAtToken.load()) {
                gate_->reached.release();
                gate_->release.acquire();
            }
            return onToken(token);
        };
        if (!gate_->scriptedAnswer.empty())
            return scriptedGeneration(gate_->scriptedAnswer, conversation, options, gatedToken);
        return inner_->generate(conversation, options, gatedToken);
    }
    void setDeferredExperts(int count) override {
        inner_->setDeferredExperts(count);
        gate_->engineDeferral = inner_->deferredExperts();
    }
    int deferredExperts() const override { return inner_->deferredExperts(); }
    ui::EngineTelemetry telemetry() const override { return inner_->telemetry(); }

private:
    std::unique_ptr<ui::LoadedModel> inner_;
    std::shared_ptr<ModelGate> gate_;
};

}  // namespace

tandem::GenerationStats scriptedGeneration(const std::vector<int>& tokens, std::span<const int> prompt,
                                           const tandem::GenerateOptions& options,
                                           const std::function<bool(int)>& onToken) {
    tandem::GenerationStats stats;
    stats.promptTokens = static_cast<int>(prompt.size());
    stats.prefilledTokens = stats.promptTokens;
    for (const int token : tokens) {
        if (stats.generatedTokens == options.maxNewTokens) break;
        ++stats.generatedTokens;
        const auto& stops = options.stopTokenIds;
        if (options.stopAtEos && std::find(stops.begin(), stops.end(), token) != stops.end()) {
            stats.stoppedAtEos = true;
            break;
        }
        if (!onToken(token)) break;
    }
    return stats;
}

CliChat cliChat(const QString& modelDir, const QString& modelType, const QString& systemPrompt,
                const QStringList& questions, const std::vector<int>& script, int maxNewTokens) {
    const tandem::Chat chat(modelDir.toStdString(), modelType.toStdString());
    tandem::ChatOptions options;
    options.generate.maxNewTokens = maxNewTokens;
    CliChat cli;
    const auto model = [&](std::span<const int> prompt, const tandem::GenerateOptions& generate,
                           const std::function<bool(int)>& onToken) {
        cli.prompts.emplace_back(prompt.begin(), prompt.end());
        return scriptedGeneration(script, prompt, generate, onToken);
    };
    std::vector<tandem::ChatMessage> conversation;
    if (!systemPrompt.isEmpty()) conversation.push_back({"system", systemPrompt.toStdString(), ""});
    for (const QString& question : questions) {
        conversation.push_back({"user", question.toStdString(), ""});
        const auto reply = chat.reply(model, conversation, options, [](tandem::TextKind, std::string_view) { return true; });
        conversation.push_back({"assistant", reply.answer, reply.reasoning});
        cli.answers << QString::fromStdString(reply.answer);
        cli.reasonings << QString::fromStdString(reply.reasoning);
    }
    return cli;
}

ui::ModelLoader gatedModelLoader(std::shared_ptr<ModelGate> gate) {
    return [gate](const ui::LoadRequest& request) -> std::unique_ptr<ui::LoadedModel> {
        ++gate->loads;
        if (gate->holdLoad.exchange(false)) {
            gate->reached.release();
            gate->release.acquire();
        }
        return std::make_unique<GatedModel>(ui::loadEngineModel(request), gate);
    };
}

ui::TandemAppOptions appOptions(const QTemporaryDir& dir, ui::ModelLoader factory) {
    ui::TandemAppOptions options;
    options.databasePath = dir.filePath(QStringLiteral("conversations.sqlite"));
    options.settings = std::make_unique<QSettings>(dir.filePath(QStringLiteral("settings.ini")), QSettings::IniFormat);
    options.modelLoader = std::move(factory);
    options.embeddedModelDir = fixturePath(QStringLiteral("tiny-qwen3moe"));
    options.monitorSystem = false;
    return options;
}

// The limits only keep a broken build from hanging CTest; nothing asserts on how long anything took.
bool waitForModel(ui::TandemApp& app) {
    return QTest::qWaitFor([&] { return app.model()->state() != ui::ModelController::State::Loading; }, 60000) &&
           app.model()->isReady();
}

bool waitForIdle(ui::TandemApp& app) {
    return QTest::qWaitFor([&] { return !app.chat()->isGenerating(); }, 60000);
}

void limitAnswers(ui::TandemApp& app, int tokens) {
    ui::SamplingDefaults s = app.settings()->sampling();
    s.maxNewTokens = tokens;
    app.settings()->setSampling(s);
}

std::unique_ptr<ui::TandemApp> startApp(const QTemporaryDir& dir, ui::ModelLoader factory) {
    auto app = std::make_unique<ui::TandemApp>(appOptions(dir, std::move(factory)));
    limitAnswers(*app);
    app->start();
    app->window()->show();
    return app;
}

void typeAndSend(ui::TandemApp& app, const QString& text) {
    ui::Composer* composer = app.window()->composer();
    composer->focusInput();
    QTest::keyClicks(composer->editor(), text);
    QTest::keyClick(composer->editor(), Qt::Key_Return);
}

}  // namespace tandem::test
