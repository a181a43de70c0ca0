// tandem-cli convert end to end: progress on stderr, a loadable store, --verify, and its errors.
#include <QDateTime>
#include <QFile>
#include <QFileInfo>
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

    Result run(const QStringList& args) { return runCli(QStringList{"convert"} + args); }

    Result runCli(const QStringList& args) {
        QProcess p;
        p.start(tandem::test::cliPath(), args);
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
        QCOMPARE(store.expertType(), tandem::io::ExpertType::INT4);
        // The conversion recorded the store as verified (from the checksums it took while writing), and
        // --verify read it again and refreshed that record.
        QVERIFY(QFile::exists(out + "/tandem-verified.json"));
        QVERIFY(store.verification().state == tandem::io::VerificationState::Verified);
        QVERIFY2(r.out.contains("recorded in tandem-verified.json"), qPrintable(r.out));

        const Result again = run({"--model", model, "--out", out, "--experts", "int4"});
        QCOMPARE(again.exitCode, 0);
        QVERIFY2(again.out.contains("nothing to do"), qPrintable(again.out));
        // Asked for int8 dense weights, the same store is another conversion: done again, and then held so.
        const Result int8 = run({"--model", model, "--out", out, "--experts", "int4", "--dense", "int8", "--threads", "2"});
        QVERIFY2(int8.exitCode == 0 && int8.out.contains("2 layers packed"), qPrintable(int8.err + int8.out));
        QCOMPARE(QString::fromStdString(tandem::io::readManifest(out.toStdString()).denseType), QString("int8"));

        const QString layer = out + "/experts-002.bin";
        QByteArray bytes = tandem::test::readFile(layer);
        bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 0x10);
        QVERIFY(tandem::test::writeFile(layer, bytes));
        const Result damaged = run({"--out", out, "--verify"});
        QCOMPARE(damaged.exitCode, 1);
        QVERIFY2(damaged.err.contains("DAMAGED") && damaged.err.contains("experts-002.bin"), qPrintable(damaged.err));
        QVERIFY2(damaged.err.contains("Nothing was deleted") && damaged.err.contains("tandem-cli convert --model " + model),
                 qPrintable(damaged.err));
        QVERIFY(QFile::exists(layer));
        // Recorded: the store no longer counts as up to date, so the same command converts it again.
        QVERIFY(tandem::io::PackedStore(out.toStdString()).verification().state == tandem::io::VerificationState::Damaged);
        const Result redone = run({"--model", model, "--out", out, "--experts", "int4", "--threads", "2"});
        QVERIFY2(redone.exitCode == 0 && redone.out.contains("2 layers packed"), qPrintable(redone.out + redone.err));
        QVERIFY(tandem::io::PackedStore(out.toStdString()).verification().state == tandem::io::VerificationState::Verified);
    }

    // chat, generate and eval read a store that is not verified in full before using it (progress on
    // stderr), refuse a damaged one with the file named, and --no-verify skips the read.
    void modelCommandsVerifyAnUnverifiedStoreFirst() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        Result r = run({"--model", tandem::test::fixturePath("tiny-qwen3moe"), "--out", out, "--experts", "int4", "--threads", "2"});
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        const QString record = out + "/tandem-verified.json";
        const QStringList generate{"generate", "--model", out, "--ids", "1 2 3", "--new-tokens", "2", "--threads", "1"};

        r = runCli(generate);  // verified by its conversion: no full read
        QVERIFY2(r.exitCode == 0 && !r.err.contains("verify:"), qPrintable(r.err));

        QVERIFY(QFile::remove(record));
        r = runCli(generate + QStringList{"--no-verify"});
        QVERIFY2(r.exitCode == 0 && r.err.contains("is not verified") && !r.err.contains("verify: 100%"), qPrintable(r.err));
        QVERIFY(!QFile::exists(record));

        r = runCli(generate);
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY2(r.err.contains("has not been verified yet") && r.err.contains("verify: 100%") && r.err.contains("is intact"),
                 qPrintable(r.err));
        QVERIFY(QFile::exists(record));
        r = runCli(generate);
        QVERIFY2(r.exitCode == 0 && !r.err.contains("verify:"), qPrintable(r.err));

        // A byte in the middle of an expert file: the file changed, so the store is read again.
        const QString layer = out + "/experts-001.bin";
        QByteArray bytes = tandem::test::readFile(layer);
        bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
        const QDateTime before = QFileInfo(layer).lastModified();
        QVERIFY(tandem::test::writeFile(layer, bytes));
        if (QFileInfo(layer).lastModified() == before) {  // within one tick of the file system's clock
            QFile f(layer);
            QVERIFY(f.open(QIODevice::ReadWrite) && f.setFileTime(before.addSecs(1), QFileDevice::FileModificationTime));
        }
        r = runCli(generate);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("experts-001.bin") && r.err.contains("is damaged") && r.err.contains("convert the model again", Qt::CaseInsensitive),
                 qPrintable(r.err));
        QVERIFY(QFile::exists(layer));
        // Known to be damaged: refused with --no-verify too, and eval goes through the same check.
        r = runCli(generate + QStringList{"--no-verify"});
        QVERIFY2(r.exitCode == 1 && r.err.contains("experts-001.bin"), qPrintable(r.err));
        QVERIFY(tandem::test::writeFile(tmp.filePath("ids.txt"), "1 2 3"));
        r = runCli({"eval", "--model", out, "--ids-file", tmp.filePath("ids.txt"), "--new-tokens", "1", "--logits-out",
                    tmp.filePath("logits.bin"), "--no-verify"});
        QVERIFY2(r.exitCode == 1 && r.err.contains("experts-001.bin") && r.err.contains("is damaged"), qPrintable(r.err));
    }

    void userErrors() {
        QTemporaryDir tmp;
        const QString model = tandem::test::fixturePath("tiny-mixtral");
        Result r = run({"--model", model, "--out", tmp.filePath("s"), "--experts", "int2"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--experts must be bf16, int8, int4 or mxfp4"), qPrintable(r.err));
        r = run({"--model", model, "--out", tmp.filePath("s"), "--experts", "int8", "--dense", "fp4"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--dense must be checkpoint, int8 or bf16"), qPrintable(r.err));
        QVERIFY(!QFile::exists(tmp.filePath("s.partial")));

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
