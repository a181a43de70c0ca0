#include "ui/wizard/model_catalog.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

// A resource compiled into a static library is only registered when something refers to it.
static void registerWizardResources() { Q_INIT_RESOURCE(wizard); }

namespace tandem::ui {

QList<CuratedModel> curatedModels() {
    registerWizardResources();
    QFile file(QStringLiteral(":/models/curated_models.json"));
    if (!file.open(QIODevice::ReadOnly)) return {};
    QList<CuratedModel> models;
    for (const QJsonValue& v : QJsonDocument::fromJson(file.readAll()).object()[QStringLiteral("models")].toArray()) {
        const QJsonObject o = v.toObject();
        models.append({o["repo"].toString(), o["name"].toString(), o["summary"].toString(),
                       QString::fromUtf8(QJsonDocument(o["config"].toObject()).toJson(QJsonDocument::Compact))});
    }
    return models;
}

}  // namespace tandem::ui
