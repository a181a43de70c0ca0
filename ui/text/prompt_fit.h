#pragma once
// The context policy's arithmetic (issue 24): a conversation longer than the model's context is sent
// as its system prompt and its latest turns; the turns in between are left out.
#include <QList>

#include "ui/text/chat_formatter.h"

namespace tandem::ui {

struct FittedPrompt {
    QList<PromptMessage> messages;  // what is sent
    int tokens = 0;                 // the prompt they make
    int omitted = 0;                // earlier messages left out
    bool fits = true;               // false: even the last turn alone takes more than the budget
};

// Leaves out the oldest messages after the system prompt, whole turns at a time (what is left starts
// with a question, or is the last message), until the prompt takes at most `budget` tokens. The system
// prompt and the last message are always kept. A budget of 0 or less sends everything. Exceptions of
// the formatter (a template's error, a cancelled render) pass through.
FittedPrompt fitPrompt(const ChatFormatter& formatter, const QList<PromptMessage>& messages, int budget);

}  // namespace tandem::ui
