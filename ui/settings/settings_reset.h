#pragma once
// `tandem --reset-settings`: every setting back to its default, conversations untouched. The settings
// file is moved aside (tandem.ini.bak), not deleted, so a reset can be undone by renaming it back.
#include <QString>

namespace tandem::ui {

struct SettingsReset {
    bool ok = false;
    QString message;  // what was done, or why nothing was and what to do
};

// Resets the settings in `settingsFile`. Refuses while a Tandem is running on `databaseFile` (it holds
// the database's lock), because that Tandem would write its settings back when it closes.
SettingsReset resetSettings(const QString& settingsFile, const QString& databaseFile);

}  // namespace tandem::ui
