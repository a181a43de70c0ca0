#pragma once
// The dashboard's figures over the last minute: one row per monitor reading, one column per metric,
// joined with the engine's latest decode speed. The charts map columns to series (QVXYModelMapper).
// Values the engine or the machine does not report are absent, and the available*() flags say so.
#include <QAbstractTableModel>
#include <QList>
#include <optional>

#include "ui/monitor/system_sample.h"
#include "ui/worker/engine_types.h"

namespace tandem::ui {

class StatsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Seconds, DecodeTokensPerSecond, CpuPercent, ExpertPoolPercent, GpuPercent, VramGiB, RamPercent, ColumnCount };
    static constexpr int kWindowRows = 120;  // one minute at two readings a second

    explicit StatsModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

    bool expertPoolAvailable() const { return latestPool_.has_value(); }
    const SystemSample& latestSample() const { return latest_; }
    // The last speed the engine measured, kept after the answer ends, until the model goes.
    double latestDecodeRate() const { return decodeRate_; }
    // Whether the loaded model has answered since it loaded (latestDecodeRate is its speed).
    bool hasDecodeRate() const { return hasDecodeRate_; }
    double firstSeconds() const;
    double lastSeconds() const;
    const QList<LayerSplit>& layerSplit() const { return layerSplit_; }

public slots:
    void addSample(const tandem::ui::SystemSample& sample);
    void setLiveEngineStats(const tandem::ui::LiveEngineStats& stats);
    void setAnswerStats(const tandem::ui::AnswerStats& stats);
    void setGenerating(bool generating);
    // The model was unloaded or is being replaced: its speed, expert-pool reading and layer split are no
    // longer what the engine does.
    void forgetEngine();

signals:
    void sampleAdded();
    void layerSplitChanged();

private:
    struct Row {
        double seconds = 0;
        double decodeRate = 0;
        std::optional<double> cpu;
        std::optional<double> pool;
        std::optional<double> gpu;
        std::optional<double> vramGiB;
        double ramFraction = 0;
    };
    QList<Row> rows_;
    SystemSample latest_;
    double decodeRate_ = 0;
    bool hasDecodeRate_ = false;
    std::optional<double> latestPool_;
    bool generating_ = false;
    // An answer shorter than one reading still shows its speed once.
    bool holdRateForOneSample_ = false;
    QList<LayerSplit> layerSplit_;
};

}  // namespace tandem::ui
