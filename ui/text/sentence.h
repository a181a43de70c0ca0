#pragma once
// Messages put together from a problem's own words: `text` ending as a sentence, so another may follow.
#include <QString>

namespace tandem::ui {

inline QString sentence(QString text) {
    text = text.trimmed();
    if (!text.isEmpty() && !text.endsWith(QLatin1Char('.')) && !text.endsWith(QLatin1Char('!')) &&
        !text.endsWith(QLatin1Char('?')))
        text += QLatin1Char('.');
    return text;
}

}  // namespace tandem::ui
