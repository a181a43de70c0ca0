#pragma once
// One reading of the machine: what the dashboard plots besides the engine's own figures.
#include <QList>
#include <QMetaType>
#include <QString>
#include <optional>

namespace tandem::ui {

struct GpuReading {
    QString name;
    double busy = 0;  // 0..1
    quint64 memoryUsed = 0;
    quint64 memoryTotal = 0;
    int index = 0;  // NVML's device index (what Settings calls GPU 0, GPU 1, ...)
};

struct SystemSample {
    double seconds = 0;              // since the monitor started
    std::optional<double> cpuBusy;   // whole machine, 0..1; absent on the first reading
    quint64 memoryUsed = 0;          // bytes, MemTotal - MemAvailable
    quint64 memoryTotal = 0;
    quint64 appResident = 0;         // this process
    std::optional<GpuReading> gpu;   // the GPU chosen in Settings; absent without an NVIDIA driver or CPU only
    QList<GpuReading> gpus;          // every GPU NVML reports, by index; empty without a driver or CPU only
    QString gpuUnavailableReason;    // why gpu is absent

    // Each GPU to show, by index: gpus, or gpu alone where a sample carries only that.
    QList<GpuReading> gpuReadings() const {
        if (!gpus.isEmpty() || !gpu) return gpus;
        return {*gpu};
    }
};

}  // namespace tandem::ui

Q_DECLARE_METATYPE(tandem::ui::SystemSample)
