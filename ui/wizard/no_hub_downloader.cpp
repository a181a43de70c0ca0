// The model wizard's downloader in a build without the Hub client (ui/hub): every request fails with
// a message that says what still works. Replaced by hub_model_downloader.cpp when tandem_hub is built.
#include "ui/wizard/model_downloader.h"

#include <QTimer>

namespace tandem::ui {
namespace {

class UnavailableDownloader final : public ModelDownloader {
public:
    void setAccessToken(const QString&) override {}
    void listFiles(const QString&, const QString&) override {
        QTimer::singleShot(0, this, [this] { emit listFailed(message()); });
    }
    void start(const QString&, const QString&, const QList<hub::RepoFile>&, const QString&) override {
        QTimer::singleShot(0, this, [this] { emit failed(message()); });
    }
    void pause() override {}
    void resume() override {}
    void cancel() override {}

private:
    static QString message() {
        return tr("This build of Tandem cannot download models. Download the model with another tool (for example "
                  "`huggingface-cli download`), then choose its folder in “A folder or .gguf file on this computer”.");
    }
};

}  // namespace

std::unique_ptr<ModelDownloader> makeHubDownloader(const QString&) { return std::make_unique<UnavailableDownloader>(); }

}  // namespace tandem::ui
