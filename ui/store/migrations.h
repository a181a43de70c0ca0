#pragma once
// The schema, as the list of steps that build it: step i takes a database from user_version i to i+1.
// A released step never changes; a new column or table is a new step at the end (1: conversations,
// messages, search; 2: message versions).
#include <QStringList>
#include <vector>

namespace tandem::ui {

struct Migration {
    const char* what;
    QStringList statements;
};

const std::vector<Migration>& migrations();

}  // namespace tandem::ui
