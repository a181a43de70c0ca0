// The Hub client's listing, its messages for 401/403/404, settings from the environment, --include
// patterns and the disk space check.
#include <QJsonObject>
#include <QJsonValue>
#include <QTcpServer>
#include <QTemporaryDir>

#include <limits>

#include "hub_test_helpers.h"

using namespace tandem::test;
using tandem::hub::HubClient;
using tandem::hub::HubSettings;
using tandem::hub::RepoFile;

class TestHubClient : public QObject {
    Q_OBJECT

    // The failure message of listing REPO, or an empty string when it listed.
    static QString listingFailure(const HubSettings& settings, const QString& repo, const QString& revision = "main") {
        HubClient client(settings);
        QSignalSpy listed(&client, &HubClient::filesListed);
        QSignalSpy failed(&client, &HubClient::failed);
        client.listFiles(repo, revision);
        if (!QTest::qWaitFor([&] { return !listed.isEmpty() || !failed.isEmpty(); }, 30000)) return "hung";
        return failed.isEmpty() ? QString() : failed.first().first().toString();
    }

private slots:
    void listsTheFixtureWithSizesAndHashes() {
        FakeHubServer server;
        server.addRepo(kRepo, fixtureDir());
        server.setTreePageSize(3);  // several pages, chained by Link headers
        const QList<RepoFile> files = listRepo(fastSettings(server));
        QStringList paths;
        for (const RepoFile& f : files) paths << f.path;
        paths.sort();
        QCOMPARE(paths, filesUnder(fixtureDir()));
        QVERIFY(server.requestsFor("/tree/main").size() > 1);
        for (const RepoFile& f : files) {
            const QByteArray bytes = readFile(fixtureDir() + "/" + f.path);
            QCOMPARE(f.size, bytes.size());
            if (f.path.endsWith(".safetensors")) {
                QCOMPARE(f.sha256, QString::fromLatin1(QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex()));
                QVERIFY(f.gitOid.isEmpty());
            } else {
                QVERIFY(f.sha256.isEmpty());
                QCOMPARE(f.gitOid.size(), 40);
            }
        }
    }

    void anUnusableEndpointIsExplained() {
        HubSettings settings;
        settings.endpoint = "hf-mirror.example/";  // no scheme: meant as https
        QCOMPARE(tandem::hub::resolvedSettings(settings).endpoint, QString("https://hf-mirror.example"));
        for (const QString endpoint : {"ftp://hf-mirror.example", "https://", "http:// spaces here"}) {
            settings.endpoint = endpoint;
            const QString m = listingFailure(settings, kRepo);
            QVERIFY2(m.contains("is not an address to download from") && m.contains("https://"), qPrintable(m));
            QTemporaryDir out;
            tandem::hub::DownloadJob job(settings, kRepo, "main", {RepoFile{"config.json", 2, {}, {}}}, out.path());
            const JobOutcome r = waitForEnd(job);
            QVERIFY2(r.failure.contains("is not an address to download from"), qPrintable(r.failure));
        }
    }

    void aNextPageElsewhereIsNotFollowed() {
        FakeHubServer server;
        server.addRepo(kRepo, fixtureDir());
        server.setTreePageSize(3);
        server.setNextPageHost("localhost");  // the same server under another origin
        HubSettings settings = fastSettings(server);
        settings.token = "hf_secret";
        const QString m = listingFailure(settings, kRepo);
        QVERIFY2(m.contains("continues at another site") && m.contains("http://localhost:"), qPrintable(m));
        QCOMPARE(server.requestsFor("/tree/main").size(), 1);
    }

    void revisionWithSlashAndNestedFiles() {
        FakeHubServer server;
        server.addFile(kRepo, "sub/dir/notes.txt", "hello", false, "refs/pr/1");
        const QList<RepoFile> files = listRepo(fastSettings(server), kRepo, "refs/pr/1");
        QCOMPARE(files.size(), 1);  // folders are not files
        QCOMPARE(files.first().path, QString("sub/dir/notes.txt"));
        QVERIFY(server.requests().first().target.contains("/tree/refs%2Fpr%2F1?"));
    }

    void explainsAccessProblems() {
        FakeHubServer server;
        server.addRepo("org/gated", fixtureDir());
        server.setAccess("org/gated", RepoAccess::Gated, "hf_granted");
        server.addRepo("org/private", fixtureDir());
        server.setAccess("org/private", RepoAccess::Private, "hf_mine");
        HubSettings anonymous = fastSettings(server);

        QString m = listingFailure(anonymous, "org/gated");
        QVERIFY2(m.contains("needs you to sign in") && m.contains("/settings/tokens"), qPrintable(m));
        HubSettings other = anonymous;
        other.token = "hf_other";
        m = listingFailure(other, "org/gated");
        QVERIFY2(m.contains("gated") && m.contains("accept the conditions") && m.contains(server.endpoint() + "/org/gated"),
                 qPrintable(m));
        HubSettings granted = anonymous;
        granted.token = "hf_granted";
        QCOMPARE(listingFailure(granted, "org/gated"), QString());
        QVERIFY(server.requestsFor("org/gated").last().authorization == "Bearer hf_granted");

        m = listingFailure(other, "org/private");
        QVERIFY2(m.contains("did not accept the token"), qPrintable(m));
        HubSettings mine = anonymous;
        mine.token = "hf_mine";
        QCOMPARE(listingFailure(mine, "org/private"), QString());

        m = listingFailure(anonymous, "org/nothing-here");
        QVERIFY2(m.contains("org/nothing-here") && m.contains("no repository has that name"), qPrintable(m));
        m = listingFailure(anonymous, "org/private", "v9");
        QVERIFY2(m.contains("needs you to sign in"), qPrintable(m));  // private: not even the revision shows
        server.addRepo("org/open", fixtureDir());
        m = listingFailure(anonymous, "org/open", "v9");
        QVERIFY2(m.contains("no branch, tag or commit 'v9'"), qPrintable(m));
        m = listingFailure(anonymous, "not a repo!");
        QVERIFY2(m.contains("is not a repository id"), qPrintable(m));
    }

    void unreachableEndpointAndUnsafeNames() {
        QTcpServer closed;
        QVERIFY(closed.listen(QHostAddress::LocalHost));
        const quint16 port = closed.serverPort();
        closed.close();
        HubSettings settings;
        settings.endpoint = QString("http://127.0.0.1:%1/").arg(port);
        settings.retryDelayMs = 1;
        settings.maxRetries = 1;
        QString m = listingFailure(settings, kRepo);
        QVERIFY2(m.contains("Could not reach 127.0.0.1") && m.contains("HF_ENDPOINT"), qPrintable(m));

        FakeHubServer server;
        server.addFile(kRepo, "config.json", "{}", false);
        server.addListedOnly(kRepo, "../outside.bin", 10);
        m = listingFailure(fastSettings(server), kRepo);
        QVERIFY2(m.contains("outside the download folder") && m.contains("../outside.bin"), qPrintable(m));

        // Check values name the partial files: one that is not a hex digest fails the listing.
        FakeHubServer badSha;
        badSha.addListedOnly(kRepo, "model.safetensors", 10, "main", "../../../../tmp/evil");
        m = listingFailure(fastSettings(badSha), kRepo);
        QVERIFY2(m.contains("malformed check value") && m.contains("../../../../tmp/evil"), qPrintable(m));
        FakeHubServer badOid;
        badOid.addListedOnly(kRepo, "config.json", 10, "main", {}, "../../x");
        m = listingFailure(fastSettings(badOid), kRepo);
        QVERIFY2(m.contains("malformed check value") && m.contains("config.json"), qPrintable(m));
    }

    void listedSizesMustBeByteCounts_data() {
        QTest::addColumn<QJsonValue>("size");
        QTest::addColumn<QJsonValue>("lfsSize");  // undefined: a small file, listed without lfs
        QTest::addColumn<QString>("words");
        const QJsonValue small = QJsonValue::Undefined;
        QTest::newRow("1e30") << QJsonValue(1e30) << small << "size 1e+30";
        QTest::newRow("negative") << QJsonValue(-5) << small << "size -5";
        QTest::newRow("fraction") << QJsonValue(10.5) << small << "size 10.5";
        QTest::newRow("past the bound") << QJsonValue(double(qint64(1) << 51)) << small << "size 2251799813685248";
        QTest::newRow("a string") << QJsonValue("10") << small << "size \"10\"";
        QTest::newRow("missing") << QJsonValue(QJsonValue::Undefined) << small << "size missing";
        QTest::newRow("lfs.size 1e30") << QJsonValue(134) << QJsonValue(1e30) << "lfs.size 1e+30";
        QTest::newRow("lfs.size negative") << QJsonValue(134) << QJsonValue(-1) << "lfs.size -1";
        QTest::newRow("lfs.size null") << QJsonValue(134) << QJsonValue(QJsonValue::Null) << "lfs.size null";
    }
    void listedSizesMustBeByteCounts() {
        QFETCH(QJsonValue, size);
        QFETCH(QJsonValue, lfsSize);
        QFETCH(QString, words);
        FakeHubServer server;
        server.addFile(kRepo, "config.json", "{}", false);
        QJsonObject entry{{"type", "file"}, {"path", "model.safetensors"}, {"oid", QString(40, 'b')}};
        if (!size.isUndefined()) entry.insert("size", size);
        if (!lfsSize.isUndefined())
            entry.insert("lfs", QJsonObject{{"oid", QString(64, 'a')}, {"size", lfsSize}, {"pointerSize", 134}});
        server.addListedEntry(kRepo, entry);
        const QString m = listingFailure(fastSettings(server), kRepo);
        QVERIFY2(m.contains("'model.safetensors' with " + words + ", which is no number of bytes") &&
                     m.contains("1.13 PB") && m.contains("nothing was downloaded"),
                 qPrintable(m));
    }

    void aListingPastAPetabyteIsRefused() {
        // Each size is a byte count, but together they are more than any repository holds (and would
        // overflow a sum soon after).
        FakeHubServer server;
        for (const QString name : {"a.safetensors", "b.safetensors"})
            server.addListedEntry(kRepo, QJsonObject{{"type", "file"}, {"path", name}, {"size", double(qint64(1) << 50)},
                                                     {"oid", QString(40, 'b')}});
        const QString m = listingFailure(fastSettings(server), kRepo);
        QVERIFY2(m.contains("more than 1.13 PB of files for " + kRepo), qPrintable(m));
        // One file of exactly the bound is fine.
        FakeHubServer one;
        one.addListedEntry(kRepo, QJsonObject{{"type", "file"}, {"path", "a.bin"}, {"size", double(qint64(1) << 50)},
                                              {"oid", QString(40, 'b')}});
        const QList<RepoFile> files = listRepo(fastSettings(one));
        QCOMPARE(files.size(), 1);
        QCOMPARE(files.first().size, qint64(1) << 50);
    }

    void aDownloadRefusesSizesThatAreNoByteCounts() {
        // A file list that did not come from the listing (the wizard's saved state) is checked as well.
        QTemporaryDir out;
        for (const qint64 size : {qint64(-5), (qint64(1) << 50) + 1, std::numeric_limits<qint64>::min()}) {
            FakeHubServer server;
            tandem::hub::DownloadJob job(fastSettings(server), kRepo, "main",
                                         {RepoFile{"config.json", size, {}, QString(40, 'b')}}, out.path());
            const JobOutcome r = waitForEnd(job);
            QVERIFY(!r.finished);
            QVERIFY2(r.failure.contains("the size of 'config.json' is " + QString::number(size) + " bytes") &&
                         r.failure.contains("nothing was downloaded"),
                     qPrintable(r.failure));
            QVERIFY(server.requests().isEmpty());
        }
        // Sizes each fine, too many bytes together.
        FakeHubServer server;
        const qint64 half = qint64(1) << 49;
        tandem::hub::DownloadJob job(fastSettings(server), kRepo, "main",
                                     {RepoFile{"a.bin", half, {}, {}}, RepoFile{"b.bin", half, {}, {}},
                                      RepoFile{"c.bin", 1, {}, {}}},
                                     out.path());
        const JobOutcome r = waitForEnd(job);
        QVERIFY2(r.failure.contains("add up to more than 1.13 PB"), qPrintable(r.failure));
        QVERIFY(server.requests().isEmpty());
        QVERIFY(QDir(out.path()).isEmpty(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot));
    }

    void pathsOutsideTheFolderAreRefused_data() {
        QTest::addColumn<QString>("path");
        QTest::newRow("parent") << "../outside.bin";
        QTest::newRow("parent inside") << "sub/../../outside.bin";
        QTest::newRow("parent last") << "sub/..";
        QTest::newRow("absolute") << "/etc/passwd";
        QTest::newRow("empty") << "";
        QTest::newRow("empty part") << "sub//config.json";
        QTest::newRow("trailing slash") << "sub/";
        QTest::newRow("dot") << "./config.json";
        QTest::newRow("dot inside") << "sub/./config.json";
        QTest::newRow("backslash") << "sub\\..\\..\\outside.bin";
        QTest::newRow("nul") << QString("config.json") + QChar(0) + ".txt";
    }
    void pathsOutsideTheFolderAreRefused() {
        QFETCH(QString, path);
        // By the listing...
        FakeHubServer server;
        server.addFile(kRepo, "config.json", "{}", false);
        server.addListedEntry(kRepo, QJsonObject{{"type", "file"}, {"path", path}, {"size", 10}, {"oid", QString(40, 'b')}});
        const QString m = listingFailure(fastSettings(server), kRepo);
        QVERIFY2(m.contains("would land outside the download folder") && m.contains("'" + path + "'"), qPrintable(m));
        // ... and by a download given such a list from elsewhere.
        QTemporaryDir out;
        tandem::hub::DownloadJob job(fastSettings(server), kRepo, "main", {RepoFile{path, 10, {}, QString(40, 'b')}},
                                     out.path());
        const JobOutcome r = waitForEnd(job);
        QVERIFY(!r.finished);
        QVERIFY2(r.failure.contains("is not a safe file name") && r.failure.contains("nothing was downloaded"),
                 qPrintable(r.failure));
        QVERIFY(server.requestsFor("/resolve/").isEmpty());
        QVERIFY(QDir(out.path()).isEmpty(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot));
    }

    void aDownloadRefusesMalformedCheckValues() {
        // A file list that did not come from the listing (a saved one, the CLI's) is checked as well.
        QTemporaryDir out;
        const QList<RepoFile> lists[] = {
            {RepoFile{"model.safetensors", 10, "../../../escape", {}}},
            {RepoFile{"config.json", 10, {}, "/abs/" + QString(40, 'b')}},
            {RepoFile{"config.json", 10, QString(64, 'A'), {}}},
        };
        for (const QList<RepoFile>& files : lists) {
            FakeHubServer server;
            tandem::hub::DownloadJob job(fastSettings(server), kRepo, "main", files, out.path());
            const JobOutcome r = waitForEnd(job);
            QVERIFY(!r.finished);
            QVERIFY2(r.failure.contains("hex digits") && r.failure.contains("nothing was downloaded"), qPrintable(r.failure));
            QVERIFY(server.requests().isEmpty());
        }
        QVERIFY(QDir(out.path()).isEmpty(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot));
    }

    void settingsFromTheEnvironment() {
        QTemporaryDir home;
        QVERIFY(writeFile(home.filePath("token"), "hf_from_file\n"));
        qputenv("HF_HOME", home.path().toUtf8());
        qputenv("HF_ENDPOINT", "https://mirror.example/");
        qunsetenv("HF_TOKEN");
        HubSettings s = tandem::hub::resolvedSettings({});
        QCOMPARE(s.endpoint, QString("https://mirror.example"));
        QCOMPARE(s.token, QString("hf_from_file"));
        qputenv("HF_TOKEN", "hf_from_env");
        QCOMPARE(tandem::hub::resolvedSettings({}).token, QString("hf_from_env"));
        HubSettings explicitOnes;
        explicitOnes.endpoint = "http://127.0.0.1:1";
        explicitOnes.token = "hf_given";
        s = tandem::hub::resolvedSettings(explicitOnes);
        QCOMPARE(s.endpoint, QString("http://127.0.0.1:1"));
        QCOMPARE(s.token, QString("hf_given"));

        // The ambient token goes to huggingface.co and to $HF_ENDPOINT only, not to another address.
        HubSettings typed;
        typed.endpoint = "https://other.example";
        QVERIFY(tandem::hub::resolvedSettings(typed).token.isEmpty());
        typed.endpoint = "https://huggingface.co/";
        QCOMPARE(tandem::hub::resolvedSettings(typed).token, QString("hf_from_env"));
        typed.endpoint = "https://mirror.example";
        QCOMPARE(tandem::hub::resolvedSettings(typed).token, QString("hf_from_env"));
        // No token in clear text over a network, not even one given; this machine is fine.
        qputenv("HF_ENDPOINT", "http://mirror.example");
        QVERIFY(tandem::hub::resolvedSettings({}).token.isEmpty());
        HubSettings plain;
        plain.endpoint = "http://mirror.example";
        plain.token = "hf_given";
        QVERIFY(tandem::hub::resolvedSettings(plain).token.isEmpty());
        plain.endpoint = "http://localhost:8080";
        QCOMPARE(tandem::hub::resolvedSettings(plain).token, QString("hf_given"));

        qunsetenv("HF_ENDPOINT");
        qunsetenv("HF_TOKEN");
        qputenv("HF_HOME", home.filePath("none").toUtf8());
        s = tandem::hub::resolvedSettings({});
        QCOMPARE(s.endpoint, QString("https://huggingface.co"));
        QVERIFY(s.token.isEmpty());
    }

    void includePatterns() {
        using tandem::hub::matchesGlob;
        QVERIFY(matchesGlob("config.json", "*.json"));
        QVERIFY(matchesGlob("sub/config.json", "*.json"));  // as Python's fnmatch: '*' crosses '/'
        QVERIFY(!matchesGlob("config.json.bak", "*.json"));
        QVERIFY(matchesGlob("model-00002-of-00003.safetensors", "model-0000[1-2]*"));
        QVERIFY(!matchesGlob("model-00003-of-00003.safetensors", "model-0000[1-2]*"));
        QVERIFY(matchesGlob("a.bin", "?.bin") && !matchesGlob("ab.bin", "?.bin"));
        QVERIFY(matchesGlob("x.txt", "[!a]*") && !matchesGlob("a.txt", "[!a]*"));
        QVERIFY(matchesGlob("[odd", "[odd"));  // an unclosed '[' is a character
        QVERIFY(matchesGlob("anything", "*") && matchesGlob("", "*") && !matchesGlob("", "?"));
        const QList<RepoFile> files{{"a.json", 1, {}, {}}, {"b.safetensors", 2, {}, {}}, {"c.txt", 3, {}, {}}};
        QCOMPARE(tandem::hub::filterFiles(files, {}).size(), 3);
        const auto kept = tandem::hub::filterFiles(files, {"*.json", "*.txt"});
        QCOMPARE(kept.size(), 2);
        QCOMPARE(kept[1].path, QString("c.txt"));
    }

    void diskSpace() {
        QTemporaryDir tmp;
        const auto fits = tandem::hub::checkDiskSpace(tmp.filePath("not/yet/made"), 1);
        QVERIFY(fits.enough);
        QVERIFY(fits.availableBytes > 0);
        QVERIFY(fits.message.isEmpty());
        const qint64 huge = qint64(1) << 60;
        const auto refused = tandem::hub::checkDiskSpace(tmp.path(), huge);
        QVERIFY(!refused.enough);
        QCOMPARE(refused.neededBytes, huge);
        QVERIFY2(refused.message.contains("Not enough disk space") && refused.message.contains("1.15 EB") &&
                     refused.message.contains("another disk"),
                 qPrintable(refused.message));

        // What is still to fetch: a file in place counts nothing, a partial file counts what it lacks.
        const QList<RepoFile> files{{"done.bin", 4, {}, {}}, {"half.bin", 10, QString(64, 'c'), {}}, {"new.bin", 7, {}, {}}};
        QVERIFY(writeFile(tmp.filePath("done.bin"), "1234"));
        QVERIFY(QDir().mkpath(tmp.filePath(".tandem-download")));
        QVERIFY(writeFile(tmp.filePath(".tandem-download/half.bin." + QString(64, 'c') + ".part"), "123"));
        QCOMPARE(tandem::hub::remainingDownloadBytes(files, tmp.path()), 7 + 7);
    }
};

QTEST_GUILESS_MAIN(TestHubClient)
#include "tst_hub_client.moc"
