// tandem-cli download: a Hugging Face repository into a folder, with the Hub client the wizard uses.
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QTimer>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <optional>
#include <unistd.h>

#include "cli_args.h"
#include "cli_common.h"
#include "tandem/byte_size.h"
#include "commands.h"
#include "tandem/error.h"
#include "hub/hub_client.h"

namespace {

using tandem::hub::RepoFile;

std::atomic<bool> interrupted{false};

void onInterrupt(int) {
    interrupted = true;
    std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends at once; the partial files are kept either way
}

// On a terminal one line redrawn in place; elsewhere (a log, a test) a line every few seconds. Notices
// and finished files get lines of their own above it.
class ProgressBar {
public:
    ProgressBar() : terminal_(::isatty(STDERR_FILENO) == 1) { clock_.start(); }
    ~ProgressBar() { clearLine(); }

    // Ends the redrawn line: kept (the last figures) or wiped (before an error message).
    void close(bool keep) {
        if (keep && terminal_ && drawn_) std::fputc('\n', stderr);
        else clearLine();
        drawn_ = false;
    }

    void update(qint64 done, qint64 total, double speed, bool force = false) {
        done_ = done;
        total_ = total;
        speed_ = speed;
        const qint64 now = clock_.elapsed();
        if (!force && now - lastDrawn_ < (terminal_ ? 200 : 5000)) return;
        lastDrawn_ = now;
        draw();
    }
    void fileDone() { ++filesDone_; }
    void setFiles(int n) { files_ = n; }

    void line(const QString& text) {
        clearLine();
        std::fprintf(stderr, "download: %s\n", text.toLocal8Bit().constData());
        if (terminal_ && lastDrawn_ >= 0) draw();
        std::fflush(stderr);
    }

private:
    void draw() {
        const double fraction = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
        const std::string eta = done_ >= total_ ? formatDuration(0)
                                : speed_ > 0 ? formatDuration(static_cast<double>(total_ - done_) / speed_)
                                             : "--:--";
        std::fprintf(stderr, "%sdownload: %3.0f%%  %s of %s  %.1f MB/s  ETA %s  %d/%d files%s", terminal_ ? "\r" : "",
                     100 * fraction, tandem::formatBytes(done_).c_str(), tandem::formatBytes(total_).c_str(), speed_ / 1e6, eta.c_str(),
                     filesDone_, files_, terminal_ ? "\x1b[K" : "\n");
        std::fflush(stderr);
        drawn_ = true;
    }
    void clearLine() {
        if (terminal_ && drawn_) std::fputs("\r\x1b[K", stderr);
        drawn_ = false;
    }

    bool terminal_;
    bool drawn_ = false;
    QElapsedTimer clock_;
    qint64 lastDrawn_ = -1;
    qint64 done_ = 0, total_ = 0;
    double speed_ = 0;
    int files_ = 0, filesDone_ = 0;
};

QString listSome(const QList<RepoFile>& files) {
    QStringList names;
    for (const RepoFile& f : files.mid(0, 12)) names << f.path;
    return names.join(", ") + (files.size() > 12 ? QStringLiteral(", ... (%1 files)").arg(files.size()) : QString());
}

}  // namespace

int runDownload(const CommandArgs& argv) {
    if (argv.empty() || argv.front().rfind("--", 0) == 0)
        throw tandem::Error("download needs the repository first: tandem-cli download OWNER/NAME --out DIR");
    const std::string repoArg = argv.front();
    const CliArgs args(CommandArgs(argv.begin() + 1, argv.end()), {"--revision", "--token", "--endpoint", "--out", "--parallel"},
                       {}, {"--include"});
    const QString repo = QString::fromStdString(repoArg);
    const QString revision = QString::fromStdString(args.optional("--revision").value_or("main"));
    const QString out = QDir(QString::fromStdString(args.required("--out"))).absolutePath();
    QStringList includes;
    for (const auto& g : args.repeated("--include")) includes << QString::fromStdString(g);
    tandem::hub::HubSettings settings;
    settings.endpoint = QString::fromStdString(args.optional("--endpoint").value_or(""));
    settings.token = QString::fromStdString(args.optional("--token").value_or(""));
    settings.parallelFiles = args.integer("--parallel", settings.parallelFiles);
    if (settings.parallelFiles < 1) throw tandem::Error("--parallel must be 1 or more");

    int argc = 1;
    char name[] = "tandem-cli";
    char* qtArgv[] = {name, nullptr};
    QCoreApplication app(argc, qtArgv);
    std::signal(SIGINT, onInterrupt);

    tandem::hub::HubClient client(settings);
    std::optional<tandem::hub::DownloadJob> job;
    ProgressBar bar;
    QElapsedTimer fetchClock;
    QString error;
    auto stop = [&](const QString& message, int code) {
        error = message;
        app.exit(code);
    };

    QObject::connect(&client, &tandem::hub::HubClient::failed, &app, [&](const QString& m) { stop(m, 1); });
    QObject::connect(&client, &tandem::hub::HubClient::filesListed, &app, [&](const QList<RepoFile>& listed) {
        const QList<RepoFile> files = tandem::hub::filterFiles(listed, includes);
        if (files.isEmpty()) {
            stop(listed.isEmpty() ? QStringLiteral("%1 at %2 has no files.").arg(repo, revision)
                                  : QStringLiteral("No file of %1 matches --include %2. Its files: %3")
                                        .arg(repo, includes.join(" --include "), listSome(listed)),
                 1);
            return;
        }
        qint64 total = 0;
        for (const RepoFile& f : files) total += f.size;
        const qint64 left = tandem::hub::remainingDownloadBytes(files, out);
        const auto space = tandem::hub::checkDiskSpace(out, left);
        if (!space.enough) {
            stop(space.message, 1);
            return;
        }
        bar.setFiles(static_cast<int>(files.size()));
        bar.line(QStringLiteral("%1 at %2: %3 file%4, %5 (%6 to fetch) into %7")
                     .arg(repo, revision)
                     .arg(files.size())
                     .arg(files.size() == 1 ? "" : "s", QString::fromStdString(tandem::formatBytes(total)),
                          QString::fromStdString(tandem::formatBytes(left)), out));
        job.emplace(settings, repo, revision, files, out);
        QObject::connect(&*job, &tandem::hub::DownloadJob::progress, &app,
                         [&](qint64 done, qint64 all, double speed) { bar.update(done, all, speed); });
        QObject::connect(&*job, &tandem::hub::DownloadJob::fileFinished, &app, [&](const QString&) { bar.fileDone(); });
        QObject::connect(&*job, &tandem::hub::DownloadJob::notice, &app, [&](const QString& m) { bar.line(m); });
        QObject::connect(&*job, &tandem::hub::DownloadJob::failed, &app, [&](const QString& m) { stop(m, 1); });
        QObject::connect(&*job, &tandem::hub::DownloadJob::paused, &app, [&] {
            stop(QStringLiteral("interrupted; the partial files are kept in %1/.tandem-download. Run the same command "
                                "again to resume.").arg(out),
                 130);
        });
        QObject::connect(&*job, &tandem::hub::DownloadJob::finished, &app, [&, total, left] {
            // The last line shows the average speed of what was fetched.
            const double seconds = static_cast<double>(fetchClock.elapsed()) / 1000.0;
            bar.update(total, total, seconds > 0 ? static_cast<double>(left) / seconds : 0.0, true);
            stop({}, 0);
        });
        fetchClock.start();
        job->start();
    });

    QTimer interruptPoll;
    QObject::connect(&interruptPoll, &QTimer::timeout, &app, [&] {
        if (!interrupted.exchange(false)) return;
        if (job) job->pause();  // answers with `paused` once the partial files are written
        else stop(QStringLiteral("interrupted before the download started"), 130);
    });
    interruptPoll.start(100);

    client.listFiles(repo, revision);
    const int code = app.exec();
    job.reset();
    std::signal(SIGINT, SIG_DFL);
    bar.close(code == 0);
    if (code == 0) {
        std::printf("download: %s is complete in %s\n", qPrintable(repo), qPrintable(out));
        return 0;
    }
    std::fprintf(stderr, "tandem-cli: %s\n", error.toLocal8Bit().constData());
    return code;
}
