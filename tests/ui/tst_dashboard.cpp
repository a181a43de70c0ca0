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

#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLegend>
#include <QProgressBar>
#include <QSlider>
#include <algorithm>

using namespace tandem::ui;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
quint64 gib(double n) { return static_cast<quint64>(n * kGiB); }

// GPU readings without an NVIDIA driver: what NVML would report on a machine with these GPUs.
class FakeGpus : public GpuSource {
public:
    explicit FakeGpus(QList<GpuReading> gpus, QString reason = {}) : gpus_(std::move(gpus)), reason_(std::move(reason)) {}
    bool isAvailable() const override { return reason_.isEmpty(); }
    QString unavailableReason() const override { return reason_; }
    QStringList deviceNames() const override {
        QStringList names;
        for (const GpuReading& g : gpus_) names << g.name;
        return names;
    }
    QList<GpuReading> readAll() const override { return isAvailable() ? gpus_ : QList<GpuReading>{}; }

private:
    QList<GpuReading> gpus_;
    QString reason_;
};

const GpuReading kH200a{"NVIDIA H200", 0.25, gib(12.3), gib(141.0), 0};
const GpuReading kH200b{"NVIDIA H200", 0.75, gib(100.5), gib(141.0), 1};

QChart* gpuChart(const Dashboard& dashboard) {
    for (QChartView* view : dashboard.findChildren<QChartView*>())
        if (view->accessibleName().startsWith("GPU chart")) return view->chart();
    return nullptr;
}

QList<QWidget*> gpuRowWidgets(const Dashboard& dashboard) {
    return dashboard.findChildren<QWidget*>(QStringLiteral("gpuRow"));
}

}  // namespace

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

    // Every GPU NVML reports goes into the sample; the one chosen in Settings is also the sample's gpu.
    void aSampleCarriesEveryGpu() {
        const FakeGpus two({kH200a, kH200b});
        SystemSample s;
        addGpuReadings(s, two, 1);
        QCOMPARE(s.gpus.size(), 2);
        QCOMPARE(s.gpus[0].index, 0);
        QCOMPARE(s.gpus[0].busy, 0.25);
        QCOMPARE(s.gpus[1].index, 1);
        QCOMPARE(s.gpus[1].memoryUsed, gib(100.5));
        QVERIFY(s.gpu);
        QCOMPARE(s.gpu->index, 1);
        QCOMPARE(s.gpu->busy, 0.75);
        QVERIFY(s.gpuUnavailableReason.isEmpty());
        QCOMPARE(s.gpuReadings().size(), 2);

        SystemSample missing;  // the chosen GPU is not there: the others still show
        addGpuReadings(missing, two, 3);
        QCOMPARE(missing.gpus.size(), 2);
        QVERIFY(!missing.gpu);
        QCOMPARE(missing.gpuUnavailableReason, QStringLiteral("GPU 3 not found"));

        SystemSample every;  // every GPU as a pipeline: each has its line, the first leads
        addGpuReadings(every, two, kEveryGpuDevice);
        QCOMPARE(every.gpus.size(), 2);
        QVERIFY(every.gpu);
        QCOMPARE(every.gpu->index, 0);
        QVERIFY(every.gpuUnavailableReason.isEmpty());

        SystemSample cpuOnly;
        addGpuReadings(cpuOnly, two, -1);
        QVERIFY(cpuOnly.gpus.isEmpty() && !cpuOnly.gpu);
        QCOMPARE(cpuOnly.gpuUnavailableReason, QStringLiteral("CPU only, as chosen in Settings"));

        SystemSample noDriver;
        addGpuReadings(noDriver, FakeGpus({}, "no NVIDIA driver found"), 0);
        QVERIFY(noDriver.gpus.isEmpty() && !noDriver.gpu);
        QCOMPARE(noDriver.gpuUnavailableReason, QStringLiteral("no NVIDIA driver found"));

        SystemSample onlyGpu;  // a sample filled in by hand with the chosen GPU alone shows that one
        onlyGpu.gpu = kH200b;
        QCOMPARE(onlyGpu.gpuReadings().size(), 1);
        QCOMPARE(onlyGpu.gpuReadings()[0].index, 1);
    }

    // The monitor with another GPU source than NVML, on its own thread, as the app runs it.
    void monitorReportsEveryGpuFromItsSource() {
        SystemMonitor monitor([] { return std::make_unique<FakeGpus>(QList<GpuReading>{kH200a, kH200b}); });
        QList<SystemSample> samples;
        QSignalSpy found(&monitor, &SystemMonitor::gpusFound);
        connect(&monitor, &SystemMonitor::sampled, this, [&](const SystemSample& s) { samples << s; });
        monitor.setGpuDevice(1);
        monitor.start();
        QTRY_VERIFY_WITH_TIMEOUT(!samples.isEmpty(), 30000);
        QCOMPARE(monitor.gpuNames(), (QStringList{"NVIDIA H200", "NVIDIA H200"}));
        QCOMPARE(found.size(), 1);
        QCOMPARE(samples[0].gpus.size(), 2);
        QCOMPARE(samples[0].gpus[1].memoryUsed, gib(100.5));
        QVERIFY(samples[0].gpu);
        QCOMPARE(samples[0].gpu->index, 1);
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

    // Several GPUs: a labelled line and a gauge each, with its own figures; the chart plots the chosen one.
    void dashboardShowsARowPerGpu() {
        StatsModel stats;
        Dashboard dashboard(&stats);
        SystemSample s;
        s.cpuBusy = 0.5;
        addGpuReadings(s, FakeGpus({kH200a, kH200b}), 1);
        stats.addSample(s);
        const QStringList rows = dashboard.gpuRows();
        QCOMPARE(rows.size(), 2);
        QCOMPARE(rows[0], QStringLiteral("GPU 0 · NVIDIA H200: 25% busy · VRAM 12.3 / 141.0 GiB"));
        QCOMPARE(rows[1], QStringLiteral("GPU 1 · NVIDIA H200: 75% busy · VRAM 100.5 / 141.0 GiB"));
        const QList<QWidget*> widgets = gpuRowWidgets(dashboard);
        QCOMPARE(widgets.size(), 2);
        QList<int> gauges;
        for (QWidget* row : widgets) {
            auto* gauge = row->findChild<QProgressBar*>();
            QVERIFY(gauge && gauge->isVisibleTo(&dashboard));
            gauges << gauge->value();
        }
        std::sort(gauges.begin(), gauges.end());
        QCOMPARE(gauges, (QList<int>{25, 75}));
        QVERIFY(!dashboard.gpuReading().contains("not available"));
        QVERIFY(dashboard.gpuReading().contains("GPU 1 · NVIDIA H200: 75% busy"));
        QChart* chart = gpuChart(dashboard);
        QVERIFY(chart && chart->legend()->isVisible());
        QCOMPARE(chart->series().size(), 1);
        QCOMPARE(chart->series()[0]->name(), QStringLiteral("GPU 1 busy"));

        // The chosen GPU goes away: the others still show, and the dashboard says why nothing is charted.
        SystemSample missing;
        addGpuReadings(missing, FakeGpus({kH200a, kH200b}), 4);
        stats.addSample(missing);
        QCOMPARE(dashboard.gpuRows().size(), 2);
        QVERIFY2(dashboard.gpuReading().contains("Not charted: GPU 4 not found."), qPrintable(dashboard.gpuReading()));

        // A model on a server: no rows, this computer's GPUs are not what answers.
        ModelSummary remote;
        remote.name = "remote";
        remote.remote = true;
        remote.remoteUrl = "http://example.org:8080";
        dashboard.setModel(&remote, 0);
        QVERIFY(dashboard.gpuRows().isEmpty());
        QVERIFY(dashboard.gpuReading().contains("not applicable (remote)"));
        dashboard.setModel(nullptr, 0);
        QCOMPARE(dashboard.gpuRows().size(), 2);
    }

    // One GPU looks as it did before there were several: its line over the chart, no gauge, no legend.
    void dashboardShowsOneRowForOneGpu() {
        StatsModel stats;
        Dashboard dashboard(&stats);
        SystemSample s;
        addGpuReadings(s, FakeGpus({kH200a}), 0);
        stats.addSample(s);
        QCOMPARE(dashboard.gpuRows(), QStringList{"GPU 0 · NVIDIA H200: 25% busy · VRAM 12.3 / 141.0 GiB"});
        const QList<QWidget*> widgets = gpuRowWidgets(dashboard);
        QCOMPARE(widgets.size(), 1);
        QVERIFY(!widgets[0]->findChild<QProgressBar*>()->isVisibleTo(&dashboard));
        QCOMPARE(dashboard.gpuReading(), QStringLiteral("GPU 0 · NVIDIA H200: 25% busy · VRAM 12.3 / 141.0 GiB"));
        QChart* chart = gpuChart(dashboard);
        QVERIFY(chart && !chart->legend()->isVisible());
        QCOMPARE(chart->series()[0]->name(), QStringLiteral("busy"));
    }

    // From two GPUs to one to none: the rows of the GPUs that went away go, and none says why.
    void dashboardDropsTheRowsOfGpusThatWentAway() {
        StatsModel stats;
        Dashboard dashboard(&stats);
        dashboard.show();  // rows made while the dashboard is on screen must show too
        SystemSample s;
        addGpuReadings(s, FakeGpus({kH200a, kH200b}), 0);
        stats.addSample(s);
        QCOMPARE(dashboard.gpuRows().size(), 2);
        QCOMPARE(gpuRowWidgets(dashboard).size(), 2);

        SystemSample one;
        addGpuReadings(one, FakeGpus({kH200a}), 0);
        stats.addSample(one);
        QCOMPARE(dashboard.gpuRows(), QStringList{"GPU 0 · NVIDIA H200: 25% busy · VRAM 12.3 / 141.0 GiB"});
        QCOMPARE(gpuRowWidgets(dashboard).size(), 1);
        QVERIFY(!dashboard.gpuReading().contains("GPU 1"));
        QVERIFY(!gpuRowWidgets(dashboard)[0]->findChild<QProgressBar*>()->isVisible());

        SystemSample two;  // and back: a new row, shown although the dashboard already is
        addGpuReadings(two, FakeGpus({kH200a, kH200b}), 0);
        stats.addSample(two);
        QCOMPARE(dashboard.gpuRows().size(), 2);
        for (QWidget* row : gpuRowWidgets(dashboard)) QVERIFY(row->isVisible());

        SystemSample none;
        addGpuReadings(none, FakeGpus({}, "no NVIDIA driver found"), 0);
        stats.addSample(none);
        QVERIFY(dashboard.gpuRows().isEmpty());
        QVERIFY(gpuRowWidgets(dashboard).isEmpty());
        QCOMPARE(dashboard.gpuReading(), QStringLiteral("GPU: not available Not available: no NVIDIA driver found."));
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

    // The GPU path as a pipeline over several GPUs (ModelSummary::gpuStages): a line per GPU under the
    // placement reading; one GPU or none adds nothing.
    void dashboardListsEachGpusShare() {
        StatsModel stats;
        Dashboard dashboard(&stats);
        auto* stages = dashboard.findChild<QWidget*>(QStringLiteral("dashboardGpuStages"));
        QVERIFY(stages);
        const auto shown = [&] {
            QStringList texts;
            if (!stages->isVisibleTo(&dashboard)) return texts;
            for (QLabel* l : stages->findChildren<QLabel*>())
                if (l->isVisibleTo(&dashboard)) texts << l->text();
            return texts;
        };
        QVERIFY(shown().isEmpty());  // no model
        ModelSummary model;
        model.name = "moe";
        model.expertsPerToken = 8;
        model.expertLayers = "-GGGG";
        model.gpuStages = {"GPU 0 (NVIDIA H200): layers 0-1, 9.10 GB dense + KV, 30.20 GB for experts",
                           "GPU 1 (NVIDIA H200): layers 2-4, 8.90 GB dense + KV, 29.80 GB for experts"};
        dashboard.setModel(&model, 0);
        QCOMPARE(shown().size(), 1);
        const QString text = shown().first();
        QVERIFY2(text.contains("2 GPUs"), qPrintable(text));
        QVERIFY2(text.contains(model.gpuStages[0]) && text.contains(model.gpuStages[1]), qPrintable(text));
        QVERIFY2(text.indexOf(model.gpuStages[0]) < text.indexOf(model.gpuStages[1]), qPrintable(text));
        QCOMPARE(dashboard.placementReading(), QStringLiteral("4 of 4 MoE layers on the GPU (layers 1-4)"));  // still there
        model.gpuStages = {model.gpuStages[0]};  // one GPU: the strip says it all
        dashboard.setModel(&model, 0);
        QVERIFY(shown().isEmpty());
        model.gpuStages.clear();
        dashboard.setModel(&model, 0);
        QVERIFY(shown().isEmpty());
        QVERIFY(!dashboard.placementReading().isEmpty());
        dashboard.setModel(nullptr, 0);
        QVERIFY(shown().isEmpty());
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
