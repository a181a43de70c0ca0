#pragma once
// Light, dark or the system's look: the Fusion style with a palette of our own, and a style sheet for
// the chat's own elements (bubbles, code blocks, banners) derived from that palette.
#include <QFont>

#include "ui/settings/app_settings.h"

namespace tandem::ui {

// Applies to the whole application. Returns whether the result is dark.
bool applyTheme(const Appearance& appearance);
bool isDarkTheme();

// The font for code: fixed pitch whatever fontconfig answers for the system's fixed font (under some
// platforms it names a proportional one), from the monospace fonts the package depends on.
QFont codeFont();

}  // namespace tandem::ui
