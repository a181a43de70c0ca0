// tandem-cli bench-moe as a user runs it: a tiny run with --json prints the promised fields on its
// last line; an instruction set the CPU lacks is refused with a clear message, not a crash. Figures
// are never asserted.
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTest>

#include "cpu/cpu_features.h"
#include "test_support.h"

class TestBenchMoeCli : public QObject {
    Q_OBJECT

    struct Result {
        int exitCode;
        QByteArray out, err;
    };

    Result run(const QStringList& args, const QString& isa = {}) {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        if (isa.isEmpty())
            env.remove("TANDEM_CPU_ISA");
        else
            env.insert("TANDEM_CPU_ISA", isa);
        p.setProcessEnvironment(env);
        p.start(tandem::test::cliPath(), QStringList{"bench-moe"} + args);
        if (!p.waitForFinished(300000)) return {-1, {}, "timed out"};
        return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, p.readAllStandardOutput(), p.readAllStandardError()};
    }

private slots:
    void jsonHasTheFields() {
        const Result r = run({"--shape", "deepseek-v2-lite", "--experts", "int4", "--tokens", "1,3", "--threads", "2", "--json",
                              "--seconds", "0.05", "--experts-in-memory", "8"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QList<QByteArray> lines = r.out.trimmed().split('\n');
        const QJsonObject j = QJsonDocument::fromJson(lines.last()).object();
        for (const char* key : {"seconds_per_layer", "weights_gbps", "bandwidth_gbps", "tflops", "isa", "threads"})
            QVERIFY2(j.contains(key), key);
        QCOMPARE(j["tokens"].toInt(), 3);
        QCOMPARE(j["threads"].toInt(), 2);
        QCOMPARE(j["isa"].toString(), QString::fromStdString(std::string(tandem::cpu::isaName(tandem::cpu::bestIsa()))));
        QVERIFY(j["seconds_per_layer"].toDouble() > 0);
    }

    void verifyChecksTheSelectedKernels() {
        const Result r = run({"--shape", "qwen3-30b-a3b", "--experts", "bf16", "--tokens", "1", "--threads", "2", "--json", "--verify",
                              "--seconds", "0.05", "--experts-in-memory", "8"},
                             "avx2");
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.err.contains("checks of the avx2 kernels"), r.err.constData());
        const QJsonObject j = QJsonDocument::fromJson(r.out.trimmed().split('\n').last()).object();
        QCOMPARE(j["verify_failures"].toInt(), 0);
        QCOMPARE(j["isa"].toString(), QString("avx2"));
    }

    void unsupportedIsaIsRefused() {
        QString missing;
        for (const auto isa : tandem::cpu::kAllIsas)
            if (!tandem::cpu::isaSupported(isa)) missing = QString::fromStdString(std::string(tandem::cpu::isaName(isa)));
        if (missing.isEmpty()) QSKIP("this CPU runs every kernel level");
        const Result r = run({"--shape", "deepseek-v2-lite", "--experts", "int4", "--tokens", "1", "--json"}, missing);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains(("TANDEM_CPU_ISA=" + missing).toUtf8()), r.err.constData());
    }

    // --phases: the JSON carries each phase's share of the threads' time; gate/up and down are timed,
    // and no share is negative or above the whole.
    void phasesAreReported() {
        const Result r = run({"--shape", "qwen3-30b-a3b", "--experts", "int4", "--tokens", "1,40", "--threads", "2", "--json", "--phases",
                              "--seconds", "0.05", "--experts-in-memory", "16"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.out.contains("share of the threads' time per layer"), r.out.constData());
        const QJsonObject phases = QJsonDocument::fromJson(r.out.trimmed().split('\n').last()).object()["phases"].toObject();
        const QStringList keys{"convert_x", "gate_up", "convert_act", "down", "reduce", "barriers", "other"};
        for (const QString& k : keys) {
            QVERIFY2(phases.contains(k), qPrintable(k));
            QVERIFY2(phases[k].toDouble() >= -0.02 && phases[k].toDouble() <= 1.0, qPrintable(k));
        }
        QVERIFY(phases["gate_up"].toDouble() > 0.05);
        QVERIFY(phases["down"].toDouble() > 0.05);
        QVERIFY(phases["convert_x"].toDouble() > 0);  // 40 tokens: phase A runs
    }

    // On an AMX machine it prints the six measurements; elsewhere it says what is missing.
    void tilePeakMeasuresOrExplains() {
        const Result r = run({"--tile-peak", "--threads", "2"});
        if (tandem::cpu::isaSupported(tandem::cpu::Isa::Amx)) {
            QVERIFY2(r.exitCode == 0, r.err.constData());
            QCOMPARE(r.out.count("TOP/s"), 12);
        } else {
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.contains("--tile-peak needs AMX"), r.err.constData());
            QVERIFY2(!r.out.contains("TOP/s"), r.out.constData());
        }
    }

    // --kernel-probe: one row per (rows, experts) point, cached and from memory, every rate positive.
    void kernelProbePrintsEachPoint() {
        const Result r = run({"--kernel-probe", "--shape", "qwen3-30b-a3b", "--experts", "int8", "--tokens", "3,40", "--threads", "2",
                              "--seconds", "0.02"},
                             "avx2");
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(r.out.contains("int8 GEMM kernels (avx2)"), r.out.constData());
        int points = 0;
        for (const QByteArray& line : r.out.split('\n')) {
            const QList<QByteArray> f = line.simplified().split(' ');
            if (f.size() != 9 || f[0].toInt() <= 0) continue;
            ++points;
            QVERIFY2(f[0] == "3" || f[0] == "40", line.constData());
            QCOMPARE(f[2].toInt(), 2);
            for (int i = 3; i < 9; ++i) QVERIFY2(f[i].toDouble() > 0, line.constData());
        }
        QCOMPARE(points, 4);
    }

    void badOptionsAreExplained() {
        const Result r = run({"--shape", "llama", "--experts", "int4"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("deepseek-v3|qwen3-30b-a3b|deepseek-v2-lite"), r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestBenchMoeCli)
#include "tst_bench_moe_cli.moc"
