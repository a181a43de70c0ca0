// The model wizard end to end on the real Hub client: a repository served by the fake Hub on 127.0.0.1
// (tests/hub), with a connection dropped mid-file, a corrupted byte on the way and a stale file in the
// download folder, is listed, downloaded, verified, converted, loaded and chatted with, as a user clicks
// through it.
#include <QAbstractButton>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QSignalSpy>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>

#include "fake_hub_server.h"
#include "test_support.h"
#include "ui/widgets/main_window.h"
#include "ui/wizard/choose_page.h"
#include "ui/wizard/done_page.h"
#include "ui/wizard/model_downloader.h"
#include "ui/wizard/model_wizard.h"
#include "ui/wizard/quantization_page.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

const QString kRepo = QStringLiteral("tandem-test/tiny-qwen3moe");
constexpr quint64 kGB = 1000ull * 1000 * 1000;

QByteArray contents(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// An address on this machine where nothing listens: every connection is refused, as with no network.
QString unreachableEndpoint() {
    QTcpServer probe;
    if (!probe.listen(QHostAddress::LocalHost)) return {};
    const quint16 port = probe.serverPort();
    probe.close();
    return QStringLiteral("http://127.0.0.1:%1").arg(port);
}

// A visible activity indicator on `page`: a busy (indeterminate) progress bar.
bool showsActivity(QWidget* page) {
    for (QProgressBar* bar : page->findChildren<QProgressBar*>())
        if (bar->isVisible() && bar->minimum() == 0 && bar->maximum() == 0) return true;
    return false;
}

}  // namespace

class WizardHubTest : public QObject {
    Q_OBJECT

private slots:
    // What the wizard downloads of a repository: the weights, the JSON and Jinja files, and Kimi-K2's
    // tiktoken.model (its tokenizer: the release has no tokenizer.json); not other formats or code.
    void downloadsWhatTheEngineReads() {
        QList<hub::RepoFile> files;
        for (const char* p : {"model-00001-of-00002.safetensors", "config.json", "chat_template.jinja", "tiktoken.model",
                              "tokenization_kimi.py", "original/consolidated.00.pth", "README.md", "onnx/model.onnx"})
            files.append({QString::fromUtf8(p), 1, {}, {}});
        QStringList wanted;
        for (const auto& f : ui::modelFilesToDownload(files)) wanted << f.path;
        QCOMPARE(wanted, (QStringList{"model-00001-of-00002.safetensors", "config.json", "chat_template.jinja", "tiktoken.model"}));
    }

    void aHubModelIsDownloadedThroughFaultsConvertedLoadedAndAnswers() {
        test::FakeHubServer server;
        const QString fixture = test::fixturePath("tiny-qwen3moe");
        server.addRepo(kRepo, fixture);
        server.injectFaults(kRepo, "model-00001-of-00002.safetensors", {test::HubFault::DropMidFile});
        server.injectFaults(kRepo, "model-00002-of-00002.safetensors", {test::HubFault::CorruptByte});

        QTemporaryDir dir;
        TandemAppOptions options = test::appOptions(dir);
        options.machineFigures = [](int, const QString& folder) {
            return MachineFigures{512 * kGB, 80 * kGB, QStringLiteral("a test GPU"), 1000 * kGB, folder};
        };
        auto app = std::make_unique<TandemApp>(std::move(options));
        app->settings()->setHubEndpoint(server.endpoint() + "/");  // the settings drop the slash
        QCOMPARE(app->settings()->hubEndpoint(), server.endpoint());
        const QString models = dir.filePath("models");
        app->settings()->setModelsFolder(models);
        // The download folder holds a tokenizer.json of the right size but another revision's content:
        // the download checks it against the listing and fetches the right one.
        const QString downloads = models + "/tandem-test--tiny-qwen3moe";
        QByteArray stale = contents(fixture + "/tokenizer.json");
        stale[10] = static_cast<char>(stale[10] ^ 1);
        QVERIFY(QDir().mkpath(downloads));
        {
            QFile f(downloads + "/tokenizer.json");
            QVERIFY(f.open(QIODevice::WriteOnly) && f.write(stale) == stale.size());
        }
        app->start();
        app->window()->show();
        QVERIFY(test::waitForModel(*app));

        app->window()->openModelWizard();
        ModelWizard* w = app->window()->modelWizard();
        QVERIFY(w);
        auto* choose = qobject_cast<ChoosePage*>(w->page(ModelWizard::ChooseId));
        choose->repositoryButton()->setChecked(true);
        choose->repositoryEdit()->setText(kRepo);
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::QuantizationId));
        auto* quantization = qobject_cast<QuantizationPage*>(w->page(ModelWizard::QuantizationId));
        QVERIFY(QTest::qWaitFor([&] { return quantization->isComplete(); }, 30000));
        quantization->choose(1);  // int8
        w->next();

        QVERIFY(QTest::qWaitFor([&] { return w->currentId() == ModelWizard::DoneId; }, 120000));
        auto* done = qobject_cast<DonePage*>(w->page(ModelWizard::DoneId));
        QVERIFY(QTest::qWaitFor([&] { return done->isLoaded(); }, 60000));
        const QString store = models + "/tandem-test--tiny-qwen3moe-int8";
        QCOMPARE(QDir(app->model()->summary().dir).canonicalPath(), QDir(store).canonicalPath());

        // What was downloaded is the repository, byte for byte, and the faults were met on the way: the
        // dropped file was resumed with a Range request, the corrupted one fetched again.
        for (const QString name : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                   "config.json", "tokenizer.json"})
            QVERIFY2(contents(downloads + "/" + name) == contents(fixture + "/" + name), qPrintable(name));
        bool resumed = false;
        for (const auto& r : server.requestsFor("model-00001-of-00002.safetensors")) resumed |= !r.range.isEmpty();
        QVERIFY(resumed);
        QVERIFY(server.requestsFor("model-00002-of-00002.safetensors").size() >= 2);

        w->accept();
        // Greedy, as tst_model_wizard: a fresh seed per answer could sample an end of turn first.
        SamplingDefaults sampling = app->settings()->sampling();
        sampling.maxNewTokens = 8;
        sampling.useModelRecommendation = false;
        sampling.sampling = {};
        app->settings()->setSampling(sampling);
        QVERIFY(app->chat()->send(QStringLiteral("Hello")));
        QVERIFY(test::waitForIdle(*app));
        QCOMPARE(app->messages()->rowCount(), 2);
        QVERIFY(!app->messages()->message(1).content.isEmpty());
    }

    // Offline (issue 24, item 6): the lookup shows activity at once, the disabled Download button says
    // why, and a Hub that cannot be reached is reported within seconds, with Try Again.
    void withoutANetworkTheWizardSaysSoQuickly() {
        const QString endpoint = unreachableEndpoint();
        QVERIFY(!endpoint.isEmpty());
        QTemporaryDir dir;
        TandemAppOptions options = test::appOptions(dir);
        options.machineFigures = [](int, const QString& folder) {
            return MachineFigures{512 * kGB, 80 * kGB, QStringLiteral("a test GPU"), 1000 * kGB, folder};
        };
        options.offerModelWizard = false;
        auto app = std::make_unique<TandemApp>(std::move(options));
        app->settings()->setHubEndpoint(endpoint);
        app->settings()->setModelsFolder(dir.filePath("models"));
        app->start();
        app->window()->show();
        app->window()->openModelWizard();
        ModelWizard* w = app->window()->modelWizard();
        QVERIFY(w);
        auto* choose = qobject_cast<ChoosePage*>(w->page(ModelWizard::ChooseId));
        const auto found = choose->curatedList()->findItems(QStringLiteral("Qwen3-30B-A3B"), Qt::MatchExactly);
        QCOMPARE(found.size(), 1);
        choose->curatedList()->setCurrentItem(found.front());
        QElapsedTimer clock;
        clock.start();
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::QuantizationId));
        auto* quantization = qobject_cast<QuantizationPage*>(w->page(ModelWizard::QuantizationId));
        QAbstractButton* download = w->button(QWizard::CommitButton);
        // At once: something moves, and the button that waits says what it waits for.
        QVERIFY(showsActivity(quantization));
        QVERIFY(!download->isEnabled());
        QVERIFY2(download->toolTip().contains("Qwen/Qwen3-30B-A3B"), qPrintable(download->toolTip()));

        QVERIFY(QTest::qWaitFor([&] { return quantization->errorLabel()->isVisible(); }, 30000));
        const qint64 ms = clock.elapsed();
        QVERIFY2(ms < 6000, qPrintable(QStringLiteral("the failure took %1 ms to show").arg(ms)));
        QVERIFY2(quantization->errorLabel()->text().contains("127.0.0.1"), qPrintable(quantization->errorLabel()->text()));
        QVERIFY(!showsActivity(quantization));
        QVERIFY(quantization->retryButton()->isVisible());
        QVERIFY(!download->isEnabled());
        QVERIFY2(download->toolTip().contains("Try Again"), qPrintable(download->toolTip()));
    }

    void restartingADownloadEndsTheOldJobFirst() {
        test::FakeHubServer server;
        const QString fixture = test::fixturePath("tiny-qwen3moe");
        const QString shard = QStringLiteral("model-00001-of-00002.safetensors");
        server.addRepo(kRepo, fixture);
        server.setSlowPace(8 * 1024, 20);
        server.injectFaults(kRepo, shard, {test::HubFault::Slow}, true);
        std::unique_ptr<ModelDownloader> d = makeHubDownloader(server.endpoint());
        QSignalSpy listed(d.get(), &ModelDownloader::filesListed);
        d->listFiles(kRepo, "main");
        QVERIFY(listed.wait(30000));
        const auto files = listed.first().first().value<QList<hub::RepoFile>>();

        QTemporaryDir out;
        bool shardStarted = false;
        QObject::connect(d.get(), &ModelDownloader::fileProgress, d.get(), [&](const QString& path, qint64 done, qint64) {
            shardStarted |= path == shard && done > 0;
        });
        d->start(kRepo, "main", files, out.path());
        QVERIFY(QTest::qWaitFor([&] { return shardStarted; }, 60000));
        // Try Again on the same folder: the old job is gone before the new one starts.
        QSignalSpy finished(d.get(), &ModelDownloader::finished);
        d->start(kRepo, "main", files, out.path());
        QCOMPARE(d->findChildren<hub::DownloadJob*>().size(), 1);
        QVERIFY(finished.wait(120000));
        QVERIFY(contents(out.filePath(shard)) == contents(fixture + "/" + shard));
    }
};

QTEST_MAIN(WizardHubTest)
#include "tst_wizard_hub.moc"
