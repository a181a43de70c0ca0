#include "ui/widgets/dashboard.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QHBoxLayout>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLocale>
#include <QProgressBar>
#include <QScrollArea>
#include <QStackedBarSeries>
#include <QVBoxLayout>
#include <QVXYModelMapper>
#include <QValueAxis>
#include <cmath>

#include "ui/models/stats_model.h"
#include "ui/widgets/deferral_panel.h"
#include "ui/widgets/placement_strip.h"
#include "ui/worker/remote_api.h"

namespace tandem::ui {
namespace {

constexpr double kWindowSeconds = 60.0;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
const QColor kBlue(0x3b, 0x82, 0xf6);
const QColor kOrange(0xf5, 0x9e, 0x0b);
const QColor kGreen(0x10, 0xb9, 0x81);
const QColor kPurple(0x8b, 0x5c, 0xf6);

QString gib(quint64 bytes) { return QLocale().toString(static_cast<double>(bytes) / kGiB, 'f', 1); }
QString bytes(quint64 n) { return QLocale().formattedDataSize(static_cast<qint64>(n), 1, QLocale::DataSizeSIFormat); }
QString percent(double fraction) { return QStringLiteral("%1%").arg(std::lround(fraction * 100.0)); }

QLabel* sectionTitle(const QString& text, QWidget* parent) {
    auto* label = new QLabel(text, parent);
    label->setObjectName(QStringLiteral("dashboardTitle"));
    label->setWordWrap(true);  // a narrow dashboard wraps its readings rather than widen the window
    return label;
}

}  // namespace

Dashboard::Dashboard(StatsModel* stats, QWidget* parent)
    : QWidget(parent), stats_(stats), modelName_(new QLabel(this)), modelDetails_(new QLabel(this)), expectation_(new QLabel(this)),
      placementTitle_(sectionTitle(tr("Where the experts run"), this)), placementReading_(new QLabel(this)),
      placement_(new PlacementStrip(this)), gpuStages_(new QWidget(this)), gpuStagesText_(new QLabel(gpuStages_)),
      gpuRowsBox_(new QWidget(this)), gpuMissing_(new QLabel(this)), splitMissing_(new QLabel(this)), splitView_(new QChartView(this)), deferral_(new DeferralPanel(this)) {
    setObjectName(QStringLiteral("dashboard"));
    setAccessibleName(tr("Dashboard"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(10, 10, 10, 10);
    layout->setSpacing(4);

    modelName_->setObjectName(QStringLiteral("dashboardModel"));
    modelName_->setWordWrap(true);
    modelDetails_->setWordWrap(true);
    modelDetails_->setObjectName(QStringLiteral("hint"));
    layout->addWidget(modelName_);
    layout->addWidget(modelDetails_);
    expectation_->setWordWrap(true);
    expectation_->setObjectName(QStringLiteral("hint"));
    expectation_->hide();
    layout->addWidget(expectation_);
    placementReading_->setWordWrap(true);
    placementReading_->setObjectName(QStringLiteral("hint"));
    layout->addWidget(placementTitle_);
    layout->addWidget(placement_);
    layout->addWidget(placementReading_);
    // With the GPU path as a pipeline over several GPUs: a line per GPU, its layers and memory.
    gpuStages_->setObjectName(QStringLiteral("dashboardGpuStages"));
    auto* stagesLayout = new QVBoxLayout(gpuStages_);
    stagesLayout->setContentsMargins(0, 0, 0, 0);
    gpuStagesText_->setWordWrap(true);
    gpuStagesText_->setTextFormat(Qt::PlainText);
    gpuStagesText_->setObjectName(QStringLiteral("hint"));
    stagesLayout->addWidget(gpuStagesText_);
    gpuStages_->hide();
    layout->addWidget(gpuStages_);

    decode_ = makeChart(tr("Decode speed"), tr("tokens/s"), 10);
    // Qt Charts sizes the label column once; room for five digits keeps 10,000 tokens/s readable.
    decode_.y->setLabelFormat(QStringLiteral("%5.0f"));
    addSeries(decode_, tr("tokens/s"), StatsModel::DecodeTokensPerSecond, kBlue);
    cpu_ = makeChart(tr("CPU"), QStringLiteral("%"), 100);
    addSeries(cpu_, tr("machine"), StatsModel::CpuPercent, kOrange);
    poolSeries_ = addSeries(cpu_, tr("expert pool"), StatsModel::ExpertPoolPercent, kPurple);
    gpu_ = makeChart(tr("GPU"), QStringLiteral("%"), 100);
    gpuSeries_ = addSeries(gpu_, tr("busy"), StatsModel::GpuPercent, kGreen);
    memory_ = makeChart(tr("Memory"), QStringLiteral("%"), 100);
    addSeries(memory_, tr("RAM in use"), StatsModel::RamPercent, kBlue);

    for (Chart* c : {&decode_, &cpu_}) {
        layout->addWidget(c->reading);
        layout->addWidget(c->view);
    }
    layout->addWidget(gpu_.reading);
    auto* gpuRowsLayout = new QVBoxLayout(gpuRowsBox_);
    gpuRowsLayout->setContentsMargins(0, 0, 0, 0);
    gpuRowsLayout->setSpacing(2);
    layout->addWidget(gpuRowsBox_);
    gpuMissing_->setWordWrap(true);
    gpuMissing_->setObjectName(QStringLiteral("hint"));
    layout->addWidget(gpu_.view);
    layout->addWidget(gpuMissing_);
    layout->addWidget(memory_.reading);
    layout->addWidget(memory_.view);

    layout->addWidget(sectionTitle(tr("Per-layer time, last answer"), this));
    splitMissing_->setWordWrap(true);
    splitMissing_->setObjectName(QStringLiteral("hint"));
    splitMissing_->setText(tr("Appears after an answer: where each MoE layer's time goes (GPU attention / "
                              "CPU experts / waiting)."));
    splitView_->setMinimumHeight(150);
    splitView_->setRenderHint(QPainter::Antialiasing);
    splitView_->setAccessibleName(tr("Per-layer time split chart"));
    layout->addWidget(splitMissing_);
    layout->addWidget(splitView_);

    layout->addSpacing(6);
    layout->addWidget(deferral_);
    layout->addStretch();
    connect(deferral_, &DeferralPanel::deferralChosen, this, &Dashboard::deferralChosen);
    connect(stats_, &StatsModel::sampleAdded, this, &Dashboard::onSample);
    connect(stats_, &StatsModel::layerSplitChanged, this, &Dashboard::showLayerSplit);

    setModel(nullptr, 0);
    applyPalette();
    onSample();
    showLayerSplit();
}

Dashboard::Chart Dashboard::makeChart(const QString& title, const QString& unit, double yMax) {
    Chart c;
    c.chart = new QChart;
    c.chart->legend()->setVisible(false);
    c.chart->setMargins(QMargins(2, 2, 2, 2));
    c.chart->setBackgroundRoundness(0);
    c.x = new QValueAxis(c.chart);
    c.x->setRange(-kWindowSeconds, 0);
    c.x->setLabelsVisible(false);
    c.x->setTickCount(7);
    c.y = new QValueAxis(c.chart);
    c.y->setRange(0, yMax);
    c.y->setTickCount(3);
    c.y->setLabelFormat(QStringLiteral("%.0f"));
    c.chart->addAxis(c.x, Qt::AlignBottom);
    c.chart->addAxis(c.y, Qt::AlignLeft);
    c.view = new QChartView(c.chart, this);
    c.view->setRenderHint(QPainter::Antialiasing);
    c.view->setMinimumHeight(96);
    c.view->setAccessibleName(tr("%1 chart, %2").arg(title, unit));
    c.reading = sectionTitle(title, this);
    return c;
}

QLineSeries* Dashboard::addSeries(Chart& chart, const QString& name, int column, const QColor& color) {
    auto* series = new QLineSeries(chart.chart);
    series->setName(name);
    QPen pen(color);
    pen.setWidthF(2.0);
    series->setPen(pen);
    chart.chart->addSeries(series);
    series->attachAxis(chart.x);
    series->attachAxis(chart.y);
    auto* mapper = new QVXYModelMapper(series);
    mapper->setXColumn(StatsModel::Seconds);
    mapper->setYColumn(column);
    mapper->setSeries(series);
    mapper->setModel(stats_);
    chart.series.append(series);
    if (chart.series.size() > 1) {
        chart.chart->legend()->setVisible(true);
        chart.chart->legend()->setAlignment(Qt::AlignTop);
    }
    return series;
}

void Dashboard::setModel(const ModelSummary* summary, int deferral) {
    remote_ = summary && summary->remote;
    remoteServer_ = remote_ ? remoteServerName(summary->remoteUrl) : QString();
    splitMissing_->setText(remote_ ? tr("Not applicable: the model runs on the server at %1, which does not report its "
                                        "layers.").arg(remoteServer_)
                                   : tr("Appears after an answer: where each MoE layer's time goes (GPU attention / "
                                        "CPU experts / waiting)."));
    onSample();
    if (remote_) {
        showPlacement({});
        modelName_->setText(summary->name);
        QStringList details{tr("On a server: %1").arg(summary->remoteUrl), tr("model %1").arg(summary->remoteModel)};
        if (summary->contextLength > 0) details << tr("context %1").arg(QLocale().toString(summary->contextLength));
        modelDetails_->setText(details.join(QStringLiteral(" · ")));
        expectation_->clear();
        expectation_->hide();
        deferral_->setModel(0, 0);
        deferral_->hide();  // the server decides how its experts run
        return;
    }
    deferral_->show();
    if (!summary) {
        modelName_->setText(tr("No model loaded"));
        modelDetails_->clear();
        expectation_->clear();
        expectation_->hide();
        showPlacement({});
        deferral_->setModel(0, 0);
        return;
    }
    showPlacement(summary->expertLayers, summary->gpuStages);
    modelName_->setText(summary->name);
    QStringList details{summary->modelType, tr("%1 layers").arg(summary->layers)};
    if (summary->experts > 0) details << tr("%1 experts, %2 per token").arg(summary->experts).arg(summary->expertsPerToken);
    details << (summary->threads == 1 ? tr("1 thread") : tr("%1 threads").arg(summary->threads))
            << tr("%1 of weights").arg(bytes(summary->weightBytes))
            << tr("context %1").arg(QLocale().toString(summary->contextLength));
    modelDetails_->setText(details.join(QStringLiteral(" · ")));
    expectation_->setText(summary->cpuExpectation);
    expectation_->setVisible(!summary->cpuExpectation.isEmpty());
    deferral_->setModel(summary->expertsPerToken, deferral);
}

void Dashboard::setDeferral(int experts) { deferral_->setDeferral(experts); }

void Dashboard::showPlacement(const QString& map, const QStringList& gpuStages) {
    placement_->setMap(map);
    placementReading_->setText(placement_->reading());
    placementReading_->setVisible(!map.isEmpty());
    // One GPU (or none) says nothing more than the strip does.
    const bool stages = gpuStages.size() >= 2;
    gpuStagesText_->setText(stages ? tr("Across %1 GPUs, by layer:").arg(gpuStages.size()) + QLatin1Char('\n') +
                                         gpuStages.join(QLatin1Char('\n'))
                                   : QString());
    gpuStages_->setVisible(stages);
    placementTitle_->setVisible(!map.isEmpty() || stages);
}

void Dashboard::onSample() {
    const double last = stats_->lastSeconds();
    for (Chart* c : {&decode_, &cpu_, &gpu_, &memory_}) c->x->setRange(last - kWindowSeconds, last);
    const SystemSample& s = stats_->latestSample();
    const QLocale locale;

    // Decode speed: the axis grows with the fastest speed in view, in round steps.
    double fastest = 0;
    for (int row = 0; row < stats_->rowCount(); ++row)
        fastest = std::max(fastest, stats_->index(row, StatsModel::DecodeTokensPerSecond).data().toDouble());
    const double step = fastest > 1000 ? 1000 : fastest > 100 ? 100 : 10;
    decode_.y->setRange(0, std::max(10.0, std::ceil(fastest * 1.15 / step) * step));
    decode_.reading->setText(stats_->hasDecodeRate()
                                 ? (remote_ ? tr("Decode speed: %1 tokens/s (remote, as streamed)") : tr("Decode speed: %1 tokens/s"))
                                       .arg(locale.toString(stats_->latestDecodeRate(), 'f', 1))
                                 : remote_ ? tr("Decode speed: none yet (measured from what the server streams)")
                                           : tr("Decode speed: none yet (measured while the model answers)"));

    if (remote_) {
        // What this computer's CPU and GPU do says nothing about the answers: the server makes them.
        cpu_.view->hide();
        gpu_.view->hide();
        gpuRowsBox_->hide();
        gpu_.reading->show();
        gpuMissing_->show();
        cpu_.reading->setText(tr("CPU: not applicable (remote): the model runs on the server at %1").arg(remoteServer_));
        gpu_.reading->setText(tr("GPU: not applicable (remote)"));
        gpuMissing_->setText(tr("The model runs on the server at %1, on its own hardware.").arg(remoteServer_));
        memory_.reading->setText(s.memoryTotal == 0 ? tr("Memory: measuring…")
                                                    : tr("Memory: %1 / %2 GiB in use · Tandem %3 GiB")
                                                          .arg(gib(s.memoryUsed), gib(s.memoryTotal), gib(s.appResident)));
        return;
    }
    cpu_.view->show();
    const QString machine = s.cpuBusy ? percent(*s.cpuBusy) : tr("measuring…");
    const bool pool = stats_->expertPoolAvailable();
    poolSeries_->setVisible(pool);
    cpu_.chart->legend()->setVisible(pool);
    cpu_.reading->setText(pool ? tr("CPU: %1 machine").arg(machine)
                               : tr("CPU: %1 machine · expert pool: not available").arg(machine));

    showGpus(s);

    memory_.reading->setText(s.memoryTotal == 0 ? tr("Memory: measuring…")
                                                : tr("Memory: %1 / %2 GiB in use · Tandem %3 GiB")
                                                      .arg(gib(s.memoryUsed), gib(s.memoryTotal), gib(s.appResident)));
}

void Dashboard::showGpus(const SystemSample& s) {
    const QList<GpuReading> gpus = s.gpuReadings();
    // A row per GPU: the rows of GPUs that went away go with them.
    while (gpuRows_.size() > gpus.size()) delete gpuRows_.takeLast().row;
    while (gpuRows_.size() < gpus.size()) {
        GpuRow r;
        r.row = new QWidget(gpuRowsBox_);
        r.row->setObjectName(QStringLiteral("gpuRow"));
        auto* rowLayout = new QHBoxLayout(r.row);
        rowLayout->setContentsMargins(0, 0, 0, 0);
        r.label = sectionTitle(QString(), r.row);  // each GPU's line reads as the section's title
        r.gauge = new QProgressBar(r.row);
        r.gauge->setRange(0, 100);
        r.gauge->setTextVisible(false);
        r.gauge->setFixedWidth(90);
        rowLayout->addWidget(r.label, 1);
        rowLayout->addWidget(r.gauge);
        gpuRowsBox_->layout()->addWidget(r.row);
        r.row->show();
        gpuRows_.append(r);
    }
    for (qsizetype i = 0; i < gpus.size(); ++i) {
        const GpuReading& g = gpus[i];
        const QString label = g.name.isEmpty() ? tr("GPU %1").arg(g.index) : tr("GPU %1 · %2").arg(g.index).arg(g.name);
        gpuRows_[i].label->setText(tr("%1: %2 busy · VRAM %3 / %4 GiB")
                                       .arg(label, percent(g.busy), gib(g.memoryUsed), gib(g.memoryTotal)));
        gpuRows_[i].gauge->setValue(static_cast<int>(std::lround(g.busy * 100.0)));
        gpuRows_[i].gauge->setAccessibleName(tr("%1 utilization").arg(label));
        // One GPU: its line over the chart, as before there were several.
        gpuRows_[i].gauge->setVisible(gpus.size() > 1);
    }
    gpuRowsBox_->setVisible(!gpus.isEmpty());
    gpu_.reading->setVisible(gpus.isEmpty());

    // The chart plots the GPU chosen in Settings; with several, the legend says which.
    const bool several = gpus.size() > 1;
    if (s.gpu) gpuSeries_->setName(several ? tr("GPU %1 busy").arg(s.gpu->index) : tr("busy"));
    gpu_.chart->legend()->setVisible(several && s.gpu);
    gpu_.view->setVisible(s.gpu.has_value());
    if (gpus.isEmpty()) {
        gpu_.reading->setText(tr("GPU: not available"));
        gpuMissing_->setText(s.gpuUnavailableReason.isEmpty() ? tr("Not available.")
                                                              : tr("Not available: %1.").arg(s.gpuUnavailableReason));
        gpuMissing_->show();
    } else if (!s.gpu) {
        // GPUs answer, but not the one chosen in Settings: nothing to chart.
        gpuMissing_->setText(s.gpuUnavailableReason.isEmpty() ? tr("Not charted.")
                                                              : tr("Not charted: %1.").arg(s.gpuUnavailableReason));
        gpuMissing_->show();
    } else {
        gpuMissing_->hide();
    }
}

void Dashboard::showLayerSplit() {
    const QList<LayerSplit>& split = stats_->layerSplit();
    if (split.isEmpty()) {
        splitView_->hide();
        splitMissing_->show();
        return;
    }
    auto* chart = new QChart;
    auto* series = new QStackedBarSeries(chart);
    auto* gpu = new QBarSet(tr("GPU attention"));
    auto* cpu = new QBarSet(tr("CPU experts"));
    auto* wait = new QBarSet(tr("waiting"));
    gpu->setColor(kGreen);
    cpu->setColor(kOrange);
    wait->setColor(QColor(0x9c, 0xa3, 0xaf));
    QStringList layers;
    for (qsizetype i = 0; i < split.size(); ++i) {
        *gpu << split[i].gpuAttention * 100.0;
        *cpu << split[i].cpuExperts * 100.0;
        *wait << split[i].waiting * 100.0;
        layers << QString::number(i);
    }
    series->append({gpu, cpu, wait});
    chart->addSeries(series);
    auto* x = new QBarCategoryAxis(chart);
    x->append(layers);
    x->setLabelsVisible(split.size() <= 32);
    auto* y = new QValueAxis(chart);
    y->setRange(0, 100);
    y->setLabelFormat(QStringLiteral("%.0f%%"));
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
    chart->legend()->setAlignment(Qt::AlignTop);
    chart->setMargins(QMargins(2, 2, 2, 2));
    QChart* old = splitView_->chart();
    splitView_->setChart(chart);
    delete old;
    applyPalette();
    splitMissing_->hide();
    splitView_->show();
}

void Dashboard::changeEvent(QEvent* event) {
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) applyPalette();
}

void Dashboard::applyPalette() {
    const QPalette p = palette();
    QList<QChart*> charts{decode_.chart, cpu_.chart, gpu_.chart, memory_.chart, splitView_->chart()};
    for (QChart* chart : charts) {
        if (!chart) continue;
        chart->setBackgroundBrush(p.color(QPalette::Base));
        chart->setBackgroundPen(Qt::NoPen);
        chart->legend()->setLabelColor(p.color(QPalette::Text));
        for (QAbstractAxis* axis : chart->axes()) {
            axis->setLabelsColor(p.color(QPalette::Text));
            QColor grid = p.color(QPalette::Text);
            grid.setAlphaF(0.12f);
            axis->setGridLineColor(grid);
            axis->setLinePenColor(grid);
        }
    }
}

QString Dashboard::decodeReading() const { return decode_.reading->text(); }
QString Dashboard::cpuReading() const { return cpu_.reading->text(); }
QString Dashboard::gpuReading() const {
    QStringList parts;
    if (gpu_.reading->isVisibleTo(this)) parts << gpu_.reading->text();
    parts << gpuRows();
    if (gpuMissing_->isVisibleTo(this)) parts << gpuMissing_->text();
    return parts.join(QLatin1Char(' '));
}

QStringList Dashboard::gpuRows() const {
    QStringList rows;
    if (!gpuRowsBox_->isVisibleTo(this)) return rows;
    for (const GpuRow& r : gpuRows_) rows << r.label->text();
    return rows;
}
QString Dashboard::memoryReading() const { return memory_.reading->text(); }
QString Dashboard::expectationReading() const { return expectation_->isVisibleTo(this) ? expectation_->text() : QString(); }

QString Dashboard::placementReading() const { return placement_->isVisibleTo(this) ? placement_->reading() : QString(); }
QString Dashboard::layerSplitReading() const {
    return splitMissing_->isVisibleTo(this) ? splitMissing_->text()
                                                         : tr("%1 layers").arg(stats_->layerSplit().size());
}

}  // namespace tandem::ui
