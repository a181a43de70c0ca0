#pragma once
// The models the wizard offers by name, read from resources/models/curated_models.json (compiled in):
// each with the fields of its config.json that Tandem reads, so its sizes are known before download.
#include <QList>
#include <QString>

namespace tandem::ui {

struct CuratedModel {
    QString repo;     // "deepseek-ai/DeepSeek-V3"
    QString name;     // "DeepSeek-V3"
    QString summary;  // one line for the list
    QString configJson;
};

QList<CuratedModel> curatedModels();

}  // namespace tandem::ui
