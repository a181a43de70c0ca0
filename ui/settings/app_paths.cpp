#include "ui/settings/app_paths.h"

#include <QCoreApplication>
#include <QDir>
#include <QStandardPaths>

namespace tandem::ui::paths {
namespace {

const QString kAppFolder = QStringLiteral("tandem");

}  // namespace

// GenericDataLocation/GenericConfigLocation, not AppDataLocation: the latter is named after the
// running executable, which would give every test and helper process a folder of its own.
QString dataDir() {
    return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + QLatin1Char('/') + kAppFolder;
}

QString databaseFile() { return dataDir() + QStringLiteral("/conversations.sqlite"); }

QString modelsDir() { return dataDir() + QStringLiteral("/models"); }

QString settingsFile() {
    return QStandardPaths::writableLocation(QStandardPaths::GenericConfigLocation) + QLatin1Char('/') + kAppFolder +
           QStringLiteral("/tandem.ini");
}

std::unique_ptr<QSettings> userSettings() {
    return std::make_unique<QSettings>(settingsFile(), QSettings::IniFormat);
}

QString defaultModelName() { return QStringLiteral(TANDEM_DEFAULT_MODEL_NAME); }

QString shippedModelDir() {
    return QDir::cleanPath(QCoreApplication::applicationDirPath() + QStringLiteral("/../share/tandem/models/") +
                           defaultModelName());
}

bool sameFolder(const QString& a, const QString& b) {
    if (a.isEmpty() || b.isEmpty()) return false;
    const QString ca = QDir(a).canonicalPath();
    const QString cb = QDir(b).canonicalPath();
    return ca.isEmpty() || cb.isEmpty() ? QDir::cleanPath(a) == QDir::cleanPath(b) : ca == cb;
}

}  // namespace tandem::ui::paths
