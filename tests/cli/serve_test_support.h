#pragma once
// Running tandem-cli serve and tandem-cli chat from a test (tst_serve_cli, tst_serve_openai).
#include <QProcess>
#include <QRegularExpression>
#include <QTest>
#include <string>

#include "test_support.h"

namespace tandem::test {

struct CliResult {
    int exitCode = -1;
    QByteArray out, err;
};

inline CliResult runCli(const QStringList& args, const QByteArray& input = {}) {
    QProcess p;
    p.start(cliPath(), args);
    p.write(input);
    p.closeWriteChannel();
    if (!p.waitForFinished(120000)) qFatal("tandem-cli did not finish");
    return {p.exitCode(), p.readAllStandardOutput(), p.readAllStandardError()};
}

// tandem-cli chat's greedy answer to one question: its output is "> ANSWER\n> ".
inline std::string cliAnswer(const QString& model, const std::string& question, int maxTokens) {
    const auto r = runCli({"chat", "--model", model, "--temperature", "0", "--max-tokens", QString::number(maxTokens),
                           "--threads", "1"},
                          QByteArray::fromStdString(question + "\n"));
    std::string out = r.out.toStdString();
    if (r.exitCode != 0 || !out.starts_with("> ") || !out.ends_with("\n> ")) return "(tandem-cli chat failed: " + out + ")";
    return out.substr(2, out.size() - 5);
}

// tandem-cli serve on a free port, its stderr in a file (for the port it chose and its log).
class Serve {
public:
    Serve(const QStringList& args, const QString& logPath) : logPath_(logPath) {
        process_.setStandardErrorFile(logPath);
        process_.setStandardOutputFile(QProcess::nullDevice());
        process_.start(cliPath(), QStringList{"serve", "--port", "0", "--threads", "1"} + args);
        const QRegularExpression listening("listening on http://(?:\\[[^\\]]*\\]|[^:/ ]+):(\\d+)");
        (void)QTest::qWaitFor(
            [&] {
                const auto m = listening.match(log());
                if (m.hasMatch()) port_ = m.captured(1).toInt();
                return port_ > 0 || process_.state() == QProcess::NotRunning;
            },
            120000);
    }
    ~Serve() { stop(); }

    int port() const { return port_; }
    QString log() const { return QString::fromUtf8(readFile(logPath_)); }
    // SIGTERM, as a service manager stops it: the exit code, -1 if it did not end by itself.
    int stop() {
        if (process_.state() != QProcess::NotRunning) {
            process_.terminate();
            if (!process_.waitForFinished(30000)) {
                process_.kill();
                process_.waitForFinished();
                return -1;
            }
        }
        return process_.exitStatus() == QProcess::NormalExit ? process_.exitCode() : -1;
    }

private:
    QString logPath_;
    QProcess process_;
    int port_ = 0;
};

}  // namespace tandem::test
