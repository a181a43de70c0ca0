// Every kernel level against the scalar kernels (and those against float64), and the run-time choice
// of level: detection, the TANDEM_CPU_ISA override and its errors.
#include <QTest>

#include "cpu/expert_kernels.h"
#include "cpu/kernel_check.h"
#include "tandem/error.h"

namespace tandem::cpu {
const ExpertKernels& amxEmulatedKernels();  // tests/cpu/amx_emulated.cpp
}

using namespace tandem::cpu;

class TestExpertKernels : public QObject {
    Q_OBJECT

private slots:
    void kernelsMatchScalar_data() {
        QTest::addColumn<QString>("level");
        QTest::newRow("scalar vs float64") << "scalar";
        QTest::newRow("avx2") << "avx2";
        QTest::newRow("avx512") << "avx512";
        QTest::newRow("amx") << "amx";
        QTest::newRow("amx emulated") << "amx-emulated";
    }

    void kernelsMatchScalar() {
        QFETCH(QString, level);
        const ExpertKernels* kernels = nullptr;
        if (level == "amx-emulated") {
            // The emulation runs the AMX file's AVX-512 epilogues for real.
            if (!isaSupported(Isa::Avx512))
                QSKIP(qPrintable("AMX emulation needs AVX-512 here; this CPU lacks " + QString::fromStdString(isaMissing(Isa::Avx512))));
            kernels = &amxEmulatedKernels();
        } else {
            const Isa isa = *parseIsa(level.toStdString());
            if (!isaSupported(isa))
                QSKIP(qPrintable(level + " kernels cannot run on this CPU (it lacks " + QString::fromStdString(isaMissing(isa)) +
                                 "); they are validated by bench-moe --verify in scripts/device-cpu-bench.sh"));
            kernels = &kernelsFor(isa);
        }
        const auto checks = checkKernels(*kernels, 5);
        QVERIFY(checks.size() >= 9);
        for (const auto& c : checks)
            if (!c.passed())
                QFAIL(qPrintable(QString("%1: relative error %2 over %3").arg(QString::fromStdString(c.name)).arg(c.error).arg(c.tolerance)));
    }

    void gemvAndGemmThresholdsAreSet() {
        for (const Isa isa : kAllIsas) {
            if (!isaSupported(isa)) continue;
            const ExpertKernels& k = kernelsFor(isa);
            QCOMPARE(k.isa, isa);
            for (int t = 0; t < 3; ++t) {
                QVERIFY(k.gemv[t].gateUp && k.gemv[t].down && k.gemm[t].gateUp && k.gemm[t].down);
                QVERIFY(k.gemmMinRows[t] >= 1);
            }
        }
    }

    void overrideSelectsLevel() {
        QCOMPARE(resolveIsa(nullptr), bestIsa());
        QCOMPARE(resolveIsa(""), bestIsa());
        QCOMPARE(resolveIsa("scalar"), Isa::Scalar);
        if (isaSupported(Isa::Avx2)) QCOMPARE(resolveIsa("avx2"), Isa::Avx2);
        QVERIFY(isaSupported(Isa::Scalar));
        for (const Isa isa : kAllIsas) QCOMPARE(*parseIsa(isaName(isa)), isa);
    }

    void overrideTheCpuCannotRunIsAnError() {
        int refused = 0;
        for (const Isa isa : kAllIsas) {
            if (isaSupported(isa)) continue;
            const std::string name(isaName(isa));
            try {
                resolveIsa(name.c_str());
                QFAIL("an unsupported TANDEM_CPU_ISA was accepted");
            } catch (const tandem::Error& e) {
                const QString message = e.what();
                QVERIFY2(message.contains(QString::fromStdString("TANDEM_CPU_ISA=" + name)), e.what());
                QVERIFY2(message.contains("lacks"), e.what());
            }
            QVERIFY_THROWS_EXCEPTION(tandem::Error, kernelsFor(isa));
            ++refused;
        }
        if (!refused) QSKIP("this CPU runs every level, so no override can be refused here");
    }

    void unknownOverrideIsAnError() {
        try {
            resolveIsa("sse9");
            QFAIL("an unknown TANDEM_CPU_ISA was accepted");
        } catch (const tandem::Error& e) {
            QVERIFY2(QString(e.what()).contains("scalar, avx2, avx512 or amx"), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(TestExpertKernels)
#include "tst_expert_kernels.moc"
