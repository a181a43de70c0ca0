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

// A conversation's title from its first message: one line, at most `maxLength` characters.
QString titleFromMessage(const QString& text, int maxLength = 48);

}  // namespace tandem::ui
