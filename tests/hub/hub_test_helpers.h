#pragma once
// Shared by the Hub suites: the fixture as a repository of the fake Hub, its listing, and a wait for a
// job's end that spins the event loop.
#include <QCryptographicHash>
#include <QDir>
#include <QDirIterator>
#include <QEventLoop>
#include <QSignalSpy>
#include <QTest>
#include <QTimer>

#include "fake_hub_server.h"
#include "test_support.h"
#include "hub/hub_client.h"

namespace tandem::test {

inline const QString kRepo = QStringLiteral("tandem-test/tiny-qwen3moe");
inline const QString kShard = QStringLiteral("model-00001-of-00002.safetensors");

inline QString fixtureDir() { return fixturePath(QStringLiteral("tiny-qwen3moe")); }

// Relative paths of every file under DIR, sorted; the staging folder is listed too when present.
inline QStringList filesUnder(const QString& dir) {
    QStringList files;
    QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
    while (it.hasNext()) files << it.next().mid(dir.size() + 1);
    files.sort();
    return files;
}

inline hub::HubSettings fastSettings(const FakeHubServer& server) {
    hub::HubSettings s;
    s.endpoint = server.endpoint();
    s.retryDelayMs = 10;
    s.stallTimeoutMs = 500;
    s.maxRetries = 3;
    return s;
}

// The repository's files as the client lists them; fails the test when the listing fails.
inline QList<hub::RepoFile> listRepo(const hub::HubSettings& settings, const QString& repo = kRepo,
                                     const QString& revision = QStringLiteral("main")) {
    hub::HubClient client(settings);
    QSignalSpy listed(&client, &hub::HubClient::filesListed);
    QSignalSpy failed(&client, &hub::HubClient::failed);
    client.listFiles(repo, revision);
    if (!QTest::qWaitFor([&] { return !listed.isEmpty() || !failed.isEmpty(); }, 30000)) qFatal("listing hung");
    if (!failed.isEmpty()) qFatal("listing failed: %s", qPrintable(failed.first().first().toString()));
    return listed.first().first().value<QList<hub::RepoFile>>();
}

struct JobOutcome {
    bool finished = false;
    QString failure;  // empty when finished
    QStringList notices;
};

// Runs JOB (already started or not) to its end: finished or failed.
inline JobOutcome waitForEnd(hub::DownloadJob& job, bool start = true) {
    JobOutcome outcome;
    QEventLoop loop;
    QObject::connect(&job, &hub::DownloadJob::finished, &loop, [&] {
        outcome.finished = true;
        loop.quit();
    });
    QObject::connect(&job, &hub::DownloadJob::failed, &loop, [&](const QString& m) {
        outcome.failure = m;
        loop.quit();
    });
    QObject::connect(&job, &hub::DownloadJob::notice, &loop, [&](const QString& m) { outcome.notices << m; });
    QTimer::singleShot(120000, &loop, [&] {
        outcome.failure = QStringLiteral("the job neither finished nor failed in two minutes");
        loop.quit();
    });
    if (start) job.start();
    loop.exec();
    return outcome;
}

// Whether every file of the fixture is in DIR with identical bytes.
inline bool sameAsFixture(const QString& dir, QString* why) {
    for (const QString& name : filesUnder(fixtureDir())) {
        if (readFile(dir + "/" + name) != readFile(fixtureDir() + "/" + name)) {
            *why = name + " differs from the fixture or is missing";
            return false;
        }
    }
    return true;
}

}  // namespace tandem::test
