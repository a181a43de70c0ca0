// The typed tuning settings (tandem/tuning.h): read from the TANDEM_* variables with their measured
// defaults, malformed values refused with the variable named, differences listed for --version.
#include <QTest>

#include "tandem/error.h"
#include "tandem/engine.h"
#include "tandem/tuning.h"

using tandem::Tuning;

class TuningTest : public QObject {
    Q_OBJECT

private slots:
    void defaultsDifferInNothing() {
        const Tuning t = Tuning::fromEnvironment();
        QCOMPARE(QString::fromStdString(t.differences()), QString());
        QCOMPARE(t.amxSliceKib, 768);
        QVERIFY(t.gpuSplitPrecision);
        QVERIFY(t.gpuFp8);
    }

    void variablesOverrideAndAreListed() {
        qputenv("TANDEM_AMX_KC", "16");
        qputenv("TANDEM_GPU_CHAIN", "0");
        qputenv("TANDEM_GPU_PRECISION", "bf16");
        const Tuning t = Tuning::fromEnvironment();
        qunsetenv("TANDEM_AMX_KC");
        qunsetenv("TANDEM_GPU_CHAIN");
        qunsetenv("TANDEM_GPU_PRECISION");
        QCOMPARE(t.amxCacheBlocksMax, 16);
        QVERIFY(!t.gpuChain);
        QVERIFY(!t.gpuSplitPrecision);
        QCOMPARE(QString::fromStdString(t.differences()),
                 QString("TANDEM_AMX_KC=16 TANDEM_GPU_PRECISION=bf16 TANDEM_GPU_CHAIN=0"));
    }

    void malformedValuesNameTheVariable_data() {
        QTest::addColumn<QByteArray>("name");
        QTest::addColumn<QByteArray>("value");
        QTest::addColumn<QString>("message");
        QTest::newRow("not a number") << QByteArray("TANDEM_DOWN_JOBS") << QByteArray("many") << "TANDEM_DOWN_JOBS='many' must be a whole number from 1";
        QTest::newRow("trailing text") << QByteArray("TANDEM_AMX_PREFETCH") << QByteArray("2x") << "TANDEM_AMX_PREFETCH='2x'";
        QTest::newRow("out of range") << QByteArray("TANDEM_AMX_INT4_LAG") << QByteArray("9") << "from 0 to 3";
        QTest::newRow("flag") << QByteArray("TANDEM_GPU_FP8") << QByteArray("yes") << "TANDEM_GPU_FP8='yes' must be a whole number from 0 to 1";
        QTest::newRow("precision") << QByteArray("TANDEM_GPU_PRECISION") << QByteArray("fp16") << "must be split (the default) or bf16";
        QTest::newRow("stages") << QByteArray("TANDEM_GPU_STAGES") << QByteArray("0") << "TANDEM_GPU_STAGES='0' must be a whole number from 1 to 16";
        QTest::newRow("devices: a word") << QByteArray("TANDEM_GPU_DEVICES") << QByteArray("0,gpu1") << "must list distinct GPU numbers";
        QTest::newRow("devices: twice") << QByteArray("TANDEM_GPU_DEVICES") << QByteArray("1,1") << "must list distinct GPU numbers";
        QTest::newRow("devices: empty entry") << QByteArray("TANDEM_GPU_DEVICES") << QByteArray("0,,1") << "must list distinct GPU numbers";
    }

    // Issue 29's pipeline settings: the stages on one GPU, the GPUs of several, listed as given.
    void pipelineSettings() {
        qputenv("TANDEM_GPU_STAGES", "3");
        qputenv("TANDEM_GPU_DEVICES", "1,0");
        const Tuning t = Tuning::fromEnvironment();
        qunsetenv("TANDEM_GPU_STAGES");
        qunsetenv("TANDEM_GPU_DEVICES");
        QCOMPARE(t.gpuStages, 3);
        QCOMPARE(t.gpuDevices, (std::vector<int>{1, 0}));
        QCOMPARE(QString::fromStdString(t.differences()), QString("TANDEM_GPU_STAGES=3 TANDEM_GPU_DEVICES=1,0"));
        QVERIFY(Tuning::fromEnvironment().gpuDevices.empty());
        // Every GPU, said as such.
        qputenv("TANDEM_GPU_DEVICES", "all");
        const Tuning every = Tuning::fromEnvironment();
        qunsetenv("TANDEM_GPU_DEVICES");
        QCOMPARE(every.gpuDevices, std::vector<int>{tandem::kEveryGpu});
        QCOMPARE(QString::fromStdString(every.differences()), QString("TANDEM_GPU_DEVICES=all"));
    }

    void malformedValuesNameTheVariable() {
        QFETCH(QByteArray, name);
        QFETCH(QByteArray, value);
        QFETCH(QString, message);
        qputenv(name.constData(), value);
        QString error;
        try {
            Tuning::fromEnvironment();
        } catch (const tandem::Error& e) {
            error = e.what();
        }
        qunsetenv(name.constData());
        QVERIFY2(error.contains(message), qPrintable(error));
    }
};

QTEST_GUILESS_MAIN(TuningTest)
#include "tst_tuning.moc"
