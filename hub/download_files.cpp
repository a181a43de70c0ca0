#include "hub/download_files.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSaveFile>

#include <vector>

#include "hub/hub_http.h"

namespace tandem::hub::detail {

namespace {

QString checkValue(const RepoFile& file) {
    if (!file.sha256.isEmpty()) return file.sha256;
    if (!file.gitOid.isEmpty()) return file.gitOid;
    return QStringLiteral("size%1").arg(file.size);
}

QString recordPath(const QString& outDir) { return stagingDir(outDir) + "/verified.json"; }

QJsonObject readRecord(const QString& outDir) {
    QFile f(recordPath(outDir));
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

}  // namespace

QString stagingDir(const QString& outDir) { return outDir + "/" + kStagingFolder; }

bool isReservedPath(const QString& path) {
    return path.section('/', 0, 0).compare(QLatin1String(kStagingFolder), Qt::CaseInsensitive) == 0;
}

QString partialPath(const QString& outDir, const RepoFile& file) {
    return stagingDir(outDir) + "/" + file.path + "." + checkValue(file) + ".part";
}

void clearStaging(const QString& outDir, const QList<RepoFile>& files) {
    VerifiedRecord(outDir).remove(files);
    const QString staging = QDir(stagingDir(outDir)).absolutePath();
    for (const RepoFile& f : files) {
        const QString partial = partialPath(outDir, f);
        QFile::remove(partial);
        QDir dir = QFileInfo(partial).absoluteDir();
        while (dir.absolutePath().startsWith(staging + "/") && dir.isEmpty() && dir.rmdir(dir.absolutePath()) &&
               dir.cdUp()) {
        }
    }
    QDir(staging).rmdir(staging);  // only when empty
}

QString unsafeFileProblem(const QString& outDir, const RepoFile& file) {
    static const QRegularExpression sha256(QStringLiteral("^[0-9a-f]{64}$"));
    static const QRegularExpression gitOid(QStringLiteral("^[0-9a-f]{40}$"));
    if (!isSafeRelativePath(file.path))
        return QStringLiteral("'%1' is not a safe file name inside the download folder").arg(file.path);
    if (file.size < 0 || file.size > kMaxListedBytes)
        return QStringLiteral("the size of '%1' is %2 bytes, which no file has (0 to %3)")
            .arg(file.path, QString::number(file.size), humanBytes(kMaxListedBytes));
    if (!file.sha256.isEmpty() && !sha256.match(file.sha256).hasMatch())
        return QStringLiteral("the sha256 of '%1' is not 64 hex digits ('%2')").arg(file.path, file.sha256);
    if (!file.gitOid.isEmpty() && !gitOid.match(file.gitOid).hasMatch())
        return QStringLiteral("the git blob id of '%1' is not 40 hex digits ('%2')").arg(file.path, file.gitOid);
    const QString staging = QDir::cleanPath(QDir(stagingDir(outDir)).absolutePath());
    if (!QDir::cleanPath(QDir(outDir).absoluteFilePath(partialPath(outDir, file))).startsWith(staging + "/"))
        return QStringLiteral("the partial file of '%1' would land outside %2").arg(file.path, staging);
    return {};
}

bool isSafeRelativePath(const QString& path) {
    if (path.isEmpty() || path.startsWith('/') || path.contains('\\') || path.contains(QChar(0))) return false;
    for (const QString& part : path.split('/'))
        if (part.isEmpty() || part == "." || part == "..") return false;
    return true;
}

ContentCheck::ContentCheck(const RepoFile& file) {
    if (!file.sha256.isEmpty()) {
        hash_ = std::make_unique<QCryptographicHash>(QCryptographicHash::Sha256);
        expected_ = file.sha256.toLower();
        kind_ = QStringLiteral("sha256");
    } else if (!file.gitOid.isEmpty()) {
        hash_ = std::make_unique<QCryptographicHash>(QCryptographicHash::Sha1);
        hash_->addData("blob " + QByteArray::number(file.size) + QByteArray(1, '\0'));
        expected_ = file.gitOid.toLower();
        kind_ = QStringLiteral("git blob id");
    }
}

void ContentCheck::add(const char* data, qint64 size) {
    if (hash_) hash_->addData(QByteArrayView(data, size));
}

QString ContentCheck::result() const { return hash_ ? QString::fromLatin1(hash_->result().toHex()) : QString(); }

bool addFileTo(ContentCheck& check, const QString& path, qint64 bytes, const std::atomic<bool>* stop) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return false;
    std::vector<char> buffer(8 << 20);
    qint64 left = bytes;
    while (left > 0) {
        if (stop && stop->load()) return false;
        const qint64 n = f.read(buffer.data(), std::min<qint64>(left, static_cast<qint64>(buffer.size())));
        if (n <= 0) return false;
        check.add(buffer.data(), n);
        left -= n;
    }
    return true;
}

VerifiedRecord::VerifiedRecord(QString outDir) : outDir_(std::move(outDir)) {}

bool VerifiedRecord::contains(const RepoFile& file) const {
    const QJsonObject entry = readRecord(outDir_).value(file.path).toObject();
    const QFileInfo info(outDir_ + "/" + file.path);
    return !entry.isEmpty() && info.isFile() && entry.value("check").toString() == checkValue(file) &&
           static_cast<qint64>(entry.value("size").toDouble()) == file.size && info.size() == file.size &&
           static_cast<qint64>(entry.value("mtime_ms").toDouble()) == info.lastModified().toMSecsSinceEpoch();
}

bool VerifiedRecord::add(const RepoFile& file) {
    QJsonObject record = readRecord(outDir_);
    const QFileInfo info(outDir_ + "/" + file.path);
    record.insert(file.path, QJsonObject{{"check", checkValue(file)},
                                         {"size", static_cast<double>(file.size)},
                                         {"mtime_ms", static_cast<double>(info.lastModified().toMSecsSinceEpoch())}});
    QSaveFile out(recordPath(outDir_));
    if (!QDir().mkpath(stagingDir(outDir_)) || !out.open(QIODevice::WriteOnly)) return false;
    out.write(QJsonDocument(record).toJson(QJsonDocument::Compact));
    return out.commit();
}

void VerifiedRecord::remove(const QList<RepoFile>& files) {
    QJsonObject record = readRecord(outDir_);
    if (record.isEmpty()) return;
    for (const RepoFile& f : files) record.remove(f.path);
    if (record.isEmpty()) {
        QFile::remove(recordPath(outDir_));
        return;
    }
    QSaveFile out(recordPath(outDir_));
    if (out.open(QIODevice::WriteOnly)) {
        out.write(QJsonDocument(record).toJson(QJsonDocument::Compact));
        out.commit();
    }
}

}  // namespace tandem::hub::detail
