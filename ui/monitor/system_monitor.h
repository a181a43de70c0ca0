#pragma once
// Samples the machine twice a second on its own thread (an NVML call can take a few milliseconds) and
// reports each reading with a queued signal.
#include <QElapsedTimer>
#include <QObject>
#include <QThread>
#include <QTimer>
#include <memory>
#include <optional>

#include "ui/monitor/nvml_gpu.h"
#include "ui/monitor/proc_readers.h"
#include "ui/monitor/system_sample.h"

namespace tandem::ui {

// Lives on the monitor thread.
class SystemSampler : public QObject {
    Q_OBJECT
public:
    explicit SystemSampler(int intervalMs);
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
    QTimer* timer_ = nullptr;
    std::unique_ptr<NvmlGpu> nvml_;
    std::optional<CpuTimes> lastCpu_;
    QElapsedTimer clock_;
    int gpuDevice_ = 0;
};

class SystemMonitor : public QObject {
    Q_OBJECT
public:
    static constexpr int kIntervalMs = 500;

    explicit SystemMonitor(QObject* parent = nullptr);
    ~SystemMonitor() override;

    void start();
    // Which GPU to report; -1 reports none.
    void setGpuDevice(int device);
    // The NVIDIA GPUs found once the monitor has started; empty without a driver.
    QStringList gpuNames() const { return gpuNames_; }

signals:
    void sampled(const tandem::ui::SystemSample& sample);
    void gpusFound(const QStringList& names);

private:
    QStringList gpuNames_;
    QThread thread_;
    SystemSampler* sampler_;
};

}  // namespace tandem::ui
