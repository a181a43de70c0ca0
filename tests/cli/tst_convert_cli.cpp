// tandem-cli convert end to end: progress on stderr, a loadable store, --verify, and its errors.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "io/packed_store.h"
#include "test_support.h"

class TestConvertCli : public QObject {
    Q_OBJECT

    struct Result {
        int exitCode;
        QString out, err;
    };

    Result run(const QStringList& args) {
        QProcess p;
        p.start(tandem::test::cliPath(), QStringList{"convert"} + args);
        if (!p.waitForFinished(300000)) return {-1, {}, "timed out"};
        return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
                QString::fromUtf8(p.readAllStandardError())};
    }

private slots:
    void convertsVerifiesAndKnowsWhenDone() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        const QString model = tandem::test::fixturePath("tiny-deepseekv3-fp8");
        const Result r = run({"--model", model, "--out", out, "--experts", "int4", "--threads", "2", "--verify"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        // One progress line per layer: percent, layer, GB written, speed and ETA.
        QVERIFY2(r.err.contains("convert: 100%  layer 2/2"), qPrintable(r.err));
        for (const char* part : {"MB written", "MB/s", "ETA"}) QVERIFY2(r.err.contains(part), qPrintable(r.err));
        QVERIFY2(r.out.contains("wrote " + out + ": 2 layers packed"), qPrintable(r.out));
        QVERIFY2(r.out.contains("is intact"), qPrintable(r.out));
        const tandem::io::PackedStore store(out.toStdString());
        QCOMPARE(store.expertType(), tandem::cpu::ExpertType::INT4);

        const Result again = run({"--model", model, "--out", out, "--experts", "int4"});
        QCOMPARE(again.exitCode, 0);
        QVERIFY2(again.out.contains("nothing to do"), qPrintable(again.out));

        const QString layer = out + "/experts-002.bin";
        QByteArray bytes = tandem::test::readFile(layer);
        bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 0x10);
        QVERIFY(tandem::test::writeFile(layer, bytes));
        const Result damaged = run({"--out", out, "--verify"});
        QCOMPARE(damaged.exitCode, 1);
        QVERIFY2(damaged.err.contains("DAMAGED") && damaged.err.contains("experts-002.bin"), qPrintable(damaged.err));
    }

    void userErrors() {
        QTemporaryDir tmp;
        const QString model = tandem::test::fixturePath("tiny-mixtral");
        Result r = run({"--model", model, "--out", tmp.filePath("s"), "--experts", "int2"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--experts must be bf16, int8 or int4"), qPrintable(r.err));

        QVERIFY(tandem::test::writeFile(tmp.filePath("notes.txt"), "mine"));
        r = run({"--model", model, "--out", tmp.path(), "--experts", "int8"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("not a Tandem store"), qPrintable(r.err));

        r = run({"--model", tmp.filePath("none"), "--out", tmp.filePath("s"), "--experts", "int8"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("does not exist"), qPrintable(r.err));
        QVERIFY(!QFile::exists(tmp.filePath("s.partial")));

        r = run({"--model", model, "--experts", "int8"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--out"), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestConvertCli)
#include "tst_convert_cli.moc"
