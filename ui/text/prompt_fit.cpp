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

    // Earlier turns that still fit beside what is kept, the latest first: the turn in the way (a long
    // paste, say) is left out, not everything before it. A turn is [its start, the next start).
    QList<qsizetype> turnStarts{first};
    for (const qsizetype s : starts)
        if (s > first && s < starts[high]) turnStarts.append(s);
    QList<QList<PromptMessage>> earlier;  // the turns added back, oldest first
    int tried = 0;
    for (qsizetype t = turnStarts.size() - 1; t >= 0 && tried < kMaxEarlierTurnsTried; --t, ++tried) {
        const qsizetype end = t + 1 < turnStarts.size() ? turnStarts[t + 1] : starts[high];
        QList<QList<PromptMessage>> withIt = earlier;
        withIt.prepend(messages.mid(turnStarts[t], end - turnStarts[t]));
        FittedPrompt candidate;
        if (hasSystem) candidate.messages.append(messages.first());
        for (const auto& turn : withIt) candidate.messages.append(turn);
        candidate.messages.append(messages.mid(starts[high]));
        candidate.tokens = countTokens(formatter, candidate.messages);
        if (candidate.tokens > budget) continue;
        earlier = std::move(withIt);
        candidate.omitted = static_cast<int>(messages.size() - candidate.messages.size());
        best = std::move(candidate);
    }
    return best;
}

}  // namespace tandem::ui
