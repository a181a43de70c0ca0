#include "ui/wizard/model_downloader.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace tandem::ui {

QList<hub::RepoFile> modelFilesToDownload(const QList<hub::RepoFile>& files) {
    QList<hub::RepoFile> wanted;
    for (const hub::RepoFile& f : files) {
        if (f.path.contains(QLatin1Char('/'))) continue;  // original/, onnx/, ... hold other formats
        const QString name = f.path.toLower();
        // tiktoken.model: Kimi-K2's tokenizer, which ships no tokenizer.json (its Python code is not needed).
        if (name.endsWith(QLatin1String(".safetensors")) || name.endsWith(QLatin1String(".json")) ||
            name.endsWith(QLatin1String(".jinja")) || name == QLatin1String("tiktoken.model"))
            wanted.append(f);
    }
    return wanted;
}

QList<hub::RepoFile> filesMissingFrom(const QList<hub::RepoFile>& files, const QString& dir) {
    QList<hub::RepoFile> missing;
    for (const hub::RepoFile& f : files) {
        const QFileInfo info(QDir(dir).filePath(f.path));
        if (!info.isFile() || info.size() != f.size) missing.append(f);
    }
    return missing;
}

qint64 totalSize(const QList<hub::RepoFile>& files) {
    qint64 total = 0;
    for (const hub::RepoFile& f : files) total += f.size;
    return total;
}

QString filesToJson(const QList<hub::RepoFile>& files) {
    QJsonArray array;
    for (const hub::RepoFile& f : files)
        // Every check value the listing gave, so a resumed download checks small files too and finds
        // its partial files under the same names.
        array.append(QJsonObject{{"path", f.path}, {"size", static_cast<double>(f.size)}, {"sha256", f.sha256},
                                 {"gitOid", f.gitOid}});
    return QString::fromUtf8(QJsonDocument(array).toJson(QJsonDocument::Compact));
}

QList<hub::RepoFile> filesFromJson(const QString& json) {
    QList<hub::RepoFile> files;
    for (const QJsonValue& v : QJsonDocument::fromJson(json.toUtf8()).array()) {
        const QJsonObject o = v.toObject();
        files.append({o["path"].toString(), static_cast<qint64>(o["size"].toDouble()), o["sha256"].toString(),
                      o["gitOid"].toString()});
    }
    return files;
}

}  // namespace tandem::ui
