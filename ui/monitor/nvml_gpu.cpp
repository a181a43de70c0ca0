#include "ui/monitor/nvml_gpu.h"

namespace tandem::ui {
namespace {

// The few NVML declarations used, from NVIDIA's documented C API (nvml.h). Declared here rather than
// included so the app builds and runs without the CUDA toolkit or a driver.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlUtilization_t {
    unsigned int gpu;
    unsigned int memory;
};
struct nvmlMemory_t {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;

}  // namespace

struct NvmlGpu::Api {
    nvmlReturn_t (*init)() = nullptr;
    nvmlReturn_t (*shutdown)() = nullptr;
    nvmlReturn_t (*deviceCount)(unsigned int*) = nullptr;
    nvmlReturn_t (*deviceByIndex)(unsigned int, nvmlDevice_t*) = nullptr;
    nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
    nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
};

template <typename F>
F NvmlGpu::resolve(const char* name) {
    return reinterpret_cast<F>(library_.resolve(name));
}

NvmlGpu::NvmlGpu() : library_(QStringLiteral("nvidia-ml"), 1) {
    if (!library_.load()) {
        reason_ = QStringLiteral("no NVIDIA driver found");
        return;
    }
    api_ = new Api;
    api_->init = resolve<decltype(api_->init)>("nvmlInit_v2");
    api_->shutdown = resolve<decltype(api_->shutdown)>("nvmlShutdown");
    api_->deviceCount = resolve<decltype(api_->deviceCount)>("nvmlDeviceGetCount_v2");
    api_->deviceByIndex = resolve<decltype(api_->deviceByIndex)>("nvmlDeviceGetHandleByIndex_v2");
    api_->utilization = resolve<decltype(api_->utilization)>("nvmlDeviceGetUtilizationRates");
    api_->memory = resolve<decltype(api_->memory)>("nvmlDeviceGetMemoryInfo");
    api_->name = resolve<decltype(api_->name)>("nvmlDeviceGetName");
    if (!api_->init || !api_->shutdown || !api_->deviceCount || !api_->deviceByIndex || !api_->utilization ||
        !api_->memory || !api_->name) {
        reason_ = QStringLiteral("the NVIDIA management library is too old");
        return;
    }
    if (api_->init() != kNvmlSuccess) {
        reason_ = QStringLiteral("the NVIDIA driver did not respond");
        return;
    }
    unsigned int count = 0;
    if (api_->deviceCount(&count) != kNvmlSuccess || count == 0) {
        api_->shutdown();
        reason_ = QStringLiteral("no NVIDIA GPU found");
        return;
    }
    initialized_ = true;
}

NvmlGpu::~NvmlGpu() {
    if (initialized_) api_->shutdown();
    delete api_;
}

QStringList NvmlGpu::deviceNames() const {
    QStringList names;
    if (!initialized_) return names;
    unsigned int count = 0;
    api_->deviceCount(&count);
    for (unsigned int i = 0; i < count; ++i) {
        nvmlDevice_t device = nullptr;
        char name[96] = {};
        if (api_->deviceByIndex(i, &device) == kNvmlSuccess && api_->name(device, name, sizeof name) == kNvmlSuccess)
            names << QString::fromUtf8(name);
        else
            names << QStringLiteral("GPU %1").arg(i);
    }
    return names;
}

std::optional<GpuReading> NvmlGpu::read(int index) const {
    if (!initialized_ || index < 0) return std::nullopt;
    nvmlDevice_t device = nullptr;
    if (api_->deviceByIndex(static_cast<unsigned int>(index), &device) != kNvmlSuccess) return std::nullopt;
    nvmlUtilization_t utilization{};
    nvmlMemory_t memory{};
    if (api_->utilization(device, &utilization) != kNvmlSuccess || api_->memory(device, &memory) != kNvmlSuccess)
        return std::nullopt;
    char name[96] = {};
    api_->name(device, name, sizeof name);
    return GpuReading{QString::fromUtf8(name), utilization.gpu / 100.0, memory.used, memory.total, index};
}

QList<GpuReading> NvmlGpu::readAll() const {
    QList<GpuReading> readings;
    if (!initialized_) return readings;
    unsigned int count = 0;
    if (api_->deviceCount(&count) != kNvmlSuccess) return readings;
    for (unsigned int i = 0; i < count; ++i)
        if (auto reading = read(static_cast<int>(i))) readings << *reading;
    return readings;
}

}  // namespace tandem::ui
