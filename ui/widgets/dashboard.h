#pragma once
// The live panel: the loaded model, charts of decode speed, CPU (machine and expert pool), GPU and
// memory over the last minute (a line per GPU above the GPU chart: its utilization and memory, and with
// several GPUs a gauge each; the chart plots the GPU chosen in Settings), the per-layer time split of the last answer, and the deferral slider.
// It shows the StatsModel and reports the slider; figures nobody measures say "not available". For a model
// on a server the speed is the server's, measured from the chunks it streams, and the CPU, GPU and layer
// panels say they do not apply.
#include <QWidget>

#include "ui/worker/engine_types.h"

class QLabel;
class QProgressBar;
class QChart;
class QChartView;
class QLineSeries;
class QValueAxis;

namespace tandem::ui {

class DeferralPanel;
class PlacementStrip;
class StatsModel;
struct SystemSample;

class Dashboard : public QWidget {
    Q_OBJECT
public:
    explicit Dashboard(StatsModel* stats, QWidget* parent = nullptr);

    void setModel(const ModelSummary* summary, int deferral);  // null: no model loaded
    void setDeferral(int experts);
    DeferralPanel* deferralPanel() const { return deferral_; }
    // The one-line readings under each chart's title, for tests and screen readers.
    QString decodeReading() const;
    QString cpuReading() const;
    QString gpuReading() const;
    // One line per GPU shown, by index: "GPU 0 · NVIDIA H200: 25% busy · VRAM 10.0 / 80.0 GiB"; empty
    // without GPU readings or for a model on a server.
    QStringList gpuRows() const;
    QString memoryReading() const;
    QString layerSplitReading() const;
    QString placementReading() const;
    // What a model on the CPU only can be expected to do (ModelSummary::cpuExpectation), or empty.
    QString expectationReading() const;

signals:
    void deferralChosen(int experts);

protected:
    void changeEvent(QEvent* event) override;

private:
    struct Chart {
        QChart* chart = nullptr;
        QChartView* view = nullptr;
        QValueAxis* x = nullptr;
        QValueAxis* y = nullptr;
        QLabel* reading = nullptr;
        QList<QLineSeries*> series;
    };
    Chart makeChart(const QString& title, const QString& unit, double yMax);
    QLineSeries* addSeries(Chart& chart, const QString& name, int column, const QColor& color);
    void onSample();
    void showGpus(const SystemSample& sample);
    void showLayerSplit();
    // ModelSummary::expertLayers and gpuStages (listed under the reading with two or more); both empty
    // hide the section.
    void showPlacement(const QString& map, const QStringList& gpuStages = {});
    void applyPalette();

    StatsModel* stats_;
    QLabel* modelName_;
    QLabel* modelDetails_;
    QLabel* expectation_;
    QLabel* placementTitle_;
    QLabel* placementReading_;
    PlacementStrip* placement_;
    QWidget* gpuStages_;  // "dashboardGpuStages": each GPU's share when the GPU path spans several
    QLabel* gpuStagesText_;
    Chart decode_;
    Chart cpu_;
    Chart gpu_;
    Chart memory_;
    QLineSeries* poolSeries_ = nullptr;
    QLineSeries* gpuSeries_ = nullptr;
    struct GpuRow {
        QWidget* row = nullptr;
        QLabel* label = nullptr;
        QProgressBar* gauge = nullptr;  // shown with several GPUs, where the chart plots only one
    };
    QWidget* gpuRowsBox_;
    QList<GpuRow> gpuRows_;  // one per GPU in the latest sample, by index
    QLabel* gpuMissing_;
    QLabel* splitMissing_;
    QChartView* splitView_;
    DeferralPanel* deferral_;
    // The model runs on a server: this computer's CPU and GPU are not what answers; where it runs.
    bool remote_ = false;
    QString remoteServer_;
};

}  // namespace tandem::ui
