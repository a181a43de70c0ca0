#pragma once
// Helpers of the UI suites: a model loader that can hold a load or an answer at a chosen point (to
// stop mid-answer or watch the event loop turn, without timing anything), and app options that keep
// each test's database and settings in its own temporary folder.
#include <QSemaphore>
#include <QStringList>
#include <QTemporaryDir>
#include <atomic>
#include <memory>

#include "ui/shell/tandem_app.h"
#include "ui/worker/loaded_model.h"

namespace tandem::test {

struct ModelGate {
    // When set, the next load waits between `reached` and `release`.
    std::atomic<bool> holdLoad{false};
    // When > 0, an answer waits when it reaches that many tokens, before the worker sees the token.
    std::atomic<int> holdAtToken{0};
    QSemaphore reached;
    QSemaphore release;
    // The deferral the engine session had when each token of the last answer was produced.
    std::vector<int> deferralPerToken;
    // What the last answer was asked with (written on the engine thread before it starts), and the
    // prompts of all answers so far.
    std::vector<int> lastPrompt;
    tandem::GenerateOptions lastOptions;
    std::vector<std::vector<int>> prompts;
    // When not empty, every answer is these tokens instead of the model's (the model is loaded but not
    // run); they end like the engine's at a stop token, at maxNewTokens or when onToken says so.
    std::vector<int> scriptedAnswer;
    // The engine-side deferral of the loaded model, read back from the engine session.
    std::atomic<int> engineDeferral{-1};
    std::atomic<int> loads{0};
};

// An answer of `tokens` as the engine gives it: onToken for each until it returns false, a stop token
// (not passed on) or maxNewTokens.
tandem::GenerationStats scriptedGeneration(const std::vector<int>& tokens, std::span<const int> prompt,
                                           const tandem::GenerateOptions& options,
                                           const std::function<bool(int)>& onToken);

// tandem-cli's side of a chat, for comparing with the app's: the conversation kept as app/cmd_chat.cpp
// keeps it (the system prompt, each question, each answer with its reasoning), every turn answered by
// tandem::Chat::reply with `script` as the model's tokens.
struct CliChat {
    std::vector<std::vector<int>> prompts;  // what each turn sent the model
    QStringList answers;
    QStringList reasonings;
};
CliChat cliChat(const QString& modelDir, const QString& modelType, const QString& systemPrompt,
                const QStringList& questions, const std::vector<int>& script, int maxNewTokens);

// Loads the real engine, with the holds of `gate`.
ui::ModelLoader gatedModelLoader(std::shared_ptr<ModelGate> gate);

// Settings (INI) and database in `dir`, the tiny-qwen3moe fixture as the embedded model, no system
// monitor thread.
ui::TandemAppOptions appOptions(const QTemporaryDir& dir, ui::ModelLoader factory = {});

// Waits (without asserting on time) until the model is ready or failed; returns whether it is ready.
bool waitForModel(ui::TandemApp& app);
// Waits until no answer is being generated.
bool waitForIdle(ui::TandemApp& app);

// Short answers keep the suites fast; the tiny model may also end earlier at its end-of-turn token.
void limitAnswers(ui::TandemApp& app, int tokens = 16);
// The app on appOptions(dir, factory), answers limited, started and its window shown.
std::unique_ptr<ui::TandemApp> startApp(const QTemporaryDir& dir, ui::ModelLoader factory = {});
// Types into the composer and presses Enter, as a user does.
void typeAndSend(ui::TandemApp& app, const QString& text);

}  // namespace tandem::test
