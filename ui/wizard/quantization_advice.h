#pragma once
// Which expert type a model should be converted to on this machine: for bf16, int8 and int4 the RAM,
// VRAM and disk it needs against what the machine has, and the best one that fits. Pure logic, so the
// tests can hand it any machine.
#include <QList>
#include <QString>
#include <optional>

#include "tandem/convert.h"

namespace tandem::ui {

// The types the wizard offers, best quality first.
inline constexpr tandem::ExpertPrecision kWizardPrecisions[] = {tandem::ExpertPrecision::BF16, tandem::ExpertPrecision::INT8,
                                                                tandem::ExpertPrecision::INT4};
QString precisionName(tandem::ExpertPrecision precision);  // "bf16", "int8", "int4"
std::optional<tandem::ExpertPrecision> precisionFromName(const QString& name);

struct MachineFigures {
    quint64 ramBytes = 0;
    quint64 vramBytes = 0;  // 0: no usable NVIDIA GPU; everything then runs on the CPU
    QString gpuName;
    quint64 freeDiskBytes = 0;
    QString diskFolder;     // where the free space was measured
    double ramGbps = 0;     // memory read speed with every core reading; 0: not measured
};

// What this machine has: total RAM (/proc/meminfo), the GPU's memory (NVML, as the dashboard reads it;
// gpuDevice -1: none; 0, none in particular: the GPU with the most memory, as the engine takes; N > 0 or
// kFirstGpuDevice: that GPU; kEveryGpuDevice: every GPU's together), the free space at `folder` or the nearest
// existing folder above it, and the memory read speed (tandem::measureMemoryBandwidthGbps, measured once
// per process: under a second).
MachineFigures readMachineFigures(int gpuDevice, const QString& folder);

struct QuantizationChoice {
    tandem::ExpertPrecision experts = tandem::ExpertPrecision::INT4;
    tandem::Footprint need;
    quint64 ramBytes = 0;   // RAM needed on this machine: with no GPU the dense part is in RAM too
    quint64 vramBytes = 0;  // 0 with no GPU
    quint64 diskBytes = 0;  // the download (when there is one) plus the converted store
    bool ramFits = false, vramFits = false, diskFits = false;
    bool fits() const { return ramFits && vramFits && diskFits; }
    // Where the engine would run the experts on this machine, and the decode speed that its memory speed
    // allows (0: unknown, or nothing read from RAM per token).
    tandem::ExpertFit fit;
    double decodeCeiling = 0;
};

// "30 of 48 layers on GPU", "all 48 layers on GPU", "CPU only"; with the decode ceiling, " · ≤ 45 tok/s".
QString placementSummary(const QuantizationChoice& c, bool gpu);
// The sentence behind it (a tooltip): what runs where and what each token reads from RAM.
QString placementDetails(const QuantizationChoice& c, const MachineFigures& machine);

struct QuantizationAdvice {
    QList<QuantizationChoice> choices;  // in kWizardPrecisions' order; empty when the sizes are unknown
    int recommended = -1;               // index into choices; -1 when nothing fits
    QString explanation;                // why this one, or what is short and what to do
};

// Only this share of RAM and VRAM is counted on: the system, the app and the GPU's own context need the
// rest.
inline constexpr double kUsableMemoryShare = 0.9;

// `needs` holds the footprint of each of kWizardPrecisions. `download` counts the download in the disk
// space needed (a Hub model not downloaded yet).
QuantizationAdvice adviseQuantization(const QList<tandem::Footprint>& needs, bool download, const MachineFigures& machine);

// "688.6 GB": decimal units, as disks and RAM sizes are compared here.
QString formatBytes(quint64 bytes);
// "671 B", "30.5 B", "1.03 T" parameters.
QString formatParameters(quint64 count);

}  // namespace tandem::ui
