#pragma once
// `tandem --screenshot FILE.png`: the main window with a demo conversation and a demo minute of
// dashboard readings, rendered to a PNG for the documentation. The model is the real default one.
#include <QString>

#include "ui/settings/app_settings.h"

namespace tandem::ui {

// Returns 0 on success; prints why on failure.
int renderScreenshot(const QString& path, ThemeChoice theme);

}  // namespace tandem::ui
