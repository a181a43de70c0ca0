// tandem-cli serve with a real client written by others: the official `openai` Python package, installed
// from the Python package index into a virtual environment in the test's temporary folder, runs
// serve_openai_check.py (chat, streaming, completions, tools, errors, keys) against the default model.
// Without python3's venv or the package index the test fails, saying why: it never passes unchecked.
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "serve_test_support.h"
#include "test_support.h"

using namespace tandem::test;

namespace {

const QString kModel = QStringLiteral(TANDEM_DEFAULT_MODEL_SOURCE);

struct Run {
    bool finished = false;
    int exitCode = -1;
    QString output;
};

Run run(const QString& program, const QStringList& args, int timeoutMs) {
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(program, args);
    Run r;
    r.finished = p.waitForFinished(timeoutMs);
    if (!r.finished) p.kill();
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.output = QString::fromUtf8(p.readAll());
    return r;
}

}  // namespace

class ServeOpenAiTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    QString python_;

private slots:
    void initTestCase() {
        QVERIFY(tmp_.isValid());
        const QString venv = tmp_.filePath("venv");
        const auto made = run("python3", {"-m", "venv", venv}, 120000);
        QVERIFY2(made.finished && made.exitCode == 0,
                 qPrintable("python3 -m venv failed (Debian: apt-get install python3-venv):\n" + made.output));
        python_ = venv + "/bin/python";
        const auto pip = run(python_, {"-m", "pip", "install", "--disable-pip-version-check", "--quiet", "openai"}, 400000);
        QVERIFY2(pip.finished && pip.exitCode == 0,
                 qPrintable("pip install openai failed (is the Python package index reachable?):\n" + pip.output));
    }

    void officialClientAgainstServe() {
        const QString key = "tandem-test-key";
        Serve pocket({"--model", kModel, "--api-key", key}, tmp_.filePath("pocket.log"));
        QVERIFY2(pocket.port() > 0, qPrintable(pocket.log()));
        Serve qwen({"--model", fixturePath("tiny-qwen3moe"), "--api-key", key}, tmp_.filePath("qwen.log"));
        QVERIFY2(qwen.port() > 0, qPrintable(qwen.log()));
        const std::string question = "What does serendipity mean?";
        const std::string expected = cliAnswer(kModel, question, 256);
        const auto check = run(python_,
                               {QStringLiteral(TANDEM_SERVE_OPENAI_CHECK), "--base-url",
                                QStringLiteral("http://127.0.0.1:%1/v1").arg(pocket.port()), "--model",
                                QFileInfo(kModel).fileName(), "--api-key", key, "--question",
                                QString::fromStdString(question), "--expected", QString::fromStdString(expected),
                                "--tools-base-url", QStringLiteral("http://127.0.0.1:%1/v1").arg(qwen.port()),
                                "--tools-model", "tiny-qwen3moe"},
                               300000);
        QVERIFY2(check.finished && check.exitCode == 0, qPrintable(check.output + "\nserver log:\n" + pocket.log()));
        QVERIFY2(check.output.contains("all checks passed"), qPrintable(check.output));
        qInfo("%s", qPrintable(check.output.trimmed()));
    }
};

QTEST_GUILESS_MAIN(ServeOpenAiTest)
#include "tst_serve_openai.moc"
