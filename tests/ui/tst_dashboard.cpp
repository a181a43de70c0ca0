// The dashboard's sources and display: /proc parsing, NVML absent or present, the stats model's
// window and idle behaviour, and "not available" for figures nobody reports.
#include <QSignalSpy>
#include <QTest>

#include "ui/worker/engine_worker.h"

#include "ui/models/stats_model.h"
#include "ui/monitor/nvml_gpu.h"
#include "ui/monitor/proc_readers.h"
#include "ui/monitor/system_monitor.h"
#include "ui/widgets/dashboard.h"
#include "ui/widgets/deferral_panel.h"
#include "ui/widgets/placement_strip.h"

#include <QSlider>

using namespace tandem::ui;

class DashboardTest : public QObject {
    Q_OBJECT

private slots:
    void parsesProcStat() {
        const auto a = parseProcStat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n");
        const auto b = parseProcStat("cpu  160 0 70 900 70 0 0 0 0 0\n");
        QVERIFY(a && b);
        QCOMPARE(a->total, quint64(1000));
        QCOMPARE(a->busy, quint64(150));
        // 80 busy ticks out of 200.
        QCOMPARE(*cpuBusyBetween(*a, *b), 0.4);
        QVERIFY(!cpuBusyBetween(*a, *a));
        QVERIFY(!parseProcStat("intr 1 2 3\n"));
    }

    void parsesMeminfoAndStatm() {
        const auto m = parseMeminfo("MemTotal:       16384 kB\nMemFree: 100 kB\nMemAvailable:    4096 kB\n");
        QVERIFY(m);
        QCOMPARE(m->total, quint64(16384) * 1024);
        QCOMPARE(m->available, quint64(4096) * 1024);
        QVERIFY(!parseMeminfo("MemTotal: 5 kB\n"));
        QCOMPARE(parseStatmResident("1000 250 30 4 0 100 0\n", 4096), quint64(250) * 4096);
    }

    void nvmlIsOptional() {
        // Whether or not this machine has an NVIDIA driver, asking never fails.
        NvmlGpu nvml;
        if (nvml.isAvailable()) {
            QVERIFY(!nvml.deviceNames().isEmpty());
            const auto reading = nvml.read(0);
            QVERIFY(reading);
            QVERIFY(reading->memoryTotal > 0);
            QVERIFY(reading->busy >= 0 && reading->busy <= 1);
        } else {
            QVERIFY(!nvml.unavailableReason().isEmpty());
            QVERIFY(nvml.deviceNames().isEmpty());
            QVERIFY(!nvml.read(0));
        }
    }

    void monitorReportsTwiceASecondFromItsThread() {
        QVERIFY(SystemMonitor::kIntervalMs <= 500);
        SystemMonitor monitor;
        QList<SystemSample> samples;
        connect(&monitor, &SystemMonitor::sampled, this, [&](const SystemSample& s) { samples << s; });
        monitor.start();
        QTRY_VERIFY_WITH_TIMEOUT(samples.size() >= 2, 30000);
        QVERIFY(samples[1].seconds > samples[0].seconds);
        QVERIFY(samples[1].cpuBusy.has_value());
        QVERIFY(samples[1].memoryTotal > 0);
        QVERIFY(samples[1].memoryUsed <= samples[1].memoryTotal);
        QVERIFY(samples[1].appResident > 0);
        QVERIFY(samples[1].gpu.has_value() != !samples[1].gpuUnavailableReason.isEmpty());
    }

    void statsModelKeepsAMinuteAndDropsToIdle() {
        StatsModel stats;
        SystemSample s;
        s.memoryTotal = 100;
        s.memoryUsed = 25;
        for (int i = 0; i < StatsModel::kWindowRows + 10; ++i) {
            s.seconds = i * 0.5;
            stats.addSample(s);
        }
        QCOMPARE(stats.rowCount(), StatsModel::kWindowRows);
        QCOMPARE(stats.firstSeconds(), 5.0);
        QCOMPARE(stats.index(0, StatsModel::RamPercent).data().toDouble(), 25.0);
        QVERIFY(!stats.index(0, StatsModel::CpuPercent).data().isValid());  // not measured
        QVERIFY(!stats.index(0, StatsModel::GpuPercent).data().isValid());
        QVERIFY(!stats.expertPoolAvailable());

        const auto last = [&](int column) { return stats.index(stats.rowCount() - 1, column).data(); };
        stats.setGenerating(true);
        stats.setLiveEngineStats({30.0, 10, 0.75, std::nullopt});
        stats.addSample(s);
        QCOMPARE(last(StatsModel::DecodeTokensPerSecond).toDouble(), 30.0);
        QCOMPARE(last(StatsModel::ExpertPoolPercent).toDouble(), 75.0);
        QVERIFY(stats.expertPoolAvailable());
        stats.setGenerating(false);
        AnswerStats answer;
        answer.decodeTokensPerSecond = 28.0;
        stats.setAnswerStats(answer);
        stats.addSample(s);  // the finished answer's speed shows once...
        QCOMPARE(last(StatsModel::DecodeTokensPerSecond).toDouble(), 28.0);
        stats.addSample(s);  // ...then the idle engine reads zero
        QCOMPARE(last(StatsModel::DecodeTokensPerSecond).toDouble(), 0.0);
        QCOMPARE(last(StatsModel::ExpertPoolPercent).toDouble(), 0.0);
        QCOMPARE(stats.latestDecodeRate(), 28.0);
    }

    void dashboardSaysWhatIsNotAvailable() {
        StatsModel stats;
        Dashboard dashboard(&stats);
        SystemSample s;
        s.cpuBusy = 0.5;
        s.memoryTotal = 8ull << 30;
        s.memoryUsed = 2ull << 30;
        s.gpuUnavailableReason = "no NVIDIA driver found";
        stats.addSample(s);
        QVERIFY(dashboard.cpuReading().contains("50%"));
        QVERIFY(dashboard.cpuReading().contains("expert pool: not available"));
        QVERIFY(dashboard.gpuReading().contains("not available"));
        QVERIFY(dashboard.gpuReading().contains("no NVIDIA driver found"));
        QVERIFY(dashboard.memoryReading().contains("2.0 / 8.0 GiB"));
        QVERIFY(dashboard.layerSplitReading().startsWith("Appears after an answer"));

        s.gpu = GpuReading{"H200", 0.25, 10ull << 30, 80ull << 30};
        stats.addSample(s);
        QVERIFY(dashboard.gpuReading().contains("25% busy"));
        QVERIFY(dashboard.gpuReading().contains("10.0 / 80.0 GiB"));

        AnswerStats answer;
        answer.layerSplit = {{0.5, 0.3, 0.2}, {0.4, 0.4, 0.2}};
        stats.setAnswerStats(answer);
        QCOMPARE(dashboard.layerSplitReading(), QStringLiteral("2 layers"));
    }

    // Where each layer's routed experts run (ModelSummary::expertLayers): a strip and a reading.
    void dashboardShowsWhereTheExpertsRun() {
        StatsModel stats;
        Dashboard dashboard(&stats);
        QCOMPARE(dashboard.placementReading(), QString());  // no model
        ModelSummary model;
        model.name = "moe";
        model.expertsPerToken = 8;
        model.expertLayers = "-CCCGGG";
        dashboard.setModel(&model, 0);
        QCOMPARE(dashboard.placementReading(), QStringLiteral("3 of 6 MoE layers on the GPU (layers 4-6), 3 on the CPU (1-3)"));
        model.expertLayers = "-CCPGG";
        dashboard.setModel(&model, 0);
        QCOMPARE(dashboard.placementReading(),
                 QStringLiteral("2 of 5 MoE layers on the GPU (layers 4-5), 1 split between the GPU and the CPU (3), 2 on "
                                "the CPU (1-2)"));
        model.expertLayers = "SSSS";
        dashboard.setModel(&model, 0);
        QCOMPARE(dashboard.placementReading(),
                 QStringLiteral("all 4 MoE layers on the CPU, streamed through the GPU for long prompts (0-3)"));
        model.expertLayers = "CCC";
        dashboard.setModel(&model, 0);
        QCOMPARE(dashboard.placementReading(), QStringLiteral("all 3 MoE layers on the CPU"));
        model.expertLayers.clear();  // a model without routed experts
        dashboard.setModel(&model, 0);
        QCOMPARE(dashboard.placementReading(), QString());
        QCOMPARE(layerRanges("GGCGGGC", QLatin1Char('G')), QStringLiteral("0-1, 3-5"));
        QCOMPARE(layerRanges("GGCGGGC", QLatin1Char('C')), QStringLiteral("2, 6"));
    }

    // On the CPU only, the dashboard says what to expect: the bytes a token reads over the memory speed.
    void aCpuOnlyModelSaysWhatToExpect() {
        QCOMPARE(cpuExpectation(0, 40), QString());  // on the GPU: nothing to say
        QCOMPARE(cpuExpectation(2'100'000'000, 0), QString());  // the speed unknown
        const QString text = cpuExpectation(2'100'000'000, 42);
        QVERIFY2(text.contains("2.10 GB") && text.contains("42 GB/s") && text.contains("about 20 tokens/s"), qPrintable(text));
        QVERIFY2(cpuExpectation(9'000'000'000, 40).contains("about 4.4 tokens/s"), qPrintable(cpuExpectation(9'000'000'000, 40)));
        QVERIFY2(cpuExpectation(7'000'000, 56).contains("reads 7.0 MB"), qPrintable(cpuExpectation(7'000'000, 56)));
        StatsModel stats;
        Dashboard dashboard(&stats);
        ModelSummary model;
        model.name = "moe";
        dashboard.setModel(&model, 0);
        QCOMPARE(dashboard.expectationReading(), QString());
        model.cpuExpectation = text;
        dashboard.setModel(&model, 0);
        QCOMPARE(dashboard.expectationReading(), text);
        dashboard.setModel(nullptr, 0);
        QCOMPARE(dashboard.expectationReading(), QString());
    }

    void deferralSliderCoversZeroToKMinusOne() {
        StatsModel stats;
        Dashboard dashboard(&stats);
        QSlider* slider = dashboard.deferralPanel()->slider();
        QVERIFY(!slider->isEnabled());  // no model
        ModelSummary model;
        model.name = "moe";
        model.expertsPerToken = 8;
        dashboard.setModel(&model, 2);
        QVERIFY(slider->isEnabled());
        QCOMPARE(slider->minimum(), 0);
        QCOMPARE(slider->maximum(), 7);
        QCOMPARE(slider->value(), 2);
        QList<int> chosen;
        connect(&dashboard, &Dashboard::deferralChosen, this, [&](int d) { chosen << d; });
        slider->setValue(5);
        QCOMPARE(chosen, QList<int>{5});
        dashboard.setDeferral(1);  // what the engine applied; not a new choice
        QCOMPARE(slider->value(), 1);
        QCOMPARE(chosen, QList<int>{5});
    }
};

QTEST_MAIN(DashboardTest)
#include "tst_dashboard.moc"
