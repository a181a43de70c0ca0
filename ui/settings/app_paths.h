#pragma once
// Where Tandem keeps things, following the XDG base directories:
//   data      $XDG_DATA_HOME/tandem    (~/.local/share/tandem): conversations.sqlite, models/
//   settings  $XDG_CONFIG_HOME/tandem  (~/.config/tandem): tandem.ini
//   shipped   <bin>/../share/tandem/models/<default model>: the model installed with Tandem
// The folders do not depend on the executable's name, so the tests' and helpers' processes use the
// same ones as the app.
#include <QSettings>
#include <QString>
#include <memory>

namespace tandem::ui::paths {

QString dataDir();
QString databaseFile();  // dataDir()/conversations.sqlite
QString modelsDir();     // dataDir()/models: models the user adds, one folder each
QString settingsFile();  // ~/.config/tandem/tandem.ini

// The user's settings file as QSettings (INI).
std::unique_ptr<QSettings> userSettings();

// The name of the default model's folder (the build's TANDEM_DEFAULT_MODEL_NAME).
QString defaultModelName();
// <folder of the running executable>/../share/tandem/models/<defaultModelName()>, whether or not it
// exists: the installed layout, which the build folder repeats.
QString shippedModelDir();

// Whether two folder names are the same folder (through links and "..", when both exist); an empty
// name is no folder.
bool sameFolder(const QString& a, const QString& b);

}  // namespace tandem::ui::paths
