#pragma once
// GPU utilization and memory through NVML, loaded at run time: on a machine without an NVIDIA driver
// the library is simply absent and every reading says why.
#include <QLibrary>
#include <QString>
#include <QStringList>
#include <optional>

#include "ui/monitor/system_sample.h"

namespace tandem::ui {

class NvmlGpu {
public:
    NvmlGpu();
    ~NvmlGpu();
    NvmlGpu(const NvmlGpu&) = delete;
    NvmlGpu& operator=(const NvmlGpu&) = delete;

    bool isAvailable() const { return initialized_; }
    // Why there are no readings, for the dashboard.
    QString unavailableReason() const { return reason_; }
    QStringList deviceNames() const;
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
