#pragma once
// GPU utilization and memory through NVML, loaded at run time: on a machine without an NVIDIA driver
// the library is simply absent and every reading says why.
#include <QLibrary>
#include <QString>
#include <QStringList>
#include <optional>

#include "ui/monitor/system_sample.h"

namespace tandem::ui {

// Where the system monitor's GPU readings come from: NVML in the app, a fixed list in tests, so the
// monitor is tested without an NVIDIA driver.
class GpuSource {
public:
    virtual ~GpuSource() = default;
    virtual bool isAvailable() const = 0;
    // Why there are no readings, for the dashboard.
    virtual QString unavailableReason() const = 0;
    virtual QStringList deviceNames() const = 0;
    // One reading per GPU that answers, by index; a GPU that does not answer is left out.
    virtual QList<GpuReading> readAll() const = 0;
};

class NvmlGpu : public GpuSource {
public:
    NvmlGpu();
    ~NvmlGpu() override;
    NvmlGpu(const NvmlGpu&) = delete;
    NvmlGpu& operator=(const NvmlGpu&) = delete;

    bool isAvailable() const override { return initialized_; }
    QString unavailableReason() const override { return reason_; }
    QStringList deviceNames() const override;
    QList<GpuReading> readAll() const override;
    std::optional<GpuReading> read(int device) const;

private:
    template <typename F>
    F resolve(const char* name);

    QLibrary library_;
    bool initialized_ = false;
    QString reason_;
    struct Api;
    Api* api_ = nullptr;
};

}  // namespace tandem::ui
