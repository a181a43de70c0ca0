#pragma once
// The Hugging Face Hub client: list a repository's files, download them with resume and verification.
// Qt Core + Network only (no widgets), so tandem-cli's `download` and the model wizard share it.
//
// This header is the contract between the client (hub/*.cpp) and its users (the wizard, the CLI).
// Grow it, but keep what is here.
#include <QList>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>

class QNetworkAccessManager;
class QNetworkReply;
class QThread;
class QUrl;

namespace tandem::hub {

struct HubSettings {
    QString endpoint;       // empty: $HF_ENDPOINT, else https://huggingface.co
    QString token;          // empty: $HF_TOKEN, else anonymous; sent as "Authorization: Bearer ..."
    int parallelFiles = 4;  // files downloaded at the same time
    int maxRetries = 5;     // per file, with exponential backoff, on network errors and 5xx
    int retryDelayMs = 1000;     // the first backoff; doubled per attempt, at most a minute
    int stallTimeoutMs = 60000;  // a transfer that receives nothing for this long is retried
};

// SETTINGS with the empty fields filled: endpoint from $HF_ENDPOINT or https://huggingface.co (no
// trailing '/'), token from $HF_TOKEN or the token file of huggingface-cli ($HF_HOME/token, else
// ~/.cache/huggingface/token) when the endpoint is https://huggingface.co or $HF_ENDPOINT. No token
// at all for a plain http endpoint other than this machine.
HubSettings resolvedSettings(HubSettings settings);

// An endpoint as typed, made a base URL: trimmed, without trailing slashes, and with https:// when no
// scheme was given ("hf-mirror.example" is meant as a web address). Empty stays empty.
QString normalizedEndpoint(QString text);

struct RepoFile {
    QString path;    // relative to the repository root, '/'-separated
    qint64 size = 0;
    QString sha256;  // lower-case hex for LFS files; empty for small (non-LFS) files
    QString gitOid;  // non-LFS files: the git blob id (sha1 of "blob SIZE\0" + content), checked too
};

// FILES whose path matches any of GLOBS (fnmatch style: '*' and '?' also match '/', [abc] sets); every
// file when GLOBS is empty.
QList<RepoFile> filterFiles(const QList<RepoFile>& files, const QStringList& globs);
bool matchesGlob(const QString& path, const QString& glob);

// Bytes of FILES still to fetch into OUTDIR: files not yet there with their size, less the partial
// data already in OUTDIR/.tandem-download/.
qint64 remainingDownloadBytes(const QList<RepoFile>& files, const QString& outDir);

struct DiskSpaceCheck {
    bool enough = false;
    qint64 neededBytes = 0;
    qint64 availableBytes = 0;  // on the file system that holds DIR (or its nearest existing parent)
    QString message;            // when not enough: both figures and what to do
};
// Whether DIR's file system has NEEDEDBYTES free (the download, plus a converted store if the caller
// adds it). Call before starting; DownloadJob checks the download alone again when it starts.
DiskSpaceCheck checkDiskSpace(const QString& dir, qint64 neededBytes);

class DownloadWorker;

// Lists the files of REPO at REVISION (the model API / tree endpoint). One request at a time.
class HubClient : public QObject {
    Q_OBJECT
public:
    explicit HubClient(HubSettings settings, QObject* parent = nullptr);
    void listFiles(const QString& repo, const QString& revision = QStringLiteral("main"));

signals:
    void filesListed(const QList<tandem::hub::RepoFile>& files);
    // A message for the user: what went wrong and what to do (401/403: a token or accepting the
    // licence on the website; 404: the repository name).
    void failed(const QString& message);

private:
    void requestPage(const QUrl& url);
    void pageArrived(QNetworkReply* reply);

    HubSettings settings_;
    QNetworkAccessManager* network_;
    QString repo_;
    QString revision_;
    QList<RepoFile> files_;
    qint64 listedBytes_ = 0;  // the sizes of files_, added up
    int attempt_ = 0;
    int generation_ = 0;
};

// Downloads FILES of REPO into OUTDIR. Partial data is kept in OUTDIR/.tandem-download/ and resumed
// with HTTP Range, even by a new DownloadJob after the app restarted; each LFS file is checked
// against its sha256 while it arrives and is moved into place only when it matches. The transfers,
// writes and hashing run on a thread of the job's own; the signals arrive on the thread that made it.
// When every file is in place the .tandem-download/ folder is removed; a later job over the same
// folder hashes the files it finds instead of fetching them again.
class DownloadJob : public QObject {
    Q_OBJECT
public:
    DownloadJob(HubSettings settings, QString repo, QString revision, QList<RepoFile> files,
                QString outDir, QObject* parent = nullptr);
    void start();
    void pause();   // stops the transfers, keeps the partial files
    void resume();
    void cancel();  // stops and removes the partial files; finished files stay
    ~DownloadJob() override;  // stops the transfers, keeps the partial files

signals:
    void progress(qint64 doneBytes, qint64 totalBytes, double bytesPerSecond);
    void fileProgress(const QString& path, qint64 doneBytes, qint64 totalBytes);
    void fileFinished(const QString& path);  // verified and in place
    void finished();                         // every file verified and in place
    void failed(const QString& message);     // gave up; partial files stay for a later resume
    void paused();     // after pause(): the transfers stopped and the partial files are written
    void cancelled();  // after cancel(): the partial files are removed
    // Something the user may want to see that is not a failure: "retrying X in 4 s (connection reset)".
    void notice(const QString& message);

private:
    QThread* thread_;
    DownloadWorker* worker_;
};

}  // namespace tandem::hub

Q_DECLARE_METATYPE(tandem::hub::RepoFile)
