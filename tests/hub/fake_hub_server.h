#pragma once
// A Hugging Face Hub on 127.0.0.1 for tests: HTTP/1.1 over QTcpServer, serving folders or in-memory
// files in the Hub's layout, with faults injected per file. It runs on a thread of its own, so a test
// may block (QProcess::waitForFinished, a blocking call into a job) while it answers; every method is
// thread-safe.
//
// What it serves, as huggingface.co does:
//   GET /api/models/{repo}/tree/{revision}?recursive=true   JSON list: type, path, size, oid (git blob
//        id), and for LFS files lfs {oid: sha256, size, pointerSize}; pages of setTreePageSize entries
//        chained by a Link: <...>; rel="next" header
//   GET|HEAD /{repo}/resolve/{revision}/{path}   small files: 200 with ETag (the git blob id) and
//        X-Repo-Commit; LFS files: 302 to a second port (the "CDN") with X-Linked-Size, X-Linked-Etag
//        (the sha256) and X-Repo-Commit
//   the CDN: GET /lfs/{sha256}?repo=...&path=...   the content, ETag = the sha256
// Both answer "Range: bytes=N-" (and N-M) with 206 and Content-Range, or 416 past the end. Errors
// carry X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo) like the Hub's.
#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QString>
#include <memory>

namespace tandem::test {

enum class HubFault {
    DropMidFile,   // headers and half the body, then the connection closes
    ShortBody,     // headers promising the whole body, which stops at the file's middle byte (nothing at all
                   // past it), then the connection closes: a copy cut short, with headers that say otherwise
    LongContentLength,  // the whole body under a Content-Length 1000 bytes larger, then the connection closes
    CorruptByte,   // the whole body with one byte (the file's middle byte, or the first one sent) flipped
    Stall,         // headers and half the body, then nothing until the client gives up
    Slow,          // the body in small pieces with pauses (setSlowPace)
    IgnoreRange,   // a Range request gets 200 and the whole file
    WrongRange,    // a Range request gets 206 starting elsewhere than asked
    NotFound,      // 404 EntryNotFound at the resolve URL
    Unauthorized,  // 401 at the resolve URL
    Forbidden,     // 403 GatedRepo at the resolve URL
    ServerError,   // 500 at the resolve URL
};

enum class RepoAccess {
    Public,
    Private,  // without the token: 401 RepoNotFound, as the Hub hides private repositories
    Gated,    // no token: 401 GatedRepo; a token other than the granted one: 403 GatedRepo
};

struct HubRequest {
    QString method;
    QString target;  // path and query as sent
    QByteArray range;
    QByteArray authorization;
    bool cdn = false;  // came to the CDN port
};

class FakeHubServer {
public:
    FakeHubServer();  // listens at once on two free ports of 127.0.0.1
    ~FakeHubServer();
    FakeHubServer(const FakeHubServer&) = delete;
    FakeHubServer& operator=(const FakeHubServer&) = delete;

    // http://127.0.0.1:PORT, for HubSettings::endpoint
    QString endpoint() const;

    // Serves every file of FOLDER (recursively) as REPO at REVISION; *.safetensors, *.bin, *.gguf and
    // *.pt are LFS files.
    void addRepo(const QString& repo, const QString& folder, const QString& revision = QStringLiteral("main"));
    void addFile(const QString& repo, const QString& path, const QByteArray& data, bool lfs,
                 const QString& revision = QStringLiteral("main"));
    // An entry of the tree listing that is not served (e.g. "../escape" to test path checks), listed as
    // an LFS file with SHA256 and GITOID (e.g. a malformed one to test the listing's checks), or as a
    // small file with GITOID when SHA256 is empty.
    void addListedOnly(const QString& repo, const QString& path, qint64 size,
                       const QString& revision = QStringLiteral("main"), const QString& sha256 = QString(64, 'a'),
                       const QString& gitOid = QString(40, 'b'));
    // An entry of the tree listing exactly as given (e.g. a size that is no byte count), after the files.
    void addListedEntry(const QString& repo, const QJsonObject& entry, const QString& revision = QStringLiteral("main"));
    void setAccess(const QString& repo, RepoAccess access, const QString& token = {});

    // FAULTS apply to the next requests of REPO's PATH, one each, in order; with repeatLast the last
    // one then applies to every later request. Error faults act at the resolve URL, body faults where
    // the content is served (the CDN for LFS files).
    void injectFaults(const QString& repo, const QString& path, const QList<HubFault>& faults, bool repeatLast = false);
    void setSlowPace(int chunkBytes, int delayMs);  // default 16 KiB every 20 ms
    void setTreePageSize(int entries);               // default 1000, as the Hub
    void setNextPageHost(const QString& host);       // in the Link header; default 127.0.0.1

    QList<HubRequest> requests() const;
    // Requests whose target contains TEXT (e.g. a file name).
    QList<HubRequest> requestsFor(const QString& text) const;
    void clearRequests();

    struct Shared;
    class Core;

private:
    std::unique_ptr<Shared> shared_;
};

}  // namespace tandem::test
