// The model wizard on the offscreen platform: every page driven like a user, downloads through a
// scripted downloader that serves a fixture as a Hugging Face repository, conversions and loads for
// real (tiny-qwen3moe), the quantization advice on made-up machines, resuming after the wizard (or the
// app) was closed mid-way, and the app opening the wizard when it has no model.
#include <QAbstractButton>
#include <QAction>
#include <QDir>
#include <QDirIterator>
#include <QLabel>
#include <QLineEdit>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QSettings>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QTreeWidget>

#include "test_support.h"
#include "ui/settings/app_paths.h"
#include "ui/widgets/empty_state_page.h"
#include "ui/widgets/main_window.h"
#include "ui/widgets/notification_banner.h"
#include "ui/wizard/choose_page.h"
#include "ui/wizard/convert_job.h"
#include "ui/wizard/convert_page.h"
#include "ui/wizard/done_page.h"
#include "ui/wizard/download_page.h"
#include "ui/wizard/model_catalog.h"
#include "ui/wizard/model_wizard.h"
#include "ui/wizard/quantization_page.h"
#include "ui/wizard/resume_page.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

constexpr quint64 kGB = 1'000'000'000ull;
const QString kRepo = QStringLiteral("tandem-test/tiny-qwen3moe");

// A Hugging Face repository made of a fixture's files, and what the wizard asked of it. The downloader
// the wizard creates reports here, so a test can script it across wizards.
struct FakeHub {
    QString fixture = test::fixturePath(QStringLiteral("tiny-qwen3moe"));
    QString failWith;         // the next start() fails with this message
    // Downloads of the whole model wait for the test's deliverOneFile() / finishAll(); fetching
    // config.json alone still finishes at once.
    bool holdDownloads = false;
    int lists = 0, starts = 0, pauses = 0, resumes = 0, cancels = 0;
    QList<hub::RepoFile> lastFiles;
    QString lastOutDir, token;
    class FakeDownloader* current = nullptr;

    // The fixture's files as the Hub lists them, plus files of other formats the wizard must leave out.
    QList<hub::RepoFile> listing() const {
        QList<hub::RepoFile> files;
        for (const QFileInfo& f : QDir(fixture).entryInfoList(QDir::Files, QDir::Name))
            if (!f.fileName().startsWith(QLatin1String("golden"))) files.append({f.fileName(), f.size(), {}, {}});
        files.append({QStringLiteral("README.md"), 120, {}, {}});
        files.append({QStringLiteral("original/consolidated.00.pth"), 4096, QStringLiteral("ab"), {}});
        return files;
    }
};

class FakeDownloader : public ModelDownloader {
public:
    explicit FakeDownloader(FakeHub* hub) : hub_(hub) { hub_->current = this; }
    ~FakeDownloader() override {
        if (hub_->current == this) hub_->current = nullptr;
    }

    void setAccessToken(const QString& token) override { hub_->token = token; }
    void listFiles(const QString& repo, const QString&) override {
        ++hub_->lists;
        QTimer::singleShot(0, this, [this, repo] {
            if (repo == kRepo) emit filesListed(hub_->listing());
            else emit listFailed(QStringLiteral("Hugging Face has no repository %1.").arg(repo));
        });
    }
    void start(const QString&, const QString&, const QList<hub::RepoFile>& files, const QString& outDir) override {
        ++hub_->starts;
        hub_->lastFiles = files;
        hub_->lastOutDir = outDir;
        files_ = files;
        outDir_ = outDir;
        if (!hub_->failWith.isEmpty()) {
            const QString message = std::exchange(hub_->failWith, QString());
            QTimer::singleShot(0, this, [this, message] { emit failed(message); });
        } else if (!hub_->holdDownloads || files.size() == 1) {
            QTimer::singleShot(0, this, &FakeDownloader::finishAll);
        }
    }
    void pause() override { ++hub_->pauses; }
    void resume() override { ++hub_->resumes; }
    void cancel() override { ++hub_->cancels; }

    // One file arrives, verified; the rest has not started.
    void deliverOneFile(const QString& path) {
        const hub::RepoFile f = *std::find_if(files_.begin(), files_.end(), [&](const hub::RepoFile& r) { return r.path == path; });
        QVERIFY(QFile::copy(hub_->fixture + QLatin1Char('/') + f.path, outDir_ + QLatin1Char('/') + f.path));
        emit fileProgress(f.path, f.size, f.size);
        emit fileFinished(f.path);
        emit progress(f.size, totalSize(files_), 2.5e6);
    }
    void finishAll() {
        QDir().mkpath(outDir_);
        qint64 done = 0;
        for (const hub::RepoFile& f : files_) {
            const QString target = outDir_ + QLatin1Char('/') + f.path;
            if (!QFileInfo::exists(target)) QFile::copy(hub_->fixture + QLatin1Char('/') + f.path, target);
            done += f.size;
            emit fileProgress(f.path, f.size, f.size);
            emit fileFinished(f.path);
            emit progress(done, totalSize(files_), 1e6);
        }
        emit finished();
    }

private:
    FakeHub* hub_;
    QList<hub::RepoFile> files_;
    QString outDir_;
};

// A machine that fits anything the fixtures need.
MachineFigures bigMachine(int, const QString& folder) {
    return {2000 * kGB, 141 * kGB, QStringLiteral("NVIDIA H200"), 5000 * kGB, folder};
}

// A machine of plenty of RAM and no GPU.
MachineFigures noGpuMachine(int, const QString& folder) { return {2000 * kGB, 0, QString(), 5000 * kGB, folder}; }

struct Harness {
    QTemporaryDir dir;
    std::shared_ptr<FakeHub> hub = std::make_shared<FakeHub>();
    std::unique_ptr<TandemApp> app;
    MachineFiguresProvider figures = bigMachine;

    explicit Harness(std::optional<QString> embeddedModel = std::nullopt, MachineFiguresProvider machine = bigMachine)
        : figures(std::move(machine)) {
        start(embeddedModel);
    }

    // Starts (or, after stop(), restarts) the app on the same settings and folders.
    void start(std::optional<QString> embeddedModel = std::nullopt) {
        TandemAppOptions options = test::appOptions(dir);
        if (embeddedModel) options.embeddedModelDir = *embeddedModel;
        std::shared_ptr<FakeHub> h = hub;
        options.downloaderFactory = [h] { return std::make_unique<FakeDownloader>(h.get()); };
        options.machineFigures = figures;
        app = std::make_unique<TandemApp>(std::move(options));
        app->settings()->setModelsFolder(dir.filePath(QStringLiteral("models")));
        app->start();
        app->window()->show();
    }
    void stop() { app.reset(); }

    ModelWizard* openWizard() {
        app->window()->openModelWizard();
        return app->window()->modelWizard();
    }
    QString modelsFolder() const { return dir.filePath(QStringLiteral("models")); }
};

template <class Page>
Page* page(ModelWizard* w, int id) {
    return qobject_cast<Page*>(w->page(id));
}

// The wizard's quantization page for the curated list's first model, DeepSeek-V3.
QuantizationPage* quantizationPageOfDeepSeekV3(Harness& h) {
    ModelWizard* w = h.openWizard();
    auto* choose = page<ChoosePage>(w, ModelWizard::ChooseId);
    choose->curatedList()->setCurrentItem(choose->curatedList()->topLevelItem(0));
    w->next();
    return page<QuantizationPage>(w, ModelWizard::QuantizationId);
}

bool waitForPage(ModelWizard* w, int id) {
    return QTest::qWaitFor([&] { return w->currentId() == id; }, 60000);
}

// Picks "Any model on Hugging Face" with the fake repository and goes on to the quantization page.
void chooseRepository(ModelWizard* w, const QString& repo = kRepo) {
    auto* choose = page<ChoosePage>(w, ModelWizard::ChooseId);
    choose->repositoryButton()->setChecked(true);
    choose->repositoryEdit()->setText(repo);
    QVERIFY(choose->isComplete());
    w->next();
    QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::QuantizationId));
}

// Waits until the chat window has the model of `store` loaded, with a new chat open.
void verifyLoadedWithNewChat(Harness& h, ModelWizard* w, const QString& store) {
    QVERIFY(waitForPage(w, ModelWizard::DoneId));
    auto* done = page<DonePage>(w, ModelWizard::DoneId);
    QVERIFY(QTest::qWaitFor([&] { return done->isLoaded(); }, 60000));
    QVERIFY(done->isComplete());
    QVERIFY(h.app->model()->isReady());
    QCOMPARE(QDir(h.app->model()->summary().dir).canonicalPath(), QDir(store).canonicalPath());
    QCOMPARE(QDir(h.app->settings()->engine().modelDir).canonicalPath(), QDir(store).canonicalPath());
    QCOMPARE(h.app->chat()->currentConversationId(), 0);
    QCOMPARE(h.app->settings()->modelWizardState().stage, ModelWizardState::Stage::None);
    QVERIFY(QFileInfo::exists(store + QStringLiteral("/tandem-store.json")));
    // The conversion recorded the store as verified, from the checksums it took while writing: it is
    // not read again in the background.
    QVERIFY(QFileInfo::exists(store + QStringLiteral("/tandem-verified.json")));
    QVERIFY(h.app->model()->summary().store == tandem::StoreState::Verified);
    QVERIFY(!h.app->model()->isVerifying());
}

QuantizationAdvice adviceFor(const QString& curatedName, const MachineFigures& machine, bool download = true) {
    for (const CuratedModel& m : curatedModels()) {
        if (m.name != curatedName) continue;
        QList<tandem::Footprint> needs;
        for (const auto p : kWizardPrecisions) needs.append(tandem::estimateFootprintFromJson(m.configJson.toStdString(), p));
        return adviseQuantization(needs, download, machine);
    }
    return {};
}

}  // namespace

class ModelWizardTest : public QObject {
    Q_OBJECT

private slots:
    void theCuratedListShowsEachModelWithItsSizes() {
        Harness h;
        ModelWizard* w = h.openWizard();
        QVERIFY(w && w->isVisible());
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ChooseId));
        QTreeWidget* list = page<ChoosePage>(w, ModelWizard::ChooseId)->curatedList();
        QStringList names;
        for (int i = 0; i < list->topLevelItemCount(); ++i) names << list->topLevelItem(i)->text(0);
        QCOMPARE(names, QStringList({"DeepSeek-V3", "DeepSeek-R1", "Kimi-K2", "Kimi-K2-Thinking", "Qwen3-235B-A22B",
                                     "Qwen3-30B-A3B", "DeepSeek-V2-Lite", "Mixtral-8x7B", "gpt-oss-120b", "gpt-oss-20b",
                                     "GLM-4.6", "GLM-4.5-Air", "GLM-4.5"}));
        QTreeWidgetItem* v3 = list->topLevelItem(0);
        QCOMPARE(v3->text(1), QStringLiteral("671 B (37.6 B)"));
        QVERIFY2(v3->text(2).endsWith(" GB") && v3->text(2).startsWith("6"), qPrintable(v3->text(2)));
        QCOMPARE(list->topLevelItem(5)->text(1), QStringLiteral("30.5 B (3.4 B)"));
        // Nothing chosen yet: Next waits for a choice.
        QVERIFY(!page<ChoosePage>(w, ModelWizard::ChooseId)->isComplete());
        list->setCurrentItem(list->topLevelItem(5));
        QVERIFY(page<ChoosePage>(w, ModelWizard::ChooseId)->isComplete());
    }

    void repositoriesOfOneNameGetFoldersOfTheirOwn() {
        WizardPlan qwen;
        qwen.repo = QStringLiteral("Qwen/Qwen3-30B-A3B");
        WizardPlan other = qwen;
        other.repo = QStringLiteral("someorg/Qwen3-30B-A3B");
        QCOMPARE(qwen.folderName(), QStringLiteral("Qwen--Qwen3-30B-A3B"));
        QVERIFY(qwen.folderName() != other.folderName());
    }

    void theSavedFileListKeepsEveryCheckValue() {
        const QList<hub::RepoFile> files{
            {QStringLiteral("model.safetensors"), 5'000'000'000, QString(64, 'a'), {}},
            {QStringLiteral("config.json"), 812, {}, QString(40, 'b')},
        };
        const QList<hub::RepoFile> back = filesFromJson(filesToJson(files));
        QCOMPARE(back.size(), files.size());
        for (qsizetype i = 0; i < files.size(); ++i) {
            QCOMPARE(back[i].path, files[i].path);
            QCOMPARE(back[i].size, files[i].size);
            QCOMPARE(back[i].sha256, files[i].sha256);
            QCOMPARE(back[i].gitOid, files[i].gitOid);
        }
    }

    void modelsGoUnderTheDataFolderByDefault() {
        QTemporaryDir dir;
        AppSettings settings(std::make_unique<QSettings>(dir.filePath("s.ini"), QSettings::IniFormat));
        // The XDG data folder of Tandem whatever the executable's name: $XDG_DATA_HOME/tandem/models.
        QCOMPARE(settings.modelsFolder(), qEnvironmentVariable("XDG_DATA_HOME") + QStringLiteral("/tandem/models"));
        QCOMPARE(settings.modelsFolder(), paths::modelsDir());
        settings.setModelsFolder("/big/disk/models/");
        QCOMPARE(settings.modelsFolder(), QStringLiteral("/big/disk/models"));
        // Forgetting where the wizard stopped keeps the folder the user chose.
        settings.setModelWizardState({ModelWizardState::Stage::Converting, "x", {}, {}, {}, "/src", "/dst", "int4"});
        settings.clearModelWizardState();
        QCOMPARE(settings.modelWizardState().stage, ModelWizardState::Stage::None);
        QCOMPARE(settings.modelsFolder(), QStringLiteral("/big/disk/models"));
    }

    void theAdviceRecommendsTheBestTypeThatFits() {
        // DeepSeek-V3: experts 1.33 TB in bf16, ~0.67 TB in int8, ~0.37 TB in int4; ~35 GB on the GPU.
        const MachineFigures terabyte{1100 * kGB, 141 * kGB, "NVIDIA H200", 5000 * kGB, "/models"};
        QuantizationAdvice a = adviceFor("DeepSeek-V3", terabyte);
        QCOMPARE(a.choices.size(), 3);
        QCOMPARE(a.recommended, 1);  // int8
        QVERIFY(!a.choices[0].ramFits && a.choices[1].fits() && a.choices[2].fits());
        QVERIFY2(a.explanation.startsWith("int8") && a.explanation.contains("bf16 needs"), qPrintable(a.explanation));

        const MachineFigures workstation{512 * kGB, 141 * kGB, "NVIDIA H200", 5000 * kGB, "/models"};
        a = adviceFor("DeepSeek-V3", workstation);
        QCOMPARE(a.recommended, 2);  // int4
        QVERIFY2(a.explanation.contains("int8 needs") && a.explanation.contains("512.0 GB"), qPrintable(a.explanation));

        const MachineFigures bigDisk{2000 * kGB, 141 * kGB, "NVIDIA H200", 5000 * kGB, "/models"};
        QCOMPARE(adviceFor("DeepSeek-V3", bigDisk).recommended, 0);  // bf16

        // Nothing fits: each shortfall is named, with what to do.
        const MachineFigures desktop{128 * kGB, 24 * kGB, "RTX 4090", 5000 * kGB, "/models"};
        a = adviceFor("DeepSeek-V3", desktop);
        QCOMPARE(a.recommended, -1);
        QVERIFY(!a.choices[2].ramFits && !a.choices[2].vramFits && a.choices[2].diskFits);
        QVERIFY2(a.explanation.contains("does not fit") && a.explanation.contains("RAM") &&
                     a.explanation.contains("GPU memory") && a.explanation.contains("smaller model"),
                 qPrintable(a.explanation));

        // The disk must hold the download and the converted store; without the download only the store.
        const MachineFigures smallDisk{2000 * kGB, 141 * kGB, "NVIDIA H200", 900 * kGB, "/mnt/small"};
        a = adviceFor("DeepSeek-V3", smallDisk);
        QCOMPARE(a.recommended, -1);
        QVERIFY2(a.explanation.contains("/mnt/small") && a.explanation.contains("another disk"), qPrintable(a.explanation));
        QCOMPARE(adviceFor("DeepSeek-V3", smallDisk, false).recommended, 1);

        // No GPU: everything runs from RAM, and the advice says so.
        const MachineFigures cpuOnly{64 * kGB, 0, {}, 5000 * kGB, "/models"};
        a = adviceFor("Qwen3-30B-A3B", cpuOnly);
        QCOMPARE(a.recommended, 1);
        QCOMPARE(a.choices[1].vramBytes, 0ull);
        QCOMPARE(a.choices[1].ramBytes, a.choices[1].need.routedExpertBytes + a.choices[1].need.denseBytes +
                                            a.choices[1].need.kvCacheBytes);
        QVERIFY2(a.explanation.contains("No NVIDIA GPU"), qPrintable(a.explanation));
        QCOMPARE(placementSummary(a.choices[1], false), QStringLiteral("CPU only"));  // speed not measured
        QCOMPARE(a.choices[1].decodeCeiling, 0.0);

        // What runs where (the engine's placement rule) and the decode speed the memory allows: Qwen3-30B-A3B
        // int4 with a 16 GB GPU keeps about half its layers' experts there, and the CPU reads the rest.
        MachineFigures gamer{64 * kGB, 16 * kGB, "RTX", 5000 * kGB, "/models"};
        gamer.ramGbps = 80;
        a = adviceFor("Qwen3-30B-A3B", gamer);
        const QuantizationChoice& int4 = a.choices[2];
        QVERIFY(int4.fit.layersOnGpu > 0 && int4.fit.layersOnGpu < 48 && int4.fit.promptsStream);
        QCOMPARE(int4.decodeCeiling, 80e9 / static_cast<double>(int4.fit.ramBytesPerToken));
        const QString summary = placementSummary(int4, true);
        QVERIFY2(summary.startsWith(QString::number(int4.fit.layersOnGpu) + " of 48 layers on GPU · ≤ "),
                 qPrintable(summary));
        QVERIFY2(placementDetails(int4, gamer).contains("long prompts"), qPrintable(placementDetails(int4, gamer)));
        // On an H200 every layer fits: nothing read from RAM per token, no RAM-bound ceiling.
        a = adviceFor("Qwen3-30B-A3B", workstation);
        QCOMPARE(placementSummary(a.choices[2], true), QStringLiteral("all 48 layers on GPU"));

        // A GGUF file's sizes are unknown until it is imported: no table, no recommendation.
        a = adviseQuantization({}, false, workstation);
        QVERIFY(a.choices.isEmpty());
        QCOMPARE(a.recommended, -1);
        QVERIFY(a.explanation.contains("GGUF"));
    }

    void theQuantizationPageShowsTheAdviceForThisMachine() {
        Harness h;
        auto* q = quantizationPageOfDeepSeekV3(h);
        // The fake Hub does not know deepseek-ai/DeepSeek-V3: the listing's failure is shown, with a retry.
        QVERIFY(QTest::qWaitFor([&] { return q->errorLabel()->isVisible(); }, 10000));
        QVERIFY(q->errorLabel()->text().contains("deepseek-ai/DeepSeek-V3"));
        QVERIFY(!q->isComplete());
        // The shipped config still tells the sizes: 2 TB of RAM and an H200 take bf16.
        QCOMPARE(q->advice().recommended, 0);
        QCOMPARE(q->chosen(), 0);
        QCOMPARE(q->table()->item(0, 4)->text(), QStringLiteral("✓ recommended"));
        QVERIFY(q->table()->item(0, 1)->text().endsWith("TB"));
        // Where bf16's experts would run there: a few of the 58 layers fit beside the rest.
        QVERIFY2(q->table()->item(0, 5)->text().contains(" of 58 layers on GPU"), qPrintable(q->table()->item(0, 5)->text()));
    }

    // Settings' int8 KV cache counts in the figures of either path: RAM without a GPU, the GPU's memory
    // (with one layer's float32 rows) with one.
    void theAdviceCountsTheInt8KvCache() {
        for (const bool gpu : {false, true}) {
            Harness h(std::nullopt, gpu ? MachineFiguresProvider(bigMachine) : MachineFiguresProvider(noGpuMachine));
            EngineSettings engine = h.app->settings()->engine();
            engine.int8KvCache = true;
            h.app->settings()->setEngine(engine);
            auto* q = quantizationPageOfDeepSeekV3(h);
            QVERIFY(QTest::qWaitFor([&] { return q->errorLabel()->isVisible(); }, 10000));
            QCOMPARE(q->advice().choices.size(), 3);
            const tandem::Footprint& need = q->advice().choices[0].need;
            QVERIFY(need.kvCacheInt8Bytes > 0);
            QCOMPARE(need.kvCacheBytes, need.kvCacheInt8Bytes);
            if (gpu) {
                QVERIFY(need.kvCacheLayerBytes > 0);
                QCOMPARE(need.vramBytes, need.denseBytes + need.kvCacheInt8Bytes + need.kvCacheLayerBytes);
            } else {
                QCOMPARE(q->advice().choices[0].ramBytes, need.routedExpertBytes + need.denseBytes + need.kvCacheInt8Bytes);
            }
        }
    }

    void aRepositoryDownloadsConvertsLoadsAndOpensAChat() {
        Harness h;
        ModelWizard* w = h.openWizard();
        chooseRepository(w);
        auto* q = page<QuantizationPage>(w, ModelWizard::QuantizationId);
        // The repository's config.json is fetched first, into the download folder.
        QVERIFY(QTest::qWaitFor([&] { return q->isComplete(); }, 10000));
        const QString downloadDir = h.modelsFolder() + "/tandem-test--tiny-qwen3moe";
        QCOMPARE(h.hub->lastFiles.size(), 1);
        QCOMPARE(h.hub->lastFiles.first().path, QStringLiteral("config.json"));
        QVERIFY(QFileInfo::exists(downloadDir + "/config.json"));
        QCOMPARE(q->chosen(), 0);  // bf16 fits the big machine
        q->choose(2);
        w->next();  // commit: "Download"

        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::DownloadId));
        // Only what Tandem needs; config.json too, there already, as the downloader checks its content.
        QStringList requested;
        for (const auto& f : h.hub->lastFiles) requested << f.path;
        QVERIFY(requested.contains("config.json") && !requested.contains("README.md"));
        QVERIFY(!requested.contains("original/consolidated.00.pth"));
        QVERIFY(requested.contains("model-00001-of-00002.safetensors") && requested.contains("tokenizer.json"));
        QCOMPARE(h.hub->lastOutDir, downloadDir);
        const QString store = h.modelsFolder() + "/tandem-test--tiny-qwen3moe-int4";
        verifyLoadedWithNewChat(h, w, store);
        auto* download = page<DownloadPage>(w, ModelWizard::DownloadId);
        QCOMPARE(download->totalBar()->value(), download->totalBar()->maximum());
        for (int i = 0; i < download->fileList()->topLevelItemCount(); ++i)
            QCOMPARE(download->fileList()->topLevelItem(i)->text(2), QStringLiteral("done"));
        QCOMPARE(page<ConvertPage>(w, ModelWizard::ConvertId)->progressBar()->value(), 1000);
    }

    void aFailedDownloadSaysWhyAndTryAgainCarriesOn() {
        Harness h;
        h.hub->failWith = QStringLiteral("Hugging Face refused the download (403): accept the licence on the model's page.");
        ModelWizard* w = h.openWizard();
        chooseRepository(w);
        auto* q = page<QuantizationPage>(w, ModelWizard::QuantizationId);
        // The config.json fetch takes the failure; the page says so and offers to try again.
        QVERIFY(QTest::qWaitFor([&] { return q->errorLabel()->isVisible(); }, 10000));
        QVERIFY(q->errorLabel()->text().contains("accept the licence"));
        QVERIFY(!q->isComplete());
        QTest::mouseClick(q->retryButton(), Qt::LeftButton);
        QVERIFY(QTest::qWaitFor([&] { return q->isComplete(); }, 10000));

        h.hub->failWith = QStringLiteral("The connection to huggingface.co was lost (after 5 retries).");
        w->next();
        auto* download = page<DownloadPage>(w, ModelWizard::DownloadId);
        QVERIFY(QTest::qWaitFor([&] { return download->errorLabel()->isVisible(); }, 10000));
        QVERIFY(download->errorLabel()->text().contains("connection to huggingface.co was lost"));
        QVERIFY(download->retryButton()->isVisible());
        QVERIFY(!download->isComplete());
        QCOMPARE(h.app->settings()->modelWizardState().stage, ModelWizardState::Stage::Downloading);
        const int starts = h.hub->starts;
        QTest::mouseClick(download->retryButton(), Qt::LeftButton);
        QCOMPARE(h.hub->starts, starts + 1);
        verifyLoadedWithNewChat(h, w, h.modelsFolder() + "/tandem-test--tiny-qwen3moe-bf16");
    }

    void pauseResumeAndProgressOfADownload() {
        Harness h;
        h.hub->holdDownloads = true;
        ModelWizard* w = h.openWizard();
        chooseRepository(w);
        auto* q = page<QuantizationPage>(w, ModelWizard::QuantizationId);
        QVERIFY(QTest::qWaitFor([&] { return q->isComplete(); }, 10000));
        w->next();
        auto* download = page<DownloadPage>(w, ModelWizard::DownloadId);
        QVERIFY(h.hub->current);
        const QString first = QStringLiteral("model-00001-of-00002.safetensors");
        h.hub->current->deliverOneFile(first);
        // Total progress counts the first file; speed and time left.
        QVERIFY(download->totalBar()->value() > 0 && download->totalBar()->value() < download->totalBar()->maximum());
        QVERIFY2(download->statusLabel()->text().contains("2.5 MB/s") && download->statusLabel()->text().contains("left"),
                 qPrintable(download->statusLabel()->text()));
        QCOMPARE(download->fileList()->findItems(first, Qt::MatchExactly).first()->text(2), QStringLiteral("done"));

        QTest::mouseClick(download->pauseButton(), Qt::LeftButton);
        QCOMPARE(h.hub->pauses, 1);
        QVERIFY(download->isPaused());
        QCOMPARE(download->pauseButton()->text(), QStringLiteral("Resume"));
        QVERIFY(download->statusLabel()->text().startsWith("Paused"));
        QTest::mouseClick(download->pauseButton(), Qt::LeftButton);
        QCOMPARE(h.hub->resumes, 1);
        QVERIFY(!download->isPaused());

        h.hub->current->finishAll();
        verifyLoadedWithNewChat(h, w, h.modelsFolder() + "/tandem-test--tiny-qwen3moe-bf16");
    }

    void cancellingADownloadStartsOver() {
        Harness h;
        h.hub->holdDownloads = true;
        ModelWizard* w = h.openWizard();
        chooseRepository(w);
        QVERIFY(QTest::qWaitFor([&] { return w->currentPage()->isComplete(); }, 10000));
        w->next();
        auto* download = page<DownloadPage>(w, ModelWizard::DownloadId);
        QTest::mouseClick(download->cancelButton(), Qt::LeftButton);
        QCOMPARE(h.hub->cancels, 1);
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ChooseId));
        QCOMPARE(h.app->settings()->modelWizardState().stage, ModelWizardState::Stage::None);
    }

    void aDownloadResumesAfterTheWizardAndTheAppWereClosed() {
        Harness h;
        h.hub->holdDownloads = true;
        ModelWizard* w = h.openWizard();
        chooseRepository(w);
        QVERIFY(QTest::qWaitFor([&] { return w->currentPage()->isComplete(); }, 10000));
        page<QuantizationPage>(w, ModelWizard::QuantizationId)->choose(2);
        w->next();
        const QString first = QStringLiteral("model-00001-of-00002.safetensors");
        h.hub->current->deliverOneFile(first);
        const int requestedFirstTime = h.hub->lastFiles.size();

        // Closing the wizard pauses the download and keeps where it was.
        w->reject();
        QCOMPARE(h.hub->pauses, 1);
        QVERIFY(QTest::qWaitFor([&] { return h.app->window()->modelWizard() == nullptr; }, 10000));
        const ModelWizardState saved = h.app->settings()->modelWizardState();
        QCOMPARE(saved.stage, ModelWizardState::Stage::Downloading);
        QCOMPARE(saved.repo, kRepo);
        QCOMPARE(saved.experts, QStringLiteral("int4"));

        // The app ends and starts again: the wizard opens by itself and offers to carry on.
        h.stop();
        h.hub->holdDownloads = false;
        h.start();
        QVERIFY(QTest::qWaitFor([&] { return h.app->window()->modelWizard() != nullptr; }, 10000));
        w = h.app->window()->modelWizard();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ResumeId));
        auto* resume = page<ResumePage>(w, ModelWizard::ResumeId);
        QVERIFY(resume->carryOnButton()->isChecked());
        QVERIFY(resume->carryOnButton()->text().contains("downloading"));
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::DownloadId));
        // Every file is asked for again, into the same folder: the downloader checks the one in place.
        QCOMPARE(h.hub->lastFiles.size(), requestedFirstTime);
        QVERIFY(std::any_of(h.hub->lastFiles.begin(), h.hub->lastFiles.end(), [&](const auto& f) { return f.path == first; }));
        QCOMPARE(h.hub->lastOutDir, h.modelsFolder() + "/tandem-test--tiny-qwen3moe");
        verifyLoadedWithNewChat(h, w, h.modelsFolder() + "/tandem-test--tiny-qwen3moe-int4");
    }

    void aConversionResumesFromTheSavedState() {
        Harness h;
        QTemporaryDir work;
        const QString source = work.filePath("tiny-qwen3moe");
        QVERIFY(QDir().mkpath(source) && test::copyFixture("tiny-qwen3moe", source));
        const QString store = work.filePath("tiny-qwen3moe-int8");
        // An interrupted conversion: the first MoE layer is done, the rest is not.
        const auto cut = tandem::convertModel({source.toStdString(), store.toStdString(), tandem::ExpertPrecision::INT8, 2},
                                              [](const tandem::ConvertProgress& p) { return p.layer < 1; });
        QVERIFY(cut.cancelled);
        h.app->settings()->setModelWizardState(
            {ModelWizardState::Stage::Converting, "tiny-qwen3moe", {}, {}, {}, source, store, "int8"});

        ModelWizard* w = h.openWizard();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ResumeId));
        QVERIFY(page<ResumePage>(w, ModelWizard::ResumeId)->carryOnButton()->text().contains("converting"));
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ConvertId));
        auto* convert = page<ConvertPage>(w, ModelWizard::ConvertId);
        QVERIFY(QTest::qWaitFor([&] { return convert->statusLabel()->text().contains("kept from before") || convert->isComplete(); }, 60000));
        verifyLoadedWithNewChat(h, w, store);
    }

    void closingTheWizardDuringAConversionDoesNotWaitForIt() {
        Harness h;
        ModelWizard* w = h.openWizard();
        auto* choose = page<ChoosePage>(w, ModelWizard::ChooseId);
        choose->localEdit()->setText(test::fixturePath("tiny-qwen3moe"));
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::QuantizationId));
        QVERIFY(QTest::qWaitFor([&] { return w->currentPage()->isComplete(); }, 10000));
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ConvertId));
        auto* convert = page<ConvertPage>(w, ModelWizard::ConvertId);
        QPointer<ConvertJob> job = convert->job();
        QVERIFY(QTest::qWaitFor([&] { return convert->progressBar()->value() > 0; }, 60000));
        const QString store = w->plan().storeFolder;
        // The wizard goes at once; the job, which would have joined its thread, lives on until it stops.
        delete w;
        QVERIFY(job);
        QVERIFY(QTest::qWaitFor([&] { return job.isNull(); }, 60000));
        // What was converted stays for a resume (or the store is complete, had it finished first).
        if (QFileInfo::exists(store + ".partial"))
            QCOMPARE(h.app->settings()->modelWizardState().stage, ModelWizardState::Stage::Converting);
        else
            QVERIFY(QFileInfo::exists(store + "/tandem-store.json"));
    }

    void startingOverForgetsTheSavedState() {
        Harness h;
        h.app->settings()->setModelWizardState({ModelWizardState::Stage::Downloading, "x", kRepo, "main", "[]", "/nowhere", {}, "int4"});
        ModelWizard* w = h.openWizard();
        auto* resume = page<ResumePage>(w, ModelWizard::ResumeId);
        resume->startOverButton()->setChecked(true);
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ChooseId));
        QCOMPARE(h.app->settings()->modelWizardState().stage, ModelWizardState::Stage::None);
    }

    void aLocalFolderIsConvertedLoadedAndChattedWith() {
        Harness h;
        ModelWizard* w = h.openWizard();
        auto* choose = page<ChoosePage>(w, ModelWizard::ChooseId);
        choose->localEdit()->setText(test::fixturePath("tiny-qwen3moe"));
        QVERIFY(choose->localButton()->isChecked());
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::QuantizationId));
        auto* q = page<QuantizationPage>(w, ModelWizard::QuantizationId);
        QVERIFY(q->isComplete());
        QCOMPARE(w->button(QWizard::CommitButton)->text(), QStringLiteral("Convert"));
        // Nothing to download: the disk needed is the store alone.
        QCOMPARE(q->advice().choices[1].diskBytes, q->advice().choices[1].need.storeBytes);
        q->choose(1);
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ConvertId));
        QCOMPARE(h.hub->starts, 0);
        verifyLoadedWithNewChat(h, w, h.modelsFolder() + "/tiny-qwen3moe-int8");

        // The new chat answers.
        w->accept();
        // Greedy: the app seeds each answer afresh, and a fixture's random weights can sample an end of
        // turn or a reasoning tag first, which leaves no visible answer.
        SamplingDefaults sampling = h.app->settings()->sampling();
        sampling.maxNewTokens = 8;
        sampling.useModelRecommendation = false;
        sampling.sampling = {};
        h.app->settings()->setSampling(sampling);
        QVERIFY(h.app->chat()->send(QStringLiteral("Hello")));
        QVERIFY(test::waitForIdle(*h.app));
        QCOMPARE(h.app->messages()->rowCount(), 2);
        QVERIFY(!h.app->messages()->message(1).content.isEmpty());
    }

    void aConvertedStoreLoadsWithoutConverting() {
        Harness h;
        QTemporaryDir work;
        const QString store = work.filePath("tiny-int4");
        tandem::convertModel({test::fixturePath("tiny-qwen3moe").toStdString(), store.toStdString(), tandem::ExpertPrecision::INT4, 2});
        ModelWizard* w = h.openWizard();
        page<ChoosePage>(w, ModelWizard::ChooseId)->localEdit()->setText(store);
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::DoneId));
        verifyLoadedWithNewChat(h, w, store);
    }

    void aGgufFileGoesToTheConverterAsItIs() {
        Harness h;
        QTemporaryDir work;
        const QString gguf = work.filePath("model-Q4_K_M.gguf");
        QVERIFY(test::writeFile(gguf, QByteArray("not really a GGUF file")));
        ModelWizard* w = h.openWizard();
        page<ChoosePage>(w, ModelWizard::ChooseId)->localEdit()->setText(gguf);
        w->next();
        auto* q = page<QuantizationPage>(w, ModelWizard::QuantizationId);
        // Its sizes are unknown before import: no figures and no recommendation, the user chooses.
        QVERIFY(q->advice().choices.isEmpty());
        QVERIFY(q->explanation()->text().contains("GGUF"));
        QCOMPARE(q->chosen(), -1);
        QVERIFY(!q->isComplete());
        q->choose(2);
        QVERIFY(q->isComplete());
        w->next();
        QCOMPARE(w->plan().convertSource(), gguf);
        QCOMPARE(w->plan().storeFolder, h.modelsFolder() + "/model-Q4_K_M-int4");
        // The converter gets the file itself and reports what it makes of it.
        auto* convert = page<ConvertPage>(w, ModelWizard::ConvertId);
        QVERIFY(QTest::qWaitFor([&] { return convert->errorLabel()->isVisible() || convert->isComplete(); }, 60000));
        QVERIFY(!convert->isComplete());
        QVERIFY2(convert->errorLabel()->text().contains("model-Q4_K_M.gguf"), qPrintable(convert->errorLabel()->text()));
        QCOMPARE(convert->stopButton()->text(), QStringLiteral("Try Again"));
    }

    void aPathThatIsNoModelIsExplained() {
        Harness h;
        QTemporaryDir empty;
        ModelWizard* w = h.openWizard();
        auto* choose = page<ChoosePage>(w, ModelWizard::ChooseId);
        choose->localEdit()->setText(empty.path());
        w->next();
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ChooseId));
        QVERIFY(choose->errorLabel()->isVisible());
        QVERIFY(choose->errorLabel()->text().contains("is not a model"));
        choose->localEdit()->setText(empty.filePath("missing"));
        w->next();
        QVERIFY(choose->errorLabel()->text().contains("does not exist"));
    }

    void withoutAModelTheAppOpensTheWizard() {
        Harness h{QString()};
        QCOMPARE(h.app->model()->state(), ModelController::State::NoModel);
        QVERIFY(QTest::qWaitFor([&] { return h.app->window()->modelWizard() != nullptr; }, 10000));
        ModelWizard* w = h.app->window()->modelWizard();
        QVERIFY(w->isVisible());
        QCOMPARE(w->currentId(), static_cast<int>(ModelWizard::ChooseId));
        QVERIFY(!h.app->window()->banner()->isVisible());  // no error: there is simply no model yet
    }

    void aModelFolderThatIsGoneOpensTheWizard() {
        Harness h{QString()};
        h.stop();
        {
            QSettings ini(h.dir.filePath("settings.ini"), QSettings::IniFormat);
            ini.setValue("engine/modelDir", h.dir.filePath("deleted-model"));
        }
        h.start(QString());
        QCOMPARE(h.app->model()->state(), ModelController::State::NoModel);
        QVERIFY(h.app->window()->emptyState()->isVisible());
        QVERIFY(QTest::qWaitFor([&] { return h.app->window()->modelWizard() != nullptr; }, 10000));
        QVERIFY(h.app->model()->lastError().contains("is gone"));
        // The window's own ways in: the empty page's button and File > Get a Model….
        h.app->window()->modelWizard()->reject();
        QVERIFY(QTest::qWaitFor([&] { return h.app->window()->modelWizard() == nullptr; }, 10000));
        QAction* get = h.app->window()->findChild<QAction*>("getModelAction");
        QVERIFY(get);
        get->trigger();
        QVERIFY(h.app->window()->modelWizard() && h.app->window()->modelWizard()->isVisible());
    }
};

QTEST_MAIN(ModelWizardTest)
#include "tst_model_wizard.moc"
