#pragma once
// Light, dark or the system's look: the Fusion style with a palette of our own, and a style sheet for
// the chat's own elements (bubbles, code blocks, banners) derived from that palette.
#include "ui/settings/app_settings.h"

namespace tandem::ui {

// Applies to the whole application. Returns whether the result is dark.
bool applyTheme(const Appearance& appearance);
bool isDarkTheme();

}  // namespace tandem::ui
