#pragma once
// Which sampling an answer uses: the conversation's own choice, else the app's default, else what the
// model's generation_config.json recommends.
#include "tandem/engine.h"
#include "ui/settings/app_settings.h"
#include "ui/store/chat_types.h"
#include "ui/worker/engine_types.h"

namespace tandem::ui {

tandem::GenerateOptions generateOptionsFor(const ConversationSettings& conversation, const SamplingDefaults& defaults,
                                           const ModelSummary& model);

// The context policy's budget for a prompt: the context less room for an answer (its token limit, at
// most a quarter of the context). 0 (everything is sent) when the policy is off or no model is loaded.
int promptBudgetFor(bool fitToContext, int contextLength, int maxNewTokens);

// A conversation's title from its first message: one line, at most `maxLength` characters.
QString titleFromMessage(const QString& text, int maxLength = 48);

}  // namespace tandem::ui
