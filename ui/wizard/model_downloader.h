#pragma once
// What the model wizard needs from a downloader: list a Hugging Face repository's files, download them
// with resume, pause and cancel. The app uses the Hub client (hub/) through HubModelDownloader; the
// tests drive the wizard with a scripted one.
#include <QList>
#include <QObject>
#include <QString>
#include <functional>
#include <memory>

#include "hub/hub_client.h"
#include "ui/wizard/wizard_hooks.h"

namespace tandem::ui {

class ModelDownloader : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;

    // Sent as "Authorization: Bearer ..." from the next request on; empty: $HF_TOKEN or anonymous.
    virtual void setAccessToken(const QString& token) = 0;
    // filesListed or listFailed follows.
    virtual void listFiles(const QString& repo, const QString& revision) = 0;
    // Downloads `files` into `outDir`, resuming what an earlier download (even one of an earlier run of
    // the app) left there. Replaces a download in progress. finished or failed follows.
    virtual void start(const QString& repo, const QString& revision, const QList<hub::RepoFile>& files,
                       const QString& outDir) = 0;
    virtual void pause() = 0;   // keeps the partial files
    virtual void resume() = 0;
    virtual void cancel() = 0;  // stops and removes the partial files; finished files stay

signals:
    void filesListed(const QList<tandem::hub::RepoFile>& files);
    void listFailed(const QString& message);
    void progress(qint64 doneBytes, qint64 totalBytes, double bytesPerSecond);
    void fileProgress(const QString& path, qint64 doneBytes, qint64 totalBytes);
    void fileFinished(const QString& path);
    void finished();
    void failed(const QString& message);
};

// The Hub client's downloader from ENDPOINT (empty: $HF_ENDPOINT, else huggingface.co).
std::unique_ptr<ModelDownloader> makeHubDownloader(const QString& endpoint);

// Of a repository's files, those Tandem needs: the safetensors weights and the JSON and template files
// beside them at the top level (config, tokenizer, generation config, index). Not other formats'
// copies of the weights (.bin, .pth, .gguf, original/), not READMEs or images.
QList<hub::RepoFile> modelFilesToDownload(const QList<hub::RepoFile>& files);
// Of `files`, those not yet in `dir` at their full size (a download only moves finished files there):
// an estimate of what is left to fetch, for the disk space. A file of the right size may still be of
// another revision, so a download gets every file and checks what it finds.
QList<hub::RepoFile> filesMissingFrom(const QList<hub::RepoFile>& files, const QString& dir);
qint64 totalSize(const QList<hub::RepoFile>& files);

// The file list as persisted in the wizard's state, and back.
QString filesToJson(const QList<hub::RepoFile>& files);
QList<hub::RepoFile> filesFromJson(const QString& json);

}  // namespace tandem::ui
