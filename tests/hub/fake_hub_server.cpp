#include "fake_hub_server.h"

#include <QCryptographicHash>
#include <QDirIterator>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QMutex>
#include <QRegularExpression>
#include <QTcpServer>
#include <QTcpSocket>
#include <QThread>
#include <QTimer>
#include <QUrl>
#include <QUrlQuery>

#include <optional>

namespace tandem::test {

namespace {

struct ServedFile {
    QByteArray data;
    qint64 size = 0;
    bool lfs = false;
    bool served = true;  // false: listed only
    QString sha256;
    QString gitOid;  // of the content, or of the LFS pointer file for LFS files (as the Hub lists it)
};

struct Repo {
    RepoAccess access = RepoAccess::Public;
    QString token;
    QMap<QString, QMap<QString, ServedFile>> revisions;  // revision -> path -> file
    QMap<QString, QList<QJsonObject>> extraEntries;       // revision -> listed as they are
};

struct FaultQueue {
    QList<HubFault> faults;
    bool repeatLast = false;
};

using Header = std::pair<QByteArray, QByteArray>;

struct Request {
    QString method;
    QString target;
    QMap<QByteArray, QByteArray> headers;  // lower-case names
};

QString gitBlobId(const QByteArray& content) {
    QCryptographicHash h(QCryptographicHash::Sha1);
    h.addData("blob " + QByteArray::number(content.size()) + QByteArray(1, '\0'));
    h.addData(content);
    return QString::fromLatin1(h.result().toHex());
}

ServedFile makeFile(const QByteArray& data, bool lfs) {
    ServedFile f;
    f.data = data;
    f.size = data.size();
    f.lfs = lfs;
    f.sha256 = QString::fromLatin1(QCryptographicHash::hash(data, QCryptographicHash::Sha256).toHex());
    const QByteArray pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + f.sha256.toLatin1() +
                               "\nsize " + QByteArray::number(f.size) + "\n";
    f.gitOid = gitBlobId(lfs ? pointer : data);
    return f;
}

bool isErrorFault(HubFault f) {
    return f == HubFault::NotFound || f == HubFault::Unauthorized || f == HubFault::Forbidden ||
           f == HubFault::ServerError;
}

}  // namespace

struct FakeHubServer::Shared {
    mutable QMutex mutex;
    QMap<QString, Repo> repos;
    QMap<QString, FaultQueue> faults;  // "repo\npath"
    QList<HubRequest> log;
    int slowChunk = 16 * 1024;
    int slowDelayMs = 20;
    int pageSize = 1000;
    QString nextPageHost = QStringLiteral("127.0.0.1");
    quint16 hubPort = 0;
    quint16 cdnPort = 0;
    QThread thread;
    Core* core = nullptr;

    // The fault for the next request of REPO's PATH at the step that asks (error faults at the resolve
    // URL, body faults where the body is sent); consumed when taken.
    std::optional<HubFault> takeFault(const QString& repo, const QString& path, bool errorStep) {
        QMutexLocker lock(&mutex);
        auto it = faults.find(repo + "\n" + path);
        if (it == faults.end() || it->faults.isEmpty()) return std::nullopt;
        const HubFault f = it->faults.front();
        if (isErrorFault(f) != errorStep) return std::nullopt;
        if (it->faults.size() > 1 || !it->repeatLast) it->faults.pop_front();
        return f;
    }
};

class FakeHubServer::Core : public QObject {
public:
    explicit Core(Shared* shared) : shared_(shared), hub_(this), cdn_(this) {}

    // On the server's thread, so the listening sockets belong to it.
    void listen() {
        for (QTcpServer* server : {&hub_, &cdn_}) {
            server->listen(QHostAddress::LocalHost, 0);
            connect(server, &QTcpServer::newConnection, this, [this, server] {
                while (QTcpSocket* socket = server->nextPendingConnection()) accept(socket, server == &cdn_);
            });
        }
        shared_->hubPort = hub_.serverPort();
        shared_->cdnPort = cdn_.serverPort();
    }

private:
    void accept(QTcpSocket* socket, bool cdn) {
        socket->setParent(this);
        connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
        auto buffer = std::make_shared<QByteArray>();
        connect(socket, &QTcpSocket::readyRead, this, [this, socket, cdn, buffer] {
            buffer->append(socket->readAll());
            const qsizetype end = buffer->indexOf("\r\n\r\n");
            if (end < 0) return;
            const QList<QByteArray> lines = buffer->left(end).split('\n');
            buffer->clear();
            socket->disconnect(this);  // one request per connection: every answer says Connection: close
            Request request;
            const QList<QByteArray> first = lines.value(0).trimmed().split(' ');
            request.method = QString::fromLatin1(first.value(0));
            request.target = QString::fromLatin1(first.value(1));
            for (qsizetype i = 1; i < lines.size(); ++i) {
                const qsizetype colon = lines[i].indexOf(':');
                if (colon > 0) request.headers.insert(lines[i].left(colon).trimmed().toLower(), lines[i].mid(colon + 1).trimmed());
            }
            {
                QMutexLocker lock(&shared_->mutex);
                shared_->log.append({request.method, request.target, request.headers.value("range"),
                                     request.headers.value("authorization"), cdn});
            }
            if (cdn) serveCdn(socket, request);
            else serveHub(socket, request);
        });
    }

    static QByteArray statusLine(int status) {
        static const QMap<int, QByteArray> reasons{{200, "OK"}, {206, "Partial Content"}, {302, "Found"},
                                                   {401, "Unauthorized"}, {403, "Forbidden"}, {404, "Not Found"},
                                                   {416, "Range Not Satisfiable"}, {500, "Internal Server Error"}};
        return "HTTP/1.1 " + QByteArray::number(status) + " " + reasons.value(status, "Status") + "\r\n";
    }

    static void send(QTcpSocket* socket, int status, const QList<Header>& headers,
                     const QByteArray& body, bool head = false, qint64 contentLength = -1) {
        QByteArray out = statusLine(status);
        for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
        out += "Content-Length: " + QByteArray::number(contentLength >= 0 ? contentLength : body.size()) + "\r\n";
        out += "Connection: close\r\n\r\n";
        if (!head) out += body;
        socket->write(out);
        socket->disconnectFromHost();
    }

    static void sendError(QTcpSocket* socket, int status, const QByteArray& code, const QString& message) {
        QList<Header> headers{{"Content-Type", "application/json"}};
        if (!code.isEmpty()) headers.append(Header{"X-Error-Code", code});
        headers.append(Header{"X-Error-Message", message.toUtf8()});
        send(socket, status, headers, QJsonDocument(QJsonObject{{"error", message}}).toJson(QJsonDocument::Compact));
    }

    // Whether REQUEST may see REPO; answers for it when not.
    bool allowed(QTcpSocket* socket, const Request& request, const QString& name, const Repo& repo) {
        const QByteArray auth = request.headers.value("authorization");
        const QByteArray granted = "Bearer " + repo.token.toUtf8();
        if (repo.access == RepoAccess::Public || auth == granted) return true;
        if (repo.access == RepoAccess::Private) {
            sendError(socket, 401, "RepoNotFound", "Repository Not Found for url: " + request.target);
        } else if (auth.isEmpty()) {
            sendError(socket, 401, "GatedRepo", "Access to model " + name + " is restricted. You must have access to it "
                                                "and be authenticated to access it. Please log in.");
        } else {
            sendError(socket, 403, "GatedRepo", "Access to model " + name + " is restricted and you are not in the "
                                                "authorized list. Visit https://huggingface.co/" + name + " to ask for access.");
        }
        return false;
    }

    // Splits "/{repo}/{KEYWORD}/{revision}/{rest}" where the repo has one or two parts.
    static bool splitRepoPath(const QString& path, const QString& keyword, QString& repo, QString& revision, QString& rest) {
        const QStringList parts = path.split('/', Qt::SkipEmptyParts);
        for (int repoParts : {2, 1}) {
            if (parts.size() < repoParts + 2 || parts[repoParts] != keyword) continue;
            repo = QUrl::fromPercentEncoding(parts.mid(0, repoParts).join('/').toLatin1());
            revision = QUrl::fromPercentEncoding(parts[repoParts + 1].toLatin1());
            QStringList tail = parts.mid(repoParts + 2);
            for (QString& t : tail) t = QUrl::fromPercentEncoding(t.toLatin1());
            rest = tail.join('/');
            return true;
        }
        return false;
    }

    void serveHub(QTcpSocket* socket, const Request& request) {
        const QUrl url(request.target);
        QString repoName, revision, rest;
        const QString path = url.path(QUrl::FullyEncoded);  // a revision's %2F must not split it
        if (path.startsWith("/api/models/")) {
            if (!splitRepoPath(path.mid(QStringLiteral("/api/models").size()), "tree", repoName, revision, rest))
                return sendError(socket, 404, {}, "Not Found");
            return serveTree(socket, request, repoName, revision, QUrlQuery(url).queryItemValue("cursor").toInt());
        }
        if (!splitRepoPath(path, "resolve", repoName, revision, rest)) return sendError(socket, 404, {}, "Not Found");
        Repo repo;
        {
            QMutexLocker lock(&shared_->mutex);
            if (!shared_->repos.contains(repoName))
                return sendError(socket, 401, "RepoNotFound", "Repository Not Found for url: " + request.target);
            repo = shared_->repos.value(repoName);
        }
        if (!allowed(socket, request, repoName, repo)) return;
        if (const auto fault = shared_->takeFault(repoName, rest, true)) {
            switch (*fault) {
            case HubFault::NotFound: return sendError(socket, 404, "EntryNotFound", rest + " does not exist on \"" + revision + "\"");
            case HubFault::Unauthorized: return sendError(socket, 401, {}, "Invalid credentials in Authorization header");
            case HubFault::Forbidden: return sendError(socket, 403, "GatedRepo", "Access to model " + repoName + " is restricted.");
            default: return sendError(socket, 500, {}, "Internal Error - We're working hard to fix this as soon as possible!");
            }
        }
        if (!repo.revisions.contains(revision))
            return sendError(socket, 404, "RevisionNotFound", "Invalid rev id: " + revision);
        const ServedFile file = repo.revisions[revision].value(rest);
        if (!repo.revisions[revision].contains(rest) || !file.served)
            return sendError(socket, 404, "EntryNotFound", rest + " does not exist on \"" + revision + "\"");
        const QByteArray commit = QCryptographicHash::hash((repoName + "@" + revision).toUtf8(), QCryptographicHash::Sha1).toHex();
        if (file.lfs) {
            QUrl cdn(QStringLiteral("http://127.0.0.1:%1/lfs/%2").arg(shared_->cdnPort).arg(file.sha256));
            cdn.setQuery(QUrlQuery{{"repo", repoName}, {"path", rest}, {"X-Amz-Signature", "fake"}});
            return send(socket, 302,
                        {{"Location", cdn.toEncoded()},
                         {"X-Linked-Size", QByteArray::number(file.size)},
                         {"X-Linked-Etag", "\"" + file.sha256.toLatin1() + "\""},
                         {"ETag", "\"" + file.gitOid.toLatin1() + "\""},
                         {"X-Repo-Commit", commit}},
                        {});
        }
        serveBody(socket, request, repoName, rest, file, {{"ETag", "\"" + file.gitOid.toLatin1() + "\""}, {"X-Repo-Commit", commit}});
    }

    void serveCdn(QTcpSocket* socket, const Request& request) {
        const QUrl url(request.target);
        const QUrlQuery query(url);
        const QString repoName = query.queryItemValue("repo", QUrl::FullyDecoded);
        const QString path = query.queryItemValue("path", QUrl::FullyDecoded);
        const QString sha = url.path().section('/', -1);
        ServedFile file;
        {
            QMutexLocker lock(&shared_->mutex);
            for (const auto& files : shared_->repos.value(repoName).revisions)
                if (files.contains(path) && files[path].sha256 == sha) file = files[path];
        }
        if (file.sha256.isEmpty()) return sendError(socket, 404, {}, "NoSuchKey");
        serveBody(socket, request, repoName, path, file, {{"ETag", "\"" + file.sha256.toLatin1() + "\""}});
    }

    void serveBody(QTcpSocket* socket, const Request& request, const QString& repo, const QString& path,
                   const ServedFile& file, QList<Header> headers) {
        const bool head = request.method == "HEAD";
        const std::optional<HubFault> taken = head ? std::nullopt : shared_->takeFault(repo, path, false);
        const HubFault none = HubFault::NotFound;  // never a body fault: stands for "no fault" below
        const HubFault fault = taken.value_or(none);
        static const QRegularExpression rangeSyntax(QStringLiteral("^bytes=(\\d+)-(\\d*)$"));
        const auto range = rangeSyntax.match(QString::fromLatin1(request.headers.value("range")));
        qint64 first = 0, last = file.size - 1;
        int status = 200;
        if (range.hasMatch() && fault != HubFault::IgnoreRange) {
            first = range.captured(1).toLongLong();
            if (!range.captured(2).isEmpty()) last = std::min(last, range.captured(2).toLongLong());
            if (first >= file.size) {
                headers.append(Header{"Content-Range", "bytes */" + QByteArray::number(file.size)});
                return send(socket, 416, headers, {});
            }
            if (fault == HubFault::WrongRange) first /= 2;
            status = 206;
            headers.append(Header{"Content-Range", "bytes " + QByteArray::number(first) + "-" + QByteArray::number(last) + "/" +
                                                 QByteArray::number(file.size)});
        }
        headers.append(Header{"Accept-Ranges", "bytes"});
        headers.append(Header{"Content-Type", "application/octet-stream"});
        QByteArray body = file.data.mid(first, last - first + 1);
        if (fault == HubFault::CorruptByte && !body.isEmpty()) {
            const qint64 middle = file.size / 2;
            const qint64 at = middle >= first && middle <= last ? middle - first : 0;
            body[at] = static_cast<char>(body[at] ^ 0x5a);
        }
        if (fault == HubFault::LongContentLength) return send(socket, status, headers, body, head, body.size() + 1000);
        if (head || (fault != HubFault::DropMidFile && fault != HubFault::ShortBody && fault != HubFault::Stall &&
                     fault != HubFault::Slow))
            return send(socket, status, headers, body, head, body.size());

        QByteArray out = statusLine(status);
        for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
        out += "Content-Length: " + QByteArray::number(body.size()) + "\r\nConnection: close\r\n\r\n";
        socket->write(out);
        if (fault == HubFault::DropMidFile || fault == HubFault::ShortBody) {
            socket->write(body.left(fault == HubFault::DropMidFile ? body.size() / 2 : std::max<qint64>(0, file.size / 2 - first)));
            socket->disconnectFromHost();  // after what is queued is sent: the body ends early
        } else if (fault == HubFault::Stall) {
            socket->write(body.left(body.size() / 2));  // and then silence, until the client closes
        } else {
            sendSlowly(socket, body, 0);
        }
    }

    void sendSlowly(QTcpSocket* socket, const QByteArray& body, qint64 from) {
        int chunk = 0, delay = 0;
        {
            QMutexLocker lock(&shared_->mutex);
            chunk = shared_->slowChunk;
            delay = shared_->slowDelayMs;
        }
        socket->write(body.mid(from, chunk));
        if (from + chunk >= body.size()) {
            socket->disconnectFromHost();
            return;
        }
        QTimer::singleShot(delay, socket, [this, socket, body, from, chunk] {
            if (socket->state() == QAbstractSocket::ConnectedState) sendSlowly(socket, body, from + chunk);
        });
    }

    void serveTree(QTcpSocket* socket, const Request& request, const QString& repoName, const QString& revision, int cursor) {
        Repo repo;
        int pageSize = 0;
        QString nextHost;
        {
            QMutexLocker lock(&shared_->mutex);
            if (!shared_->repos.contains(repoName))
                return sendError(socket, 401, "RepoNotFound", "Repository Not Found for url: " + request.target);
            repo = shared_->repos.value(repoName);
            pageSize = shared_->pageSize;
            nextHost = shared_->nextPageHost;
        }
        if (!allowed(socket, request, repoName, repo)) return;
        if (!repo.revisions.contains(revision))
            return sendError(socket, 404, "RevisionNotFound", "Invalid rev id: " + revision);
        const auto& files = repo.revisions[revision];
        // Folders are listed as the Hub lists them, before their files.
        QJsonArray all;
        QStringList seenDirs;
        for (auto it = files.begin(); it != files.end(); ++it) {
            const QStringList parts = it.key().split('/');
            for (qsizetype i = 1; i < parts.size(); ++i) {
                const QString dir = parts.mid(0, i).join('/');
                if (seenDirs.contains(dir)) continue;
                seenDirs << dir;
                all.append(QJsonObject{{"type", "directory"}, {"oid", QString(40, '0')}, {"size", 0}, {"path", dir}});
            }
            QJsonObject entry{{"type", "file"}, {"oid", it->gitOid}, {"size", static_cast<double>(it->lfs ? 134 : it->size)},
                              {"path", it.key()}};
            if (it->lfs)
                entry.insert("lfs", QJsonObject{{"oid", it->sha256}, {"size", static_cast<double>(it->size)}, {"pointerSize", 134}});
            all.append(entry);
        }
        for (const QJsonObject& entry : repo.extraEntries.value(revision)) all.append(entry);
        QJsonArray page;
        for (int i = cursor; i < all.size() && i < cursor + pageSize; ++i) page.append(all[i]);
        QList<Header> headers{{"Content-Type", "application/json"}};
        if (cursor + pageSize < all.size()) {
            QUrl next(request.target);
            QUrlQuery query(next);
            query.removeAllQueryItems("cursor");
            query.addQueryItem("cursor", QString::number(cursor + pageSize));
            next.setQuery(query);
            headers.append(Header{"Link", "<http://" + nextHost.toLatin1() + ":" + QByteArray::number(shared_->hubPort) +
                                              next.toEncoded() + ">; rel=\"next\""});
        }
        send(socket, 200, headers, QJsonDocument(page).toJson(QJsonDocument::Compact));
    }

    Shared* shared_;
    QTcpServer hub_;
    QTcpServer cdn_;
};

FakeHubServer::FakeHubServer() : shared_(std::make_unique<Shared>()) {
    shared_->thread.setObjectName(QStringLiteral("fake-hub"));
    shared_->thread.start();
    // The core, its servers and their sockets live on the server's thread.
    shared_->core = new Core(shared_.get());
    shared_->core->moveToThread(&shared_->thread);
    QMetaObject::invokeMethod(shared_->core, &Core::listen, Qt::BlockingQueuedConnection);
}

FakeHubServer::~FakeHubServer() {
    QMetaObject::invokeMethod(shared_->core, [core = shared_->core] { delete core; }, Qt::BlockingQueuedConnection);
    shared_->thread.quit();
    shared_->thread.wait();
}

QString FakeHubServer::endpoint() const { return QStringLiteral("http://127.0.0.1:%1").arg(shared_->hubPort); }

void FakeHubServer::addRepo(const QString& repo, const QString& folder, const QString& revision) {
    static const QRegularExpression lfs(QStringLiteral("\\.(safetensors|bin|gguf|pt)$"));
    QDirIterator it(folder, QDir::Files, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString path = it.next();
        QFile f(path);
        if (!f.open(QIODevice::ReadOnly)) qFatal("fake hub: cannot read %s", qPrintable(path));
        const QString relative = path.mid(folder.size() + 1);
        addFile(repo, relative, f.readAll(), lfs.match(relative).hasMatch(), revision);
    }
}

void FakeHubServer::addFile(const QString& repo, const QString& path, const QByteArray& data, bool lfs,
                            const QString& revision) {
    QMutexLocker lock(&shared_->mutex);
    shared_->repos[repo].revisions[revision].insert(path, makeFile(data, lfs));
}

void FakeHubServer::addListedOnly(const QString& repo, const QString& path, qint64 size, const QString& revision,
                                  const QString& sha256, const QString& gitOid) {
    // Listed as an LFS file of that size without holding its bytes, so it may be larger than memory;
    // without a sha256, as a small file.
    ServedFile f;
    f.size = size;
    f.lfs = !sha256.isEmpty();
    f.served = false;
    f.sha256 = sha256;
    f.gitOid = gitOid;
    QMutexLocker lock(&shared_->mutex);
    shared_->repos[repo].revisions[revision].insert(path, f);
}

void FakeHubServer::addListedEntry(const QString& repo, const QJsonObject& entry, const QString& revision) {
    QMutexLocker lock(&shared_->mutex);
    Repo& r = shared_->repos[repo];
    r.revisions[revision];  // the revision exists, even with no file of its own
    r.extraEntries[revision].append(entry);
}

void FakeHubServer::setAccess(const QString& repo, RepoAccess access, const QString& token) {
    QMutexLocker lock(&shared_->mutex);
    shared_->repos[repo].access = access;
    shared_->repos[repo].token = token;
}

void FakeHubServer::injectFaults(const QString& repo, const QString& path, const QList<HubFault>& faults, bool repeatLast) {
    QMutexLocker lock(&shared_->mutex);
    shared_->faults[repo + "\n" + path] = {faults, repeatLast};
}

void FakeHubServer::setSlowPace(int chunkBytes, int delayMs) {
    QMutexLocker lock(&shared_->mutex);
    shared_->slowChunk = std::max(1, chunkBytes);
    shared_->slowDelayMs = std::max(0, delayMs);
}

void FakeHubServer::setTreePageSize(int entries) {
    QMutexLocker lock(&shared_->mutex);
    shared_->pageSize = std::max(1, entries);
}

void FakeHubServer::setNextPageHost(const QString& host) {
    QMutexLocker lock(&shared_->mutex);
    shared_->nextPageHost = host;
}

QList<HubRequest> FakeHubServer::requests() const {
    QMutexLocker lock(&shared_->mutex);
    return shared_->log;
}

QList<HubRequest> FakeHubServer::requestsFor(const QString& text) const {
    QList<HubRequest> found;
    for (const HubRequest& r : requests())
        if (QUrl::fromPercentEncoding(r.target.toUtf8()).contains(text)) found.append(r);
    return found;
}

void FakeHubServer::clearRequests() {
    QMutexLocker lock(&shared_->mutex);
    shared_->log.clear();
}

}  // namespace tandem::test
