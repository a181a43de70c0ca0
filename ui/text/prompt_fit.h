#pragma once
// The context policy's arithmetic (issue 24): a conversation longer than the model's context is sent
// as its system prompt, its latest turns, and the earlier turns that still fit; what is left out is the
// middle (typically a long paste) or, when nothing else fits, everything before the latest turns.
#include <QList>

#include "ui/text/chat_formatter.h"

namespace tandem::ui {

struct FittedPrompt {
    QList<PromptMessage> messages;  // what is sent
    int tokens = 0;                 // the prompt they make
    int omitted = 0;                // earlier messages left out
    bool fits = true;               // false: even the last turn alone takes more than the budget
};

// Keeps the system prompt and the longest run of latest turns that fits `budget` tokens (a turn starts
// with a question; the last message is always kept), then, going back from there, every earlier turn
// that still fits beside them, skipping those that do not (up to kMaxEarlierTurnsTried of them). A
// budget of 0 or less sends everything. Exceptions of the formatter (a template's error, a cancelled
// render) pass through.
inline constexpr int kMaxEarlierTurnsTried = 32;
FittedPrompt fitPrompt(const ChatFormatter& formatter, const QList<PromptMessage>& messages, int budget);

}  // namespace tandem::ui
