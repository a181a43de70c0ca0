// Every kernel level against the scalar kernels (and those against float64), and the run-time choice
// of level: detection, the TANDEM_CPU_ISA override and its errors.
#include <QTest>
#include <algorithm>
#include <string>

#include "cpu/kernels/expert_kernels.h"
#include "bench/kernel_check.h"
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
        // The levels this CPU runs. AMX without the hardware: the emulation below here, and bench-moe
        // --verify on the GPU machine (scripts/device-cpu-bench.sh).
        for (const Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Amx})
            if (isaSupported(isa)) QTest::newRow(std::string(isaName(isa)).c_str()) << QString::fromStdString(std::string(isaName(isa)));
        // The emulation runs the AMX file's AVX-512 epilogues for real.
        if (isaSupported(Isa::Avx512)) QTest::newRow("amx emulated") << "amx-emulated";
    }

    void kernelsMatchScalar() {
        QFETCH(QString, level);
        const ExpertKernels* kernels = nullptr;
        if (level == "amx-emulated")
            kernels = &amxEmulatedKernels();
        else
            kernels = &kernelsFor(*parseIsa(level.toStdString()));
        const auto checks = checkKernels(*kernels, 5);
        QVERIFY(checks.size() >= 9);
        // Every type (MXFP4 too) and gpt-oss's epilogue (biases, clamped SwiGLU) on every type, each
        // reported with its worst error.
        for (const ExpertType type : kAllExpertTypes)
            for (const bool epilogue : {false, true}) {
                std::string tag(" ");
                tag.append(expertTypeName(type)).append(epilogue ? " clamped-swiglu+bias " : " ");
                int n = 0;
                double worst = 0;
                for (const auto& c : checks)
                    if (c.name.find(tag) != std::string::npos && (epilogue || c.name.find("clamped") == std::string::npos)) {
                        ++n;
                        worst = std::max(worst, c.error);
                    }
                QVERIFY2(n >= 5, tag.c_str());
                qInfo("%s: %d checks, worst relative error %.2e", tag.c_str(), n, worst);
            }
        for (const auto& c : checks)
            if (!c.passed())
                QFAIL(qPrintable(QString("%1: relative error %2 over %3").arg(QString::fromStdString(c.name)).arg(c.error).arg(c.tolerance)));
    }

    // Qwen3-30B-A3B's widths (hidden 2048, moe_intermediate 768, 128 experts, top-8): every expert of a
    // layer where it lies in the layer's 1.2 GB (bf16) buffer with one row (decode), the first, a middle
    // and the last with 1..64 rows, both kernel kinds, and the whole layer's decode routed over every
    // expert, against the scalar kernels (RealShapePlan::ci). `tandem-cli bench-moe --verify-shape full`
    // runs every expert with every row count, and AMX on the GPU machine.
    void realShapesMatchScalar_data() {
        QTest::addColumn<int>("isa");
        QTest::addColumn<int>("type");
        for (const Isa isa : {Isa::Avx2, Isa::Avx512})
            if (isaSupported(isa))
                for (const ExpertType type : kAllExpertTypes)
                    QTest::newRow((std::string(isaName(isa)) + " " + std::string(expertTypeName(type))).c_str())
                        << static_cast<int>(isa) << static_cast<int>(type);
    }

    void realShapesMatchScalar() {
        QFETCH(int, isa);
        QFETCH(int, type);
        static ThreadPool pool;
        const auto checks = checkRealShape(pool, static_cast<Isa>(isa), static_cast<ExpertType>(type),
                                           RealShapePlan::ci("qwen3-30b-a3b", 2048, 768, 128, 8), 7);
        QCOMPARE(checks.size(), std::size_t(64 * 4 + 1));  // rows 1..64 x (GEMV, GEMM) x (gate/up, down), the layer's decode
        for (const auto& c : checks)
            if (!c.passed())
                QFAIL(qPrintable(QString("%1: relative error %2 over %3").arg(QString::fromStdString(c.name)).arg(c.error).arg(c.tolerance)));
    }

    void gemvAndGemmThresholdsAreSet() {
        for (const Isa isa : kAllIsas) {
            if (!isaSupported(isa)) continue;
            const ExpertKernels& k = kernelsFor(isa);
            QCOMPARE(k.isa, isa);
            for (int t = 0; t < kExpertTypeCount; ++t) {
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

    // Every level is either accepted as an override (this CPU runs it) or refused with a message.
    void overrideTheCpuCannotRunIsAnError() {
        for (const Isa isa : kAllIsas) {
            const std::string name(isaName(isa));
            if (isaSupported(isa)) {
                QCOMPARE(resolveIsa(name.c_str()), isa);
                continue;
            }
            try {
                resolveIsa(name.c_str());
                QFAIL("an unsupported TANDEM_CPU_ISA was accepted");
            } catch (const tandem::Error& e) {
                const QString message = e.what();
                QVERIFY2(message.contains(QString::fromStdString("TANDEM_CPU_ISA=" + name)), e.what());
                QVERIFY2(message.contains("lacks"), e.what());
            }
            QVERIFY_THROWS_EXCEPTION(tandem::Error, kernelsFor(isa));
        }
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
