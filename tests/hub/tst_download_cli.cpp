// tandem-cli download against the fake Hub, end to end: download -> verify -> load -> generate, the
// --include filter, a gated repository, a fault on the way, and Ctrl-C then the same command resuming.
#include <QFileInfo>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include <csignal>

#include "hub_test_helpers.h"

using namespace tandem::test;

class TestDownloadCli : public QObject {
    Q_OBJECT

    struct Result {
        int exitCode;
        QString out, err;
    };

    // The fake Hub answers on its own thread, so waiting here blocks nothing it needs.
    static Result run(const QStringList& args) {
        QProcess p;
        p.start(cliPath(), args);
        if (!p.waitForFinished(300000)) return {-1, {}, "timed out"};
        return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
                QString::fromUtf8(p.readAllStandardError())};
    }

    QStringList download(const QString& out, const QStringList& more = {}) const {
        return QStringList{"download", kRepo, "--endpoint", server_.endpoint(), "--out", out} + more;
    }

    FakeHubServer server_;

private slots:
    void initTestCase() { server_.addRepo(kRepo, fixtureDir()); }

    void downloadThenGenerate() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("model");
        server_.injectFaults(kRepo, kShard, {HubFault::CorruptByte});
        const Result r = run(download(out, {"--parallel", "2"}));
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("download: 100%") && r.err.contains("MB/s") && r.err.contains("ETA") &&
                     r.err.contains(QString("%1/%1 files").arg(filesUnder(fixtureDir()).size())),
                 qPrintable(r.err));
        QVERIFY2(r.err.contains(kShard + " arrived damaged"), qPrintable(r.err));
        QVERIFY2(r.out.contains("is complete in " + out), qPrintable(r.out));
        QString why;
        QVERIFY2(sameAsFixture(out, &why), qPrintable(why));
        QCOMPARE(filesUnder(out), filesUnder(fixtureDir()));

        // The downloaded folder loads and generates exactly what the fixture does.
        const Golden golden = loadGolden("tiny-qwen3moe", "chat");
        QByteArray ids;
        for (const int id : golden.promptIds) ids += QByteArray::number(id) + ' ';
        QVERIFY(writeFile(tmp.filePath("ids.txt"), ids));
        auto eval = [&](const QString& model, const QString& logits) {
            return run({"eval", "--model", model, "--ids-file", tmp.filePath("ids.txt"), "--new-tokens", "6", "--logits-out",
                        logits, "--threads", "1", "--device", "cpu"});
        };
        const Result fromDownload = eval(out, tmp.filePath("a.bin"));
        QVERIFY2(fromDownload.exitCode == 0, qPrintable(fromDownload.err));
        const Result fromFixture = eval(fixtureDir(), tmp.filePath("b.bin"));
        QVERIFY2(fromFixture.exitCode == 0, qPrintable(fromFixture.err));
        QCOMPARE(fromDownload.out, fromFixture.out);
        QCOMPARE(fromDownload.out.trimmed().split(' ').size(), 6);
        QVERIFY(readFile(tmp.filePath("a.bin")) == readFile(tmp.filePath("b.bin")));

        // Run again: every file is checked in place and nothing is fetched.
        server_.clearRequests();
        const Result again = run(download(out));
        QVERIFY2(again.exitCode == 0, qPrintable(again.err));
        QVERIFY2(again.err.contains("(0.0 MB to fetch)"), qPrintable(again.err));
        QVERIFY(server_.requestsFor("/resolve/").isEmpty());
    }

    void includeFilters() {
        QTemporaryDir tmp;
        Result r = run(download(tmp.path(), {"--include", "*.json", "--include", "tokenizer*"}));
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(filesUnder(tmp.path()), (QStringList{"config.json", "generation_config.json", "golden.json",
                                                      "model.safetensors.index.json", "tokenizer.json",
                                                      "tokenizer_config.json"}));
        r = run(download(tmp.path(), {"--include", "*.gguf"}));
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("No file of " + kRepo + " matches --include *.gguf") && r.err.contains("config.json"),
                 qPrintable(r.err));
    }

    void gatedNeedsAToken() {
        server_.addRepo("org/gated", fixtureDir());
        server_.setAccess("org/gated", RepoAccess::Gated, "hf_granted");
        QTemporaryDir tmp;
        const QStringList base{"download", "org/gated", "--endpoint", server_.endpoint(), "--out", tmp.path(),
                               "--include", "config.json"};
        Result r = run(base);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("org/gated needs you to sign in") && r.err.contains("--token"), qPrintable(r.err));
        r = run(base + QStringList{"--token", "hf_someone_else"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("accept the conditions"), qPrintable(r.err));
        r = run(base + QStringList{"--token", "hf_granted"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(readFile(tmp.filePath("config.json")), readFile(fixtureDir() + "/config.json"));
    }

    void userErrors() {
        Result r = run({"download", "--out", "x"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("needs the repository first"), qPrintable(r.err));
        r = run({"download", kRepo, "--endpoint", server_.endpoint()});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--out"), qPrintable(r.err));
        QTemporaryDir tmp;
        server_.addListedOnly("org/huge", "model.safetensors", qint64(1) << 49);  // 563 TB
        r = run({"download", "org/huge", "--endpoint", server_.endpoint(), "--out", tmp.path()});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("Not enough disk space"), qPrintable(r.err));
        // A size that is no byte count is named as such, not shown as a wrapped-around number.
        server_.addListedEntry("org/nonsense", QJsonObject{{"type", "file"}, {"path", "model.safetensors"},
                                                           {"size", 1e30}, {"oid", QString(40, 'b')}});
        r = run({"download", "org/nonsense", "--endpoint", server_.endpoint(), "--out", tmp.path()});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("'model.safetensors' with size 1e+30, which is no number of bytes") &&
                     !r.err.contains("-9223372036854775808"),
                 qPrintable(r.err));
        QVERIFY(QDir(tmp.path()).isEmpty(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot));
    }

    void ctrlCKeepsPartialFilesAndTheSameCommandResumes() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("model");
        server_.setSlowPace(4 * 1024, 20);
        server_.injectFaults(kRepo, kShard, {HubFault::Slow});
        server_.clearRequests();
        QProcess p;
        p.start(cliPath(), download(out, {"--include", kShard}));
        QVERIFY(p.waitForStarted());
        const QString staging = out + "/.tandem-download";
        QTRY_VERIFY_WITH_TIMEOUT(!filesUnder(out).filter(".part").isEmpty() &&
                                     QFileInfo(out + "/" + filesUnder(out).filter(".part").first()).size() > 0,
                                 60000);
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 130);
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QVERIFY2(err.contains("interrupted") && err.contains("Run the same command again to resume"), qPrintable(err));
        QVERIFY(!QFile::exists(out + "/" + kShard));
        const QStringList partial = filesUnder(out).filter(".part");
        QCOMPARE(partial.size(), 1);
        const qint64 kept = QFileInfo(out + "/" + partial.first()).size();
        QVERIFY(kept > 0);

        const Result r = run(download(out, {"--include", kShard}));
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QCOMPARE(readFile(out + "/" + kShard), readFile(fixtureDir() + "/" + kShard));
        QVERIFY(!QFileInfo::exists(staging));
        QList<QByteArray> ranges;
        for (const HubRequest& req : server_.requestsFor(kShard))
            if (req.cdn) ranges << req.range;
        QCOMPARE(ranges.last(), "bytes=" + QByteArray::number(kept) + "-");
    }
};

QTEST_GUILESS_MAIN(TestDownloadCli)
#include "tst_download_cli.moc"
