#include "ui/settings/settings_reset.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLockFile>

namespace tandem::ui {

SettingsReset resetSettings(const QString& settingsFile, const QString& databaseFile) {
    const QString settings = QDir::toNativeSeparators(settingsFile);
    const QString conversations = QDir::toNativeSeparators(databaseFile);
    // The same lock TandemApp takes; holding it also keeps a Tandem from starting halfway through.
    QLockFile running(databaseFile + QStringLiteral(".lock"));
    if (QFileInfo(databaseFile).absoluteDir().exists() && !running.tryLock(0) &&
        running.error() == QLockFile::LockFailedError) {
        return {false, QStringLiteral("Tandem is running (it holds %1.lock) and would save its settings again when it "
                                      "closes. Quit Tandem, then run tandem --reset-settings again.")
                           .arg(conversations)};
    }
    if (!QFileInfo::exists(settingsFile)) {
        return {true, QStringLiteral("The settings are already the defaults: %1 does not exist. Nothing was changed; "
                                     "the conversations in %2 were not touched.")
                          .arg(settings, conversations)};
    }
    const QString backup = settingsFile + QStringLiteral(".bak");
    if (QFileInfo::exists(backup) && !QFile::remove(backup)) {
        return {false, QStringLiteral("Could not replace the old backup %1; remove it (or make its folder writable), "
                                      "then run tandem --reset-settings again. Nothing was changed.")
                           .arg(QDir::toNativeSeparators(backup))};
    }
    if (!QFile::rename(settingsFile, backup)) {
        return {false, QStringLiteral("Could not move %1 aside to %2; make its folder writable, then run tandem "
                                      "--reset-settings again. Nothing was changed.")
                           .arg(settings, QDir::toNativeSeparators(backup))};
    }
    return {true, QStringLiteral("Reset every setting to its default: moved %1 to %2 (rename it back to undo). The "
                                 "conversations in %3 were not touched.")
                      .arg(settings, QDir::toNativeSeparators(backup), conversations)};
}

}  // namespace tandem::ui
