#include "ui/text/prompt_fit.h"

namespace tandem::ui {
namespace {

int countTokens(const ChatFormatter& formatter, const QList<PromptMessage>& messages) {
    return messages.isEmpty() ? 0 : static_cast<int>(formatter.encodeConversation(messages).size());
}

}  // namespace

FittedPrompt fitPrompt(const ChatFormatter& formatter, const QList<PromptMessage>& messages, int budget) {
    FittedPrompt all{messages, countTokens(formatter, messages), 0, true};
    if (budget <= 0 || all.tokens <= budget) return all;

    const bool hasSystem = !messages.isEmpty() && messages.first().role == QLatin1String("system");
    const qsizetype first = hasSystem ? 1 : 0;
    const qsizetype last = messages.size() - 1;
    // Where what is kept may start: a question after the first turn, or the last message.
    QList<qsizetype> starts;
    for (qsizetype i = first + 1; i < last; ++i)
        if (messages[i].role == QLatin1String("user")) starts.append(i);
    if (last > first) starts.append(last);
    if (starts.isEmpty()) {
        all.fits = false;
        return all;
    }

    const auto keepFrom = [&](qsizetype start) {
        FittedPrompt fitted;
        if (hasSystem) fitted.messages.append(messages.first());
        fitted.messages.append(messages.mid(start));
        fitted.omitted = static_cast<int>(start - first);
        fitted.tokens = countTokens(formatter, fitted.messages);
        fitted.fits = fitted.tokens <= budget;
        return fitted;
    };
    // The prompt shrinks as its start moves later: the earliest start that fits, by bisection.
    FittedPrompt best = keepFrom(starts.last());
    if (!best.fits) return best;
    qsizetype low = 0, high = starts.size() - 1;  // starts[high] fits
    while (low < high) {
        const qsizetype mid = (low + high) / 2;
        FittedPrompt tried = keepFrom(starts[mid]);
        if (tried.fits) {
            best = std::move(tried);
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    return best;
}

}  // namespace tandem::ui
