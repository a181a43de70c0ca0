#pragma once
// The Hugging Face Hub client: list a repository's files, download them with resume and verification.
// Qt Core + Network only (no widgets), so tandem-cli's `download` and the model wizard share it.
//
// This header is the contract between the client (ui/hub/*.cpp) and its users (the wizard, the CLI).
// Grow it, but keep what is here.
#include <QList>
#include <QObject>
#include <QString>

namespace tandem::hub {

struct HubSettings {
    QString endpoint;       // empty: $HF_ENDPOINT, else https://huggingface.co
    QString token;          // empty: $HF_TOKEN, else anonymous; sent as "Authorization: Bearer ..."
    int parallelFiles = 4;  // files downloaded at the same time
    int maxRetries = 5;     // per file, with exponential backoff, on network errors and 5xx
};

struct RepoFile {
    QString path;    // relative to the repository root, '/'-separated
    qint64 size = 0;
    QString sha256;  // lower-case hex for LFS files; empty for small (non-LFS) files
};

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
};

// Downloads FILES of REPO into OUTDIR. Partial data is kept in OUTDIR/.tandem-download/ and resumed
// with HTTP Range, even by a new DownloadJob after the app restarted; each LFS file is checked
// against its sha256 while it arrives and is moved into place only when it matches.
class DownloadJob : public QObject {
    Q_OBJECT
public:
    DownloadJob(HubSettings settings, QString repo, QString revision, QList<RepoFile> files,
                QString outDir, QObject* parent = nullptr);
    void start();
    void pause();   // stops the transfers, keeps the partial files
    void resume();
    void cancel();  // stops and removes the partial files; finished files stay

signals:
    void progress(qint64 doneBytes, qint64 totalBytes, double bytesPerSecond);
    void fileProgress(const QString& path, qint64 doneBytes, qint64 totalBytes);
    void fileFinished(const QString& path);  // verified and in place
    void finished();                         // every file verified and in place
    void failed(const QString& message);     // gave up; partial files stay for a later resume
};

}  // namespace tandem::hub
