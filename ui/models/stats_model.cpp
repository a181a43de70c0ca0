#include "ui/models/stats_model.h"

namespace tandem::ui {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

QVariant optionalValue(const std::optional<double>& v) { return v ? QVariant(*v) : QVariant(); }

}  // namespace

StatsModel::StatsModel(QObject* parent) : QAbstractTableModel(parent) {}

int StatsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int StatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant StatsModel::data(const QModelIndex& index, int role) const {
    if (role != Qt::DisplayRole || !checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const Row& r = rows_[index.row()];
    switch (index.column()) {
    case Seconds: return r.seconds;
    case DecodeTokensPerSecond: return r.decodeRate;
    case CpuPercent: return r.cpu ? QVariant(*r.cpu * 100.0) : QVariant();
    case ExpertPoolPercent: return r.pool ? QVariant(*r.pool * 100.0) : QVariant();
    case GpuPercent: return r.gpu ? QVariant(*r.gpu * 100.0) : QVariant();
    case VramGiB: return optionalValue(r.vramGiB);
    case RamPercent: return r.ramFraction * 100.0;
    default: return {};
    }
}

QVariant StatsModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* const names[] = {"Time (s)", "Decode (tokens/s)", "CPU (%)", "Expert pool (%)",
                                        "GPU (%)", "VRAM (GiB)", "RAM (%)"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

double StatsModel::firstSeconds() const { return rows_.isEmpty() ? 0.0 : rows_.first().seconds; }
double StatsModel::lastSeconds() const { return rows_.isEmpty() ? 0.0 : rows_.last().seconds; }

void StatsModel::addSample(const SystemSample& sample) {
    latest_ = sample;
    Row r;
    r.seconds = sample.seconds;
    // Between answers the engine is idle: its figures drop to zero rather than repeat the last reading.
    const bool engineActive = generating_ || holdRateForOneSample_;
    holdRateForOneSample_ = false;
    r.decodeRate = engineActive ? decodeRate_ : 0.0;
    if (latestPool_) r.pool = engineActive ? *latestPool_ : 0.0;
    r.cpu = sample.cpuBusy;
    if (sample.gpu) {
        r.gpu = sample.gpu->busy;
        r.vramGiB = static_cast<double>(sample.gpu->memoryUsed) / kGiB;
    }
    r.ramFraction = sample.memoryTotal ? static_cast<double>(sample.memoryUsed) / static_cast<double>(sample.memoryTotal) : 0.0;
    if (rows_.size() >= kWindowRows) {
        beginRemoveRows({}, 0, 0);
        rows_.removeFirst();
        endRemoveRows();
    }
    beginInsertRows({}, static_cast<int>(rows_.size()), static_cast<int>(rows_.size()));
    rows_.append(r);
    endInsertRows();
    emit sampleAdded();
}

void StatsModel::setLiveEngineStats(const LiveEngineStats& stats) {
    decodeRate_ = stats.decodeTokensPerSecond;
    hasDecodeRate_ = true;
    latestPool_ = stats.expertPoolBusy;
}

void StatsModel::setAnswerStats(const AnswerStats& stats) {
    decodeRate_ = stats.decodeTokensPerSecond;
    hasDecodeRate_ = true;
    holdRateForOneSample_ = true;
    layerSplit_ = stats.layerSplit;
    emit layerSplitChanged();
}

void StatsModel::setGenerating(bool generating) { generating_ = generating; }

void StatsModel::forgetEngine() {
    decodeRate_ = 0;
    hasDecodeRate_ = false;
    holdRateForOneSample_ = false;
    latestPool_.reset();
    if (!layerSplit_.isEmpty()) {
        layerSplit_.clear();
        emit layerSplitChanged();
    }
}

}  // namespace tandem::ui
