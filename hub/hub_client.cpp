// The listing half of the Hub client, and the helpers the CLI and the wizard call before a download.
#include "hub/hub_client.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QRegularExpression>
#include <QStorageInfo>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <optional>

#include "hub/download_files.h"
#include "hub/hub_http.h"

namespace tandem::hub {

using namespace detail;

namespace {

// A byte count of the listing: a whole number from 0 to kMaxListedBytes. Anything else (negative,
// fractional, huge, not a number at all) is nullopt, where a cast to qint64 would make nonsense of it.
std::optional<qint64> listedByteCount(const QJsonValue& value) {
    if (!value.isDouble()) return std::nullopt;
    const double bytes = value.toDouble();
    if (!(bytes >= 0 && bytes <= static_cast<double>(kMaxListedBytes)) || bytes != std::floor(bytes))
        return std::nullopt;
    return static_cast<qint64>(bytes);
}

// VALUE as the listing wrote it, for a message.
QString jsonText(const QJsonValue& value) {
    if (value.isUndefined()) return QStringLiteral("missing");
    const QByteArray text = QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact);
    return QString::fromUtf8(text.mid(1, text.size() - 2));
}

}  // namespace

QString normalizedEndpoint(QString text) {
    text = text.trimmed();
    if (!text.isEmpty() && !text.contains(QStringLiteral("://"))) text.prepend(QStringLiteral("https://"));
    while (text.endsWith('/')) text.chop(1);
    return text;
}

HubSettings resolvedSettings(HubSettings settings) {
    const QString ambientEndpoint = normalizedEndpoint(qEnvironmentVariable("HF_ENDPOINT"));
    settings.endpoint = normalizedEndpoint(settings.endpoint);
    if (settings.endpoint.isEmpty()) settings.endpoint = ambientEndpoint;
    if (settings.endpoint.isEmpty()) settings.endpoint = QStringLiteral("https://huggingface.co");
    // The token of the environment or of huggingface-cli is for the Hub, or the mirror HF_ENDPOINT
    // names; not for whatever address was typed into the settings.
    const QUrl endpoint(settings.endpoint);
    const bool theHub = endpoint.scheme() == QLatin1String("https") &&
                        endpoint.host().compare(QLatin1String("huggingface.co"), Qt::CaseInsensitive) == 0;
    if (settings.token.isEmpty() && (theHub || settings.endpoint == ambientEndpoint)) {
        settings.token = qEnvironmentVariable("HF_TOKEN");
        if (settings.token.isEmpty()) {
            const QString home = qEnvironmentVariable("HF_HOME", QDir::homePath() + "/.cache/huggingface");
            QFile file(home + "/token");
            if (file.open(QIODevice::ReadOnly)) settings.token = QString::fromUtf8(file.readAll()).trimmed();
        }
    }
    if (!mayCarryToken(endpoint)) settings.token.clear();  // never in clear text over a network
    settings.parallelFiles = std::max(1, settings.parallelFiles);
    settings.maxRetries = std::max(0, settings.maxRetries);
    return settings;
}

bool matchesGlob(const QString& path, const QString& glob) {
    // fnmatch as Python's fnmatch (which huggingface_hub's allow_patterns use): iterative, with the
    // last '*' as the one backtracking point.
    qsizetype p = 0, g = 0, starG = -1, starP = 0;
    auto classMatches = [&](qsizetype& at, QChar c) {  // at: the '['; on return, past the ']'
        qsizetype i = at + 1;
        const bool negate = i < glob.size() && glob[i] == '!';
        if (negate) ++i;
        bool found = false;
        const qsizetype first = i;
        for (; i < glob.size() && (glob[i] != ']' || i == first); ++i) {
            if (i + 2 < glob.size() && glob[i + 1] == '-' && glob[i + 2] != ']') {
                found = found || (glob[i] <= c && c <= glob[i + 2]);
                i += 2;
            } else {
                found = found || glob[i] == c;
            }
        }
        if (i >= glob.size()) return std::optional<bool>();  // no ']': '[' is an ordinary character
        at = i + 1;
        return std::optional<bool>(found != negate);
    };
    while (p < path.size()) {
        if (g < glob.size() && glob[g] == '*') {
            starG = g++;
            starP = p;
            continue;
        }
        if (g < glob.size()) {
            if (glob[g] == '[') {
                qsizetype next = g;
                if (const auto m = classMatches(next, path[p]); m) {
                    if (*m) {
                        g = next;
                        ++p;
                        continue;
                    }
                } else if (path[p] == '[') {
                    ++g;
                    ++p;
                    continue;
                }
            } else if (glob[g] == '?' || glob[g] == path[p]) {
                ++g;
                ++p;
                continue;
            }
        }
        if (starG < 0) return false;
        g = starG + 1;
        p = ++starP;
    }
    while (g < glob.size() && glob[g] == '*') ++g;
    return g == glob.size();
}

QList<RepoFile> filterFiles(const QList<RepoFile>& files, const QStringList& globs) {
    if (globs.isEmpty()) return files;
    QList<RepoFile> kept;
    for (const RepoFile& f : files)
        if (std::any_of(globs.begin(), globs.end(), [&](const QString& g) { return matchesGlob(f.path, g); }))
            kept.append(f);
    return kept;
}

qint64 remainingDownloadBytes(const QList<RepoFile>& files, const QString& outDir) {
    qint64 left = 0;
    for (const RepoFile& f : files) {
        if (isReservedPath(f.path)) continue;  // a download skips it
        if (QFileInfo(outDir + "/" + f.path).size() == f.size && QFileInfo(outDir + "/" + f.path).isFile()) continue;
        left += f.size - std::min(f.size, QFileInfo(partialPath(outDir, f)).size());
    }
    return left;
}

DiskSpaceCheck checkDiskSpace(const QString& dir, qint64 neededBytes) {
    DiskSpaceCheck check;
    check.neededBytes = neededBytes;
    QString existing = QFileInfo(dir).absoluteFilePath();
    while (!QFileInfo(existing).isDir() && QFileInfo(existing).absolutePath() != existing)
        existing = QFileInfo(existing).absolutePath();
    QStorageInfo storage(existing);
    storage.refresh();
    if (!storage.isValid() || !storage.isReady()) {
        // Unknown free space is no reason to refuse; a full disk still fails the write with a message.
        check.enough = true;
        check.availableBytes = -1;
        return check;
    }
    check.availableBytes = storage.bytesAvailable();
    check.enough = check.availableBytes >= neededBytes;
    if (!check.enough)
        check.message = QStringLiteral("Not enough disk space for %1: it needs %2, and %3 (%4) has %5 free. Free %6 "
                                       "or choose a folder on another disk.")
                            .arg(QDir::toNativeSeparators(dir), humanBytes(neededBytes),
                                 QDir::toNativeSeparators(storage.rootPath()), storage.device().constData(),
                                 humanBytes(check.availableBytes), humanBytes(neededBytes - check.availableBytes));
    return check;
}

HubClient::HubClient(HubSettings settings, QObject* parent)
    : QObject(parent), settings_(resolvedSettings(std::move(settings))), network_(new QNetworkAccessManager(this)) {}

void HubClient::listFiles(const QString& repo, const QString& revision) {
    static const QRegularExpression repoId(QStringLiteral("^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$"));
    repo_ = repo.trimmed();
    files_.clear();
    listedBytes_ = 0;
    attempt_ = 0;
    ++generation_;  // answers to an earlier listing are ignored from now on
    if (!repoId.match(repo_).hasMatch() || repo_.contains("..")) {
        const QString message = QStringLiteral("'%1' is not a repository id: write it as owner/name, as in the model "
                                               "page's address, e.g. Qwen/Qwen3-30B-A3B.").arg(repo);
        QTimer::singleShot(0, this, [this, message] { emit failed(message); });
        return;
    }
    if (const QString problem = endpointProblem(settings_.endpoint); !problem.isEmpty()) {
        QTimer::singleShot(0, this, [this, problem] { emit failed(problem); });
        return;
    }
    revision_ = revision.isEmpty() ? QStringLiteral("main") : revision;
    requestPage(treeUrl(settings_.endpoint, repo_, revision_));
}

void HubClient::requestPage(const QUrl& url) {
    QNetworkRequest request = makeRequest(url, settings_.token);
    // Listing redirects (a renamed repository) stay on the Hub; Qt follows those with the token.
    request.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::SameOriginRedirectPolicy);
    // Someone waits for a listing: without a network it says so within seconds, not minutes.
    request.setTransferTimeout(listingTimeoutMs(settings_));
    QNetworkReply* reply = network_->get(request);
    connect(reply, &QNetworkReply::finished, this, [this, reply, generation = generation_] {
        if (generation == generation_) pageArrived(reply);
        else reply->deleteLater();
    });
}

void HubClient::pageArrived(QNetworkReply* reply) {
    reply->deleteLater();
    const int status = httpStatus(reply);
    if (reply->error() != QNetworkReply::NoError || status != 200) {
        // A Hub that answers with an error is tried again as a download is; one that cannot be reached
        // at all (offline, say), once.
        const int retries = isUnreachable(reply->error(), status) ? std::min(settings_.maxRetries, 1) : settings_.maxRetries;
        if (worthRetrying(reply->error(), status) && attempt_ < retries) {
            ++attempt_;
            QTimer::singleShot(backoffMs(settings_, attempt_), this, [this, url = reply->request().url(), g = generation_] {
                if (g == generation_) requestPage(url);
            });
            return;
        }
        emit failed(failureMessage(reply, repo_, revision_, {}, !settings_.token.isEmpty()));
        return;
    }
    attempt_ = 0;
    QJsonParseError error{};
    const QJsonDocument doc = QJsonDocument::fromJson(reply->readAll(), &error);
    if (error.error != QJsonParseError::NoError || !doc.isArray()) {
        emit failed(QStringLiteral("The Hub's file list for %1 is not the JSON it should be (%2). Check the endpoint "
                                   "setting (HF_ENDPOINT) points at a Hugging Face Hub or a mirror of it.")
                        .arg(repo_, error.error != QJsonParseError::NoError ? error.errorString() : "not an array"));
        return;
    }
    for (const QJsonValue& value : doc.array()) {
        const QJsonObject entry = value.toObject();
        if (entry.value("type").toString() != "file") continue;
        RepoFile file;
        file.path = entry.value("path").toString();
        const QJsonObject lfs = entry.value("lfs").toObject();
        if (!isSafeRelativePath(file.path)) {
            emit failed(QStringLiteral("The Hub listed a file of %1 with a name that would land outside the download "
                                       "folder ('%2'); nothing was downloaded.").arg(repo_, file.path));
            return;
        }
        // An LFS file's size is its lfs.size; the entry's own size has to be a byte count all the same.
        const std::optional<qint64> size = listedByteCount(entry.value("size"));
        const bool lfsSized = lfs.contains("size");
        const std::optional<qint64> lfsSize = listedByteCount(lfs.value("size"));
        if (!size || (lfsSized && !lfsSize)) {
            const bool entrySize = !size;
            emit failed(QStringLiteral("The Hub listed %1's file '%2' with %3 %4, which is no number of bytes (a whole "
                                       "number from 0 to %5); nothing was downloaded. Check the endpoint setting "
                                       "(HF_ENDPOINT) points at huggingface.co or a mirror you trust.")
                            .arg(repo_, file.path, entrySize ? QStringLiteral("size") : QStringLiteral("lfs.size"),
                                 jsonText(entrySize ? entry.value("size") : lfs.value("size")),
                                 humanBytes(kMaxListedBytes)));
            return;
        }
        file.size = lfsSized ? *lfsSize : *size;
        if (!lfs.isEmpty()) file.sha256 = lfs.value("oid").toString().toLower();
        else file.gitOid = entry.value("oid").toString().toLower();
        // The check values name the partial files, so a malformed one could put them anywhere.
        static const QRegularExpression sha256(QStringLiteral("^[0-9a-f]{64}$"));
        static const QRegularExpression gitOid(QStringLiteral("^[0-9a-f]{40}$"));
        if ((!lfs.isEmpty() && !sha256.match(file.sha256).hasMatch()) ||
            (lfs.isEmpty() && !file.gitOid.isEmpty() && !gitOid.match(file.gitOid).hasMatch())) {
            emit failed(QStringLiteral("The Hub listed %1's file '%2' with a malformed check value ('%3'); nothing was "
                                       "downloaded. Check the endpoint setting (HF_ENDPOINT) points at "
                                       "huggingface.co or a mirror you trust.")
                            .arg(repo_, file.path, lfs.isEmpty() ? file.gitOid : file.sha256));
            return;
        }
        listedBytes_ += file.size;  // each at most kMaxListedBytes, so the sum stays far from overflowing
        if (listedBytes_ > kMaxListedBytes) {
            emit failed(QStringLiteral("The Hub listed more than %1 of files for %2, more than any repository holds; "
                                       "nothing was downloaded. Check the endpoint setting (HF_ENDPOINT) points at "
                                       "huggingface.co or a mirror you trust.").arg(humanBytes(kMaxListedBytes), repo_));
            return;
        }
        files_.append(file);
    }
    // More than one page: the Link header names the next one, as GitHub-style pagination does.
    static const QRegularExpression next(QStringLiteral("<([^>]+)>\\s*;\\s*rel=\"next\""));
    const auto link = next.match(QString::fromUtf8(reply->rawHeader("Link")));
    if (link.hasMatch()) {
        // The next page carries the token, so it has to come from where the first one did.
        const QUrl nextPage = reply->request().url().resolved(QUrl(link.captured(1)));
        if (!sameOrigin(treeUrl(settings_.endpoint, repo_, revision_), nextPage)) {
            emit failed(QStringLiteral("The Hub's file list for %1 continues at another site (%2); it was not followed, "
                                       "so that the access token stays with %3. Check the endpoint setting "
                                       "(HF_ENDPOINT) points at huggingface.co or a mirror you trust.")
                            .arg(repo_, nextPage.adjusted(QUrl::RemovePath | QUrl::RemoveQuery).toString(),
                                 settings_.endpoint));
            return;
        }
        requestPage(nextPage);
        return;
    }
    emit filesListed(files_);
}

}  // namespace tandem::hub
