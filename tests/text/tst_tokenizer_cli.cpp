// tandem-cli tokenize, detokenize and bench-tokenizer, run as a user would.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTest>

#include "test_support.h"

using namespace tandem::test;

namespace {

struct Run {
    int exitCode;
    QByteArray out;
    QByteArray err;
};

Run runCli(const QStringList& args, const QByteArray& input) {
    QProcess process;
    process.start(cliPath(), args);
    if (!process.waitForStarted()) return {-1, {}, "could not start tandem-cli"};
    process.write(input);
    process.closeWriteChannel();
    if (!process.waitForFinished(120000)) return {-1, {}, "tandem-cli did not finish"};
    return {process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1, process.readAllStandardOutput(),
            process.readAllStandardError()};
}

QByteArray idsLine(const QJsonArray& ids) {
    QStringList parts;
    for (const QJsonValue& id : ids) parts << QString::number(id.toInt());
    return parts.join(' ').toUtf8() + "\n";
}

}  // namespace

class TokenizerCliTest : public QObject {
    Q_OBJECT

private slots:
    void tokenizeAndDetokenizeGoldenCases_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QJsonObject>("testCase");
        for (const QString& fixture : {QString("tiny-qwen3moe"), QString("tiny-deepseekv2")}) {
            const QJsonArray cases = QJsonDocument::fromJson(readFile(fixturePath(fixture) + "/golden.json"))
                                         .object()["tokenizer"].toObject()["encode"].toArray();
            QVERIFY(cases.size() > 5);
            // A few cases with what a pipe can mangle: CR LF, tabs, trailing spaces, emoji, no text.
            for (const int i : {0, 9, 11, 12, 16})
                QTest::addRow("%s/%d", qPrintable(fixture), i) << fixture << cases[i].toObject();
        }
    }

    void tokenizeAndDetokenizeGoldenCases() {
        QFETCH(QString, fixture);
        QFETCH(QJsonObject, testCase);
        const QString model = fixturePath(fixture);
        const QByteArray text = testCase["text"].toString().toUtf8();

        const Run plain = runCli({"tokenize", "--model", model}, text);
        QVERIFY2(plain.exitCode == 0, plain.err.constData());
        QCOMPARE(plain.out, idsLine(testCase["ids"].toArray()));

        const Run special = runCli({"tokenize", "--model", model, "--add-special"}, text);
        QVERIFY2(special.exitCode == 0, special.err.constData());
        QCOMPARE(special.out, idsLine(testCase["ids_with_specials"].toArray()));

        // Byte-exact, no newline added.
        const Run back = runCli({"detokenize", "--model", model}, idsLine(testCase["ids"].toArray()));
        QVERIFY2(back.exitCode == 0, back.err.constData());
        QCOMPARE(back.out, testCase["decoded"].toString().toUtf8());
    }

    void detokenizeKeepsSpecialTokensAndAcceptsAnyWhitespace() {
        const Run run = runCli({"detokenize", "--model", fixturePath("tiny-qwen3moe")}, "1003\n198\t267  410 260 292 198 1004\n");
        QVERIFY2(run.exitCode == 0, run.err.constData());
        QCOMPARE(run.out, QByteArray("<think>\nreasoning\n</think>"));
    }

    void errorsAreReported() {
        const Run badUtf8 = runCli({"tokenize", "--model", fixturePath("tiny-qwen3moe")}, "abc\xFF");
        QCOMPARE(badUtf8.exitCode, 1);
        QVERIFY2(badUtf8.err.contains("not valid UTF-8"), badUtf8.err.constData());

        const Run badId = runCli({"detokenize", "--model", fixturePath("tiny-qwen3moe")}, "39 123456");
        QCOMPARE(badId.exitCode, 1);
        QVERIFY2(badId.err.contains("token id 123456"), badId.err.constData());

        const Run notAnId = runCli({"detokenize", "--model", fixturePath("tiny-qwen3moe")}, "39 x");
        QCOMPARE(notAnId.exitCode, 1);
        QVERIFY2(notAnId.err.contains("'x' is not a token id"), notAnId.err.constData());

        const Run noModel = runCli({"tokenize", "--model", "/nonexistent/model"}, "hi");
        QCOMPARE(noModel.exitCode, 1);
        QVERIFY2(noModel.err.contains("/nonexistent/model") && noModel.err.contains("tokenizer.json"), noModel.err.constData());
    }

    void benchTokenizerPrintsSpeed() {
        const Run run = runCli({"bench-tokenizer", "--model", fixturePath("tiny-qwen3moe"), "--megabytes", "1"}, {});
        QVERIFY2(run.exitCode == 0, run.err.constData());
        QVERIFY2(run.out.contains("MB/s") && run.out.contains("GPL-3") && run.out.contains("one thread"), run.out.constData());
    }
};

QTEST_GUILESS_MAIN(TokenizerCliTest)
#include "tst_tokenizer_cli.moc"
