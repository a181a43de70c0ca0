#include "ui/controllers/generation_options.h"

#include <QRandomGenerator>
#include <algorithm>

namespace tandem::ui {

tandem::GenerateOptions generateOptionsFor(const ConversationSettings& conversation, const SamplingDefaults& defaults,
                                           const ModelSummary& model) {
    tandem::GenerateOptions options;
    options.maxNewTokens = conversation.maxNewTokens > 0 ? conversation.maxNewTokens : defaults.maxNewTokens;
    if (conversation.overrideSampling)
        options.sampling = conversation.sampling;
    else if (defaults.useModelRecommendation)
        options.sampling = model.recommendedSampling;
    else
        options.sampling = defaults.sampling;
    // A fresh seed per answer, so that regenerating gives a different answer when sampling.
    options.sampling.seed = QRandomGenerator::global()->generate64();
    return options;
}

int promptBudgetFor(bool fitToContext, int contextLength, int maxNewTokens) {
    if (!fitToContext || contextLength <= 0) return 0;
    const int room = std::clamp(maxNewTokens, 1, std::max(1, contextLength / 4));
    return std::max(1, contextLength - room);
}

QString titleFromMessage(const QString& text, int maxLength) {
    const QString line = text.simplified();
    if (line.isEmpty()) return QStringLiteral("New chat");
    return line.size() <= maxLength ? line : line.left(maxLength - 1).trimmed() + QChar(0x2026);
}

}  // namespace tandem::ui
