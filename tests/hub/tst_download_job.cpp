// DownloadJob against the fake Hub: a clean download, every fault ending in a correct file or a clear
// message (never a wrong file in place), resume by a new job, pause, cancel, and the disk space check.
#include <QFileInfo>
#include <QTemporaryDir>

#include <algorithm>
#include <memory>

#include "hub_test_helpers.h"

using namespace tandem::test;
using tandem::hub::DownloadJob;
using tandem::hub::HubSettings;
using tandem::hub::RepoFile;

class TestDownloadJob : public QObject {
    Q_OBJECT

    std::unique_ptr<FakeHubServer> server_;
    std::unique_ptr<QTemporaryDir> out_;
    QList<RepoFile> files_;

    QString out() const { return out_->path(); }
    HubSettings settings() const { return fastSettings(*server_); }
    std::unique_ptr<DownloadJob> job(const HubSettings& s) const {
        return std::make_unique<DownloadJob>(s, kRepo, "main", files_, out());
    }
    std::unique_ptr<DownloadJob> job() const { return job(settings()); }
    RepoFile file(const QString& path) const {
        for (const RepoFile& f : files_)
            if (f.path == path) return f;
        qFatal("no %s in the listing", qPrintable(path));
    }
    QStringList partialFiles() const {
        return filesUnder(out()).filter(QRegularExpression("^\\.tandem-download/.*\\.part$"));
    }
    // The Range headers of the requests that carried SHARD's bytes (the CDN hop for an LFS file).
    // The notices less Qt's own: on a loaded machine Qt at times reports a connection the fake server
    // closes on purpose as "Connection closed" before it hands over the answer (about once in 40 runs
    // with another run beside it), which costs one retry at once, from the same byte.
    static QStringList withoutQtResends(const QStringList& notices) {
        QStringList ours;
        for (const QString& n : notices)
            if (!n.contains(": Connection closed; retrying")) ours << n;
        return ours;
    }

    QList<QByteArray> cdnRanges(const QString& path) const {
        QList<QByteArray> ranges;
        for (const HubRequest& r : server_->requestsFor(path))
            if (r.cdn) ranges << r.range;
        return ranges;
    }
    void expectComplete() {
        QString why;
        QVERIFY2(sameAsFixture(out(), &why), qPrintable(why));
        QCOMPARE(filesUnder(out()), filesUnder(fixtureDir()));  // nothing else, no staging folder
    }
    // FILE is not in place and no partial file of it stays.
    void expectNothingOf(const QString& path) {
        QVERIFY(!QFile::exists(out() + "/" + path));
        QVERIFY2(partialFiles().filter(path).isEmpty(), qPrintable(partialFiles().join(", ")));
    }

private slots:
    void init() {
        server_ = std::make_unique<FakeHubServer>();
        server_->addRepo(kRepo, fixtureDir());
        out_ = std::make_unique<QTemporaryDir>();
        files_ = listRepo(settings());
        server_->clearRequests();
    }

    void cleanDownloadMatchesTheFixture() {
        HubSettings s = settings();
        s.token = "hf_secret";
        auto j = job(s);
        QSignalSpy fileDone(j.get(), &DownloadJob::fileFinished);
        QSignalSpy progress(j.get(), &DownloadJob::progress);
        const JobOutcome r = waitForEnd(*j);
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QCOMPARE(fileDone.size(), files_.size());
        QVERIFY(!progress.isEmpty());
        QCOMPARE(progress.last().at(0).toLongLong(), progress.last().at(1).toLongLong());
        // The token goes to the Hub, never to the CDN an LFS file is redirected to.
        bool sawCdn = false;
        for (const HubRequest& r : server_->requests()) {
            QCOMPARE(r.authorization, r.cdn ? QByteArray() : QByteArray("Bearer hf_secret"));
            sawCdn = sawCdn || r.cdn;
        }
        QVERIFY(sawCdn);
    }

    void droppedConnectionResumesWithRange() {
        server_->injectFaults(kRepo, kShard, {HubFault::DropMidFile});
        server_->injectFaults(kRepo, "tokenizer.json", {HubFault::DropMidFile});  // a non-LFS file too
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        // Qt may send the first request again by itself when the connection closes; either way the
        // transfer goes on from where the partial file ends.
        const auto ranges = cdnRanges(kShard);
        QVERIFY(ranges.first().isEmpty());
        QCOMPARE(ranges.last(), "bytes=" + QByteArray::number(file(kShard).size / 2) + "-");
        QVERIFY(server_->requestsFor("tokenizer.json").last().range.startsWith("bytes="));
        QVERIFY2(r.notices.join("\n").contains(kShard + ": the connection ended"), qPrintable(r.notices.join("\n")));
    }

    void corruptedByteIsFetchedAgain() {
        server_->injectFaults(kRepo, kShard, {HubFault::CorruptByte});
        server_->injectFaults(kRepo, "config.json", {HubFault::CorruptByte});  // checked by its git blob id
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QCOMPARE(cdnRanges(kShard), QList<QByteArray>({{}, {}}));  // the second time from the first byte
        const QString notices = r.notices.join("\n");
        QVERIFY2(notices.contains(kShard + " arrived damaged (its sha256 is") &&
                     notices.contains("config.json arrived damaged (its git blob id is"),
                 qPrintable(notices));
    }

    void corruptedTwiceFailsWithNothingInPlace() {
        server_->injectFaults(kRepo, kShard, {HubFault::CorruptByte}, true);
        const JobOutcome r = waitForEnd(*job());
        QVERIFY(!r.finished);
        QVERIFY2(r.failure.contains(kShard + " arrived damaged twice") && r.failure.contains("nothing was put in place"),
                 qPrintable(r.failure));
        expectNothingOf(kShard);
    }

    void httpErrorsAreExplained_data() {
        QTest::addColumn<int>("fault");
        QTest::addColumn<QString>("words");
        QTest::newRow("404") << int(HubFault::NotFound) << "has no file '" + kShard + "' at revision 'main'";
        QTest::newRow("401") << int(HubFault::Unauthorized) << "needs you to sign in";
        QTest::newRow("403") << int(HubFault::Forbidden) << "is gated and this account has not been granted access";
    }
    void httpErrorsAreExplained() {
        QFETCH(int, fault);
        QFETCH(QString, words);
        server_->injectFaults(kRepo, kShard, {static_cast<HubFault>(fault)}, true);
        const JobOutcome r = waitForEnd(*job());
        QVERIFY(!r.finished);
        QVERIFY2(r.failure.contains(words), qPrintable(r.failure));
        expectNothingOf(kShard);
        QCOMPARE(server_->requestsFor(kShard).size(), 1);  // not retried: it would not help
    }

    void serverErrorsAndStallsAreRetried() {
        server_->injectFaults(kRepo, kShard, {HubFault::ServerError, HubFault::Stall});
        server_->injectFaults(kRepo, "config.json", {HubFault::Slow});
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        const QString notices = r.notices.join("\n");
        QVERIFY2(notices.contains(kShard + ": HTTP 500; retrying") && notices.contains(kShard + ": no data for 0.5 s"),
                 qPrintable(notices));
        QCOMPARE(cdnRanges(kShard).last(), "bytes=" + QByteArray::number(file(kShard).size / 2) + "-");
    }

    void serverIgnoringOrMisplacingRangeStartsOver_data() {
        QTest::addColumn<int>("fault");
        QTest::addColumn<QString>("words");
        QTest::newRow("ignores Range") << int(HubFault::IgnoreRange) << "does not resume downloads";
        QTest::newRow("wrong Content-Range") << int(HubFault::WrongRange) << "resumed at the wrong place";
    }
    void serverIgnoringOrMisplacingRangeStartsOver() {
        QFETCH(int, fault);
        QFETCH(QString, words);
        // The first request resumes a partial file, and the server answers it badly.
        const QString partial = out() + "/.tandem-download/" + kShard + "." + file(kShard).sha256 + ".part";
        QVERIFY(QDir().mkpath(QFileInfo(partial).absolutePath()));
        QVERIFY(writeFile(partial, readFile(fixtureDir() + "/" + kShard).left(4000)));
        server_->injectFaults(kRepo, kShard, {static_cast<HubFault>(fault)});
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QVERIFY2(r.notices.join("\n").contains(words), qPrintable(r.notices.join("\n")));
        QCOMPARE(cdnRanges(kShard).first(), QByteArray("bytes=4000-"));
    }

    void aServerThatSendsLessThanItPromisesFailsFast() {
        // Its headers promise the whole file, its body stops halfway, and a resume gets nothing: the
        // first ending may be a dropped connection, the second at the same byte is the server. It used
        // to be asked maxRetries times more (31 s with the default backoff) for the same nothing.
        server_->injectFaults(kRepo, kShard, {HubFault::ShortBody}, true);
        HubSettings s = settings();
        s.maxRetries = 5;
        const qint64 size = file(kShard).size;
        const qint64 half = size / 2;
        {
            const JobOutcome r = waitForEnd(*job(s));
            QVERIFY(!r.finished);
            QVERIFY2(r.failure.contains(QString("The server sent 0 of %1 bytes of %2").arg(size - half).arg(kShard)) &&
                         r.failure.contains(QString("a second time at byte %1 of %2").arg(half).arg(size)) &&
                         r.failure.contains("are kept") && r.failure.contains("run the download again"),
                     qPrintable(r.failure));
            // The first ending was worth one resume, and said why; there was no other.
            const QStringList notices = withoutQtResends(r.notices);
            QCOMPARE(notices.size(), 1);
            QVERIFY2(notices.first().contains(QString("%1: the connection ended after %2 of %3 bytes").arg(kShard).arg(half).arg(size)),
                     qPrintable(notices.first()));
            // Qt may send a request again by itself when the connection closes; ours were two.
            QList<QByteArray> ranges = cdnRanges(kShard);
            ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
            QCOMPARE(ranges, QList<QByteArray>({{}, "bytes=" + QByteArray::number(half) + "-"}));
        }
        QVERIFY(!QFile::exists(out() + "/" + kShard));
        const QStringList partial = partialFiles().filter(kShard);
        QCOMPARE(partial.size(), 1);
        QCOMPARE(QFileInfo(out() + "/" + partial.first()).size(), half);

        // Once the server sends the rest, the same download resumes from what was kept.
        server_->injectFaults(kRepo, kShard, {});
        server_->clearRequests();
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QCOMPARE(cdnRanges(kShard), QList<QByteArray>{"bytes=" + QByteArray::number(half) + "-"});
    }

    void aContentLengthPastTheFileIsNotWaitedFor() {
        // The whole file arrives under a Content-Length that promises more, and the connection closes:
        // every listed byte is here, so the content check decides, without a retry.
        server_->injectFaults(kRepo, kShard, {HubFault::LongContentLength}, true);
        server_->injectFaults(kRepo, "config.json", {HubFault::LongContentLength}, true);
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        const QStringList notices = withoutQtResends(r.notices);
        QVERIFY2(notices.isEmpty(), qPrintable(notices.join("\n")));
        // Qt may send a request again by itself when the connection closes; ours asked from byte 0 only.
        QList<QByteArray> ranges = cdnRanges(kShard);
        ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
        QCOMPARE(ranges, QList<QByteArray>{QByteArray()});
        for (const HubRequest& request : server_->requestsFor("/main/config.json")) QCOMPARE(request.range, QByteArray());
    }

    void filesInOurStagingFolderAreSkipped() {
        // A repository's own .tandem-download/ would collide with the download's state: verified.json
        // would be taken for our record and removed with the staging folder after it was reported done.
        server_->addFile(kRepo, ".tandem-download/verified.json", "{\"not\": \"ours\"}", false);
        server_->addFile(kRepo, ".Tandem-Download/notes.txt", "case-insensitive file systems collide too", false);
        files_ = listRepo(settings());
        server_->clearRequests();
        auto j = job();
        QSignalSpy fileDone(j.get(), &DownloadJob::fileFinished);
        const JobOutcome r = waitForEnd(*j);
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QCOMPARE(fileDone.size(), files_.size() - 2);
        for (const QList<QVariant>& done : fileDone)
            QVERIFY2(!done.first().toString().contains("-download/", Qt::CaseInsensitive), qPrintable(done.first().toString()));
        const QString notices = r.notices.join("\n");
        QVERIFY2(notices.contains("Skipping 2 files of " + kRepo) && notices.contains(".tandem-download/verified.json") &&
                     notices.contains(".Tandem-Download/notes.txt") && notices.contains("the other files are downloaded"),
                 qPrintable(notices));
        QVERIFY(server_->requestsFor("-download/").isEmpty() && server_->requestsFor("-Download/").isEmpty());
        QCOMPARE(tandem::hub::remainingDownloadBytes(files_, out()), 0);
    }

    void givingUpKeepsThePartialFileForANewJob() {
        // Half the file, then the Hub answers 500 for good.
        server_->injectFaults(kRepo, kShard, {HubFault::DropMidFile, HubFault::ServerError}, true);
        HubSettings s = settings();
        s.maxRetries = 1;
        {
            auto first = job(s);
            const JobOutcome r = waitForEnd(*first);
            QVERIFY(!r.finished);
            QVERIFY2(r.failure.contains(kShard + ": gave up after 2 attempts (HTTP 500)") &&
                         r.failure.contains("run the download again"),
                     qPrintable(r.failure));
        }
        QVERIFY(!QFile::exists(out() + "/" + kShard));
        const QStringList partial = partialFiles().filter(kShard);
        QCOMPARE(partial.size(), 1);
        const qint64 kept = QFileInfo(out() + "/" + partial.first()).size();
        QVERIFY(kept > 0 && kept < file(kShard).size);

        server_->injectFaults(kRepo, kShard, {});
        server_->clearRequests();
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QCOMPARE(cdnRanges(kShard), QList<QByteArray>{"bytes=" + QByteArray::number(kept) + "-"});
        // Files the first job finished were verified then; the new job fetches none of them again.
        QCOMPARE(server_->requestsFor("config.json").size(), 0);
    }

    void partialFileOfAKilledProcessIsResumed() {
        // As a process killed mid-file leaves it: the first bytes of the shard under its partial name,
        // and a partial of the other shard with wrong bytes (caught by the sha256, then fetched anew).
        const RepoFile shard = file(kShard);
        const QByteArray bytes = readFile(fixtureDir() + "/" + kShard);
        const QString partial = out() + "/.tandem-download/" + kShard + "." + shard.sha256 + ".part";
        QVERIFY(QDir().mkpath(QFileInfo(partial).absolutePath()));
        QVERIFY(writeFile(partial, bytes.left(1000)));
        const QString other = "model-00002-of-00002.safetensors";
        QVERIFY(writeFile(out() + "/.tandem-download/" + other + "." + file(other).sha256 + ".part", QByteArray(500, 'z')));
        QVERIFY(writeFile(out() + "/.tandem-download/" + kShard + "." + QString(64, 'e') + ".part", "an old revision"));

        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QCOMPARE(cdnRanges(kShard), QList<QByteArray>{"bytes=1000-"});
        QCOMPARE(cdnRanges(other), QList<QByteArray>({"bytes=500-", {}}));
    }

    void finishingOneDownloadKeepsAnotherOnesPartialFiles() {
        // Another download into the same folder stopped mid-shard; this one fetches config.json only.
        const RepoFile shard = file(kShard);
        const QString theirs = out() + "/.tandem-download/" + kShard + "." + shard.sha256 + ".part";
        QVERIFY(QDir().mkpath(QFileInfo(theirs).absolutePath()));
        QVERIFY(writeFile(theirs, readFile(fixtureDir() + "/" + kShard).left(1000)));
        const QList<RepoFile> all = files_;
        files_ = {file("config.json")};
        JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        QCOMPARE(partialFiles(), QStringList{".tandem-download/" + kShard + "." + shard.sha256 + ".part"});
        QVERIFY(!QFileInfo::exists(out() + "/.tandem-download/verified.json"));

        // The other download resumes from its partial file and, the last one, clears the staging folder.
        files_ = all;
        r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QCOMPARE(cdnRanges(kShard), QList<QByteArray>{"bytes=1000-"});
    }

    void filesInPlaceAreCheckedNotFetched() {
        QVERIFY(copyFixture("tiny-qwen3moe", out()));
        QByteArray wrong = readFile(out() + "/tokenizer.json");
        wrong[10] = static_cast<char>(wrong[10] ^ 1);  // same size, other content
        QVERIFY(writeFile(out() + "/tokenizer.json", wrong));
        auto j = job();
        QSignalSpy fileDone(j.get(), &DownloadJob::fileFinished);
        const JobOutcome r = waitForEnd(*j);
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QCOMPARE(fileDone.size(), files_.size());
        QStringList fetched;
        for (const HubRequest& req : server_->requests()) fetched << req.target.section('/', -1);
        QCOMPARE(fetched, QStringList{"tokenizer.json"});
    }

    void pauseAndResume() {
        server_->setSlowPace(8 * 1024, 20);
        server_->injectFaults(kRepo, kShard, {HubFault::Slow});
        HubSettings s = settings();
        s.parallelFiles = 1;
        auto j = job(s);
        QSignalSpy paused(j.get(), &DownloadJob::paused);
        QSignalSpy finished(j.get(), &DownloadJob::finished);
        bool pausedOnce = false;
        connect(j.get(), &DownloadJob::fileProgress, this, [&](const QString& path, qint64 done, qint64) {
            if (path == kShard && done > 0 && !pausedOnce) {
                pausedOnce = true;
                j->pause();
            }
        });
        j->start();
        QVERIFY(paused.wait(60000));
        QVERIFY(finished.isEmpty());
        const QStringList partial = partialFiles().filter(kShard);
        QCOMPARE(partial.size(), 1);
        const qint64 kept = QFileInfo(out() + "/" + partial.first()).size();
        QVERIFY(kept > 0 && kept < file(kShard).size);
        QVERIFY(!QFile::exists(out() + "/" + kShard));

        j->resume();
        const JobOutcome r = waitForEnd(*j, false);
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QVERIFY(cdnRanges(kShard).last().startsWith("bytes="));
    }

    void cancelRemovesPartialFiles() {
        server_->setSlowPace(8 * 1024, 20);
        server_->injectFaults(kRepo, kShard, {HubFault::Slow}, true);
        auto j = job();
        QSignalSpy cancelled(j.get(), &DownloadJob::cancelled);
        bool once = false;
        connect(j.get(), &DownloadJob::fileProgress, this, [&](const QString& path, qint64 done, qint64) {
            if (path == kShard && done > 0 && !once) {
                once = true;
                j->cancel();
            }
        });
        j->start();
        QVERIFY(cancelled.wait(60000));
        expectNothingOf(kShard);
        QVERIFY(!QFileInfo::exists(out() + "/.tandem-download"));
    }

    void cancelWhileCheckingFilesInPlaceStopsTheCheck() {
        // Every file is in place but unrecorded, so each is hashed in turn. The cancel arrives while the
        // first is hashed: no file may be reported done or recorded after it, and the check stops.
        QVERIFY(copyFixture("tiny-qwen3moe", out()));
        auto j = job();
        QSignalSpy cancelled(j.get(), &DownloadJob::cancelled);
        QSignalSpy fileDone(j.get(), &DownloadJob::fileFinished);
        j->start();
        j->cancel();
        QVERIFY(cancelled.wait(60000));
        // Long enough for every hash of the tiny fixture to end had the cancel not stopped them.
        QVERIFY(!QTest::qWaitFor([&] { return !fileDone.isEmpty(); }, 1000));
        QVERIFY(!QFileInfo::exists(out() + "/.tandem-download"));
        QString why;
        QVERIFY2(sameAsFixture(out(), &why), qPrintable(why));  // files in place stay
        QVERIFY(server_->requests().isEmpty());
    }

    void deletingTheJobKeepsWhatArrived() {
        server_->setSlowPace(8 * 1024, 20);
        server_->injectFaults(kRepo, kShard, {HubFault::Slow});
        {
            auto j = job();
            j->start();
            QTRY_VERIFY_WITH_TIMEOUT(!partialFiles().filter(kShard).isEmpty() &&
                                         QFileInfo(out() + "/" + partialFiles().filter(kShard).first()).size() > 0,
                                     60000);
            // As the app quitting mid-download: the job goes away without pause or cancel.
            j.reset();
            QVERIFY(j == nullptr);
        }
        QCOMPARE(partialFiles().filter(kShard).size(), 1);
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
        expectComplete();
        QVERIFY(cdnRanges(kShard).last().startsWith("bytes="));
    }

    void notEnoughDiskSpaceRefusesToStart() {
        files_.append(RepoFile{"huge.safetensors", qint64(1) << 49, QString(64, 'a'), {}});  // 563 TB
        const JobOutcome r = waitForEnd(*job());
        QVERIFY(!r.finished);
        QVERIFY2(r.failure.contains("Not enough disk space"), qPrintable(r.failure));
        QVERIFY(server_->requests().isEmpty());
    }

    void emptyListFinishesAtOnce() {
        files_.clear();
        const JobOutcome r = waitForEnd(*job());
        QVERIFY2(r.finished, qPrintable(r.failure));
    }
};

QTEST_GUILESS_MAIN(TestDownloadJob)
#include "tst_download_job.moc"
