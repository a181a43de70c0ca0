#include "ui/monitor/system_monitor.h"

#include <QFile>
#include <unistd.h>
#include <utility>

namespace tandem::ui {
namespace {

QByteArray readProc(const char* path) {
    // /proc files report a size of 0; read until the end.
    QFile f(QString::fromLatin1(path));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace

void addGpuReadings(SystemSample& sample, const GpuSource& source, int chosenDevice) {
    // Below -1: every GPU (Settings' kEveryGpuDevice, a pipeline by layer): each has its line; the first leads.
    if (chosenDevice < -1) chosenDevice = 0;
    if (chosenDevice < 0) {
        sample.gpuUnavailableReason = QStringLiteral("CPU only, as chosen in Settings");
        return;
    }
    if (!source.isAvailable()) {
        sample.gpuUnavailableReason = source.unavailableReason();
        return;
    }
    sample.gpus = source.readAll();
    for (const GpuReading& reading : std::as_const(sample.gpus))
        if (reading.index == chosenDevice) sample.gpu = reading;
    if (!sample.gpu) sample.gpuUnavailableReason = QStringLiteral("GPU %1 not found").arg(chosenDevice);
}

SystemSampler::SystemSampler(int intervalMs, GpuSourceFactory makeGpuSource)
    : intervalMs_(intervalMs), makeGpuSource_(std::move(makeGpuSource)) {}
SystemSampler::~SystemSampler() = default;

void SystemSampler::start() {
    gpuSource_ = makeGpuSource_ ? makeGpuSource_() : std::make_unique<NvmlGpu>();
    emit gpusFound(gpuSource_->deviceNames());
    clock_.start();
    timer_ = new QTimer(this);
    timer_->setInterval(intervalMs_);
    connect(timer_, &QTimer::timeout, this, &SystemSampler::sample);
    timer_->start();
    sample();
}

void SystemSampler::setGpuDevice(int device) { gpuDevice_ = device; }

void SystemSampler::sample() {
    SystemSample s;
    s.seconds = static_cast<double>(clock_.elapsed()) / 1000.0;
    if (const auto cpu = parseProcStat(readProc("/proc/stat"))) {
        if (lastCpu_) s.cpuBusy = cpuBusyBetween(*lastCpu_, *cpu);
        lastCpu_ = cpu;
    }
    if (const auto memory = parseMeminfo(readProc("/proc/meminfo"))) {
        s.memoryTotal = memory->total;
        s.memoryUsed = memory->total - memory->available;
    }
    s.appResident = parseStatmResident(readProc("/proc/self/statm"), static_cast<quint64>(sysconf(_SC_PAGESIZE)));
    addGpuReadings(s, *gpuSource_, gpuDevice_);
    emit sampled(s);
}

SystemMonitor::SystemMonitor(QObject* parent) : SystemMonitor(GpuSourceFactory{}, parent) {}

SystemMonitor::SystemMonitor(GpuSourceFactory makeGpuSource, QObject* parent)
    : QObject(parent), sampler_(new SystemSampler(kIntervalMs, std::move(makeGpuSource))) {
    qRegisterMetaType<SystemSample>();
    thread_.setObjectName(QStringLiteral("monitor"));
    sampler_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, sampler_, &QObject::deleteLater);
    connect(sampler_, &SystemSampler::sampled, this, &SystemMonitor::sampled);
    connect(sampler_, &SystemSampler::gpusFound, this, [this](const QStringList& names) {
        gpuNames_ = names;
        emit gpusFound(names);
    });
}

SystemMonitor::~SystemMonitor() {
    if (!thread_.isRunning()) {
        delete sampler_;
        return;
    }
    thread_.quit();
    thread_.wait();
}

void SystemMonitor::start() {
    if (thread_.isRunning()) return;
    thread_.start();
    QMetaObject::invokeMethod(sampler_, &SystemSampler::start, Qt::QueuedConnection);
}

void SystemMonitor::setGpuDevice(int device) {
    gpuDevice_ = device;
    QMetaObject::invokeMethod(sampler_, [s = sampler_, device] { s->setGpuDevice(device); }, Qt::QueuedConnection);
}

}  // namespace tandem::ui
