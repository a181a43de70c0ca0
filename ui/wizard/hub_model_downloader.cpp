// The model wizard's downloader over the Hub client (hub/): a HubClient for listing, one DownloadJob
// per download. Built when the tandem_hub library is part of the build.
#include "ui/wizard/model_downloader.h"

#include <utility>

namespace tandem::ui {
namespace {

class HubModelDownloader final : public ModelDownloader {
public:
    explicit HubModelDownloader(const QString& endpoint) { settings_.endpoint = endpoint; }

    void setAccessToken(const QString& token) override { settings_.token = token; }

    void listFiles(const QString& repo, const QString& revision) override {
        // A client per listing, so it carries the token of the moment; the old one may be the sender
        // of the signal that got us here, so it goes later.
        if (client_) client_->deleteLater();
        client_ = new hub::HubClient(settings_, this);
        connect(client_, &hub::HubClient::filesListed, this, &ModelDownloader::filesListed);
        connect(client_, &hub::HubClient::failed, this, &ModelDownloader::listFailed);
        client_->listFiles(repo, revision);
    }

    void start(const QString& repo, const QString& revision, const QList<hub::RepoFile>& files,
               const QString& outDir) override {
        // The old job ends before the new one starts on the same folder: its destructor waits until
        // its transfers stopped and their partial files are closed (and kept for the new one).
        delete std::exchange(job_, nullptr);
        job_ = new hub::DownloadJob(settings_, repo, revision, files, outDir, this);
        connect(job_, &hub::DownloadJob::progress, this, &ModelDownloader::progress);
        connect(job_, &hub::DownloadJob::fileProgress, this, &ModelDownloader::fileProgress);
        connect(job_, &hub::DownloadJob::fileFinished, this, &ModelDownloader::fileFinished);
        connect(job_, &hub::DownloadJob::finished, this, &ModelDownloader::finished);
        connect(job_, &hub::DownloadJob::failed, this, &ModelDownloader::failed);
        job_->start();
    }

    void pause() override {
        if (job_) job_->pause();
    }
    void resume() override {
        if (job_) job_->resume();
    }
    void cancel() override {
        if (job_) job_->cancel();
    }

private:
    hub::HubSettings settings_;
    hub::HubClient* client_ = nullptr;
    hub::DownloadJob* job_ = nullptr;
};

}  // namespace

std::unique_ptr<ModelDownloader> makeHubDownloader(const QString& endpoint) {
    return std::make_unique<HubModelDownloader>(endpoint);
}

}  // namespace tandem::ui
