#pragma once
// Samples the machine twice a second on its own thread (an NVML call can take a few milliseconds) and
// reports each reading with a queued signal.
#include <QElapsedTimer>
#include <QObject>
#include <QThread>
#include <QTimer>
#include <functional>
#include <memory>
#include <optional>

#include "ui/monitor/nvml_gpu.h"
#include "ui/monitor/proc_readers.h"
#include "ui/monitor/system_sample.h"

namespace tandem::ui {

// Makes the GPU source on the monitor thread; an empty one makes NvmlGpu.
using GpuSourceFactory = std::function<std::unique_ptr<GpuSource>()>;

// Fills a sample's GPU readings: every GPU the source reports in gpus, the one chosen in Settings
// (chosenDevice, -1 for CPU only, below -1 every GPU: the first) in gpu, and, where gpu stays empty, why.
void addGpuReadings(SystemSample& sample, const GpuSource& source, int chosenDevice);

// Lives on the monitor thread.
class SystemSampler : public QObject {
    Q_OBJECT
public:
    explicit SystemSampler(int intervalMs, GpuSourceFactory makeGpuSource = {});
    ~SystemSampler() override;

public slots:
    void start();
    void setGpuDevice(int device);

signals:
    void sampled(const tandem::ui::SystemSample& sample);
    void gpusFound(const QStringList& names);

private:
    void sample();

    int intervalMs_;
    GpuSourceFactory makeGpuSource_;
    QTimer* timer_ = nullptr;
    std::unique_ptr<GpuSource> gpuSource_;
    std::optional<CpuTimes> lastCpu_;
    QElapsedTimer clock_;
    int gpuDevice_ = 0;
};

class SystemMonitor : public QObject {
    Q_OBJECT
public:
    static constexpr int kIntervalMs = 500;

    explicit SystemMonitor(QObject* parent = nullptr);
    // Readings from another GPU source than NVML: for tests.
    explicit SystemMonitor(GpuSourceFactory makeGpuSource, QObject* parent = nullptr);
    ~SystemMonitor() override;

    void start();
    // Which GPU is the chosen one (SystemSample::gpu); -1 reports none at all (CPU only).
    void setGpuDevice(int device);
    int gpuDevice() const { return gpuDevice_; }
    // The NVIDIA GPUs found once the monitor has started; empty without a driver.
    QStringList gpuNames() const { return gpuNames_; }

signals:
    void sampled(const tandem::ui::SystemSample& sample);
    void gpusFound(const QStringList& names);

private:
    QStringList gpuNames_;
    int gpuDevice_ = 0;  // the last setGpuDevice's (the sampler's thread has its own copy)
    QThread thread_;
    SystemSampler* sampler_;
};

}  // namespace tandem::ui
