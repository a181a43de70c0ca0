#include "ui/wizard/quantization_advice.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLocale>
#include <QStorageInfo>
#include <cmath>

#include "ui/monitor/nvml_gpu.h"
#include "ui/monitor/proc_readers.h"
#include "ui/worker/engine_types.h"

namespace tandem::ui {
namespace {

QString tr(const char* text) { return QCoreApplication::translate("QuantizationAdvice", text); }

quint64 usable(quint64 bytes) { return static_cast<quint64>(static_cast<double>(bytes) * kUsableMemoryShare); }

// What is short for `c`, in one sentence per resource.
QStringList shortfalls(const QuantizationChoice& c, const MachineFigures& m) {
    QStringList lines;
    if (!c.ramFits)
        lines << tr("%1 needs %2 of RAM and this computer has %3.")
                     .arg(precisionName(c.experts), formatBytes(c.ramBytes), formatBytes(m.ramBytes));
    if (!c.vramFits)
        lines << tr("%1 needs %2 of GPU memory and the %3 has %4.")
                     .arg(precisionName(c.experts), formatBytes(c.vramBytes), m.gpuName, formatBytes(m.vramBytes));
    if (!c.diskFits)
        lines << tr("%1 needs %2 of free disk space and %3 has %4: free some space or choose a folder on another disk.")
                     .arg(precisionName(c.experts), formatBytes(c.diskBytes), QDir::toNativeSeparators(m.diskFolder),
                          formatBytes(m.freeDiskBytes));
    return lines;
}

}  // namespace

QString precisionName(tandem::ExpertPrecision precision) {
    switch (precision) {
    case tandem::ExpertPrecision::BF16: return QStringLiteral("bf16");
    case tandem::ExpertPrecision::INT8: return QStringLiteral("int8");
    case tandem::ExpertPrecision::INT4: return QStringLiteral("int4");
    default: return {};
    }
}

std::optional<tandem::ExpertPrecision> precisionFromName(const QString& name) {
    for (const auto p : kWizardPrecisions)
        if (precisionName(p) == name) return p;
    return std::nullopt;
}

MachineFigures readMachineFigures(int gpuDevice, const QString& folder) {
    MachineFigures m;
    QFile meminfo(QStringLiteral("/proc/meminfo"));
    if (meminfo.open(QIODevice::ReadOnly))
        if (const auto info = parseMeminfo(meminfo.readAll())) m.ramBytes = info->total;
    if (gpuDevice == 0) {  // no GPU in particular: the engine takes the one with the most memory
        const NvmlGpu nvml;
        for (const GpuReading& gpu : nvml.readAll())
            if (gpu.memoryTotal > m.vramBytes) {
                m.vramBytes = gpu.memoryTotal;
                m.gpuName = gpu.name;
            }
    } else if (const int number = chosenGpuNumber(gpuDevice); number >= 0) {
        const NvmlGpu nvml;
        if (const auto gpu = nvml.read(number)) {
            m.vramBytes = gpu->memoryTotal;
            m.gpuName = gpu->name;
        }
    } else if (gpuDevice == kEveryGpuDevice) {  // the layers split across every GPU: their memory together
        const NvmlGpu nvml;
        QStringList names;
        for (const GpuReading& gpu : nvml.readAll()) {
            m.vramBytes += gpu.memoryTotal;
            names << gpu.name;
        }
        m.gpuName = names.join(QStringLiteral(" + "));
    }
    QString existing = QDir::cleanPath(folder);
    while (!QFileInfo::exists(existing) && QFileInfo(existing).dir().path() != existing)
        existing = QFileInfo(existing).dir().path();
    m.diskFolder = existing;
    m.freeDiskBytes = static_cast<quint64>(std::max<qint64>(0, QStorageInfo(existing).bytesAvailable()));
    m.ramGbps = tandem::measureMemoryBandwidthGbps();  // 0: unknown
    return m;
}

QString placementSummary(const QuantizationChoice& c, bool gpu) {
    QString where;
    if (!gpu)
        where = tr("CPU only");
    else if (c.fit.layersOnGpu == c.fit.moeLayers)
        where = tr("all %1 layers on GPU").arg(c.fit.moeLayers);
    else
        where = tr("%1 of %2 layers on GPU").arg(c.fit.layersOnGpu).arg(c.fit.moeLayers);
    if (c.decodeCeiling > 0) where += tr(" · ≤ %1 tok/s").arg(std::lround(c.decodeCeiling));
    return where;
}

QString placementDetails(const QuantizationChoice& c, const MachineFigures& machine) {
    QString text;
    if (machine.vramBytes == 0)
        text = tr("Everything runs on the CPU: each token reads %1 from RAM.").arg(formatBytes(c.fit.ramBytesPerToken));
    else if (c.fit.layersOnGpu == c.fit.moeLayers)
        text = tr("The routed experts of every layer fit in the GPU's memory beside the rest of the model: nothing "
                  "is read from RAM per token.");
    else
        text = tr("The routed experts of %1 of %2 layers fit in the GPU's memory beside the rest of the model; the "
                  "CPU computes the others, reading %3 from RAM per token%4.")
                   .arg(c.fit.layersOnGpu)
                   .arg(c.fit.moeLayers)
                   .arg(formatBytes(c.fit.ramBytesPerToken),
                        c.fit.promptsStream ? tr(", and long prompts pass them through the GPU") : QString());
    if (c.decodeCeiling > 0)
        text += QLatin1Char(' ') + tr("At this computer's %1 GB/s that allows up to ~%2 tokens/s; the GPU's own work "
                                      "and the conversation's length take some of it.")
                                       .arg(std::lround(machine.ramGbps))
                                       .arg(std::lround(c.decodeCeiling));
    return text;
}

QuantizationAdvice adviseQuantization(const QList<tandem::Footprint>& needs, bool download, const MachineFigures& machine) {
    QuantizationAdvice advice;
    if (needs.size() != static_cast<qsizetype>(std::size(kWizardPrecisions))) {
        advice.explanation = tr("Tandem learns the sizes of a GGUF file when it imports it. int4 keeps the store "
                                "smallest; bf16 and int8 only help when the file holds more than 8 bits per weight.");
        return advice;
    }
    const bool gpu = machine.vramBytes > 0;
    for (qsizetype i = 0; i < needs.size(); ++i) {
        QuantizationChoice c;
        c.experts = kWizardPrecisions[i];
        c.need = needs[i];
        // With a GPU the dense part and the KV cache live in its memory; without one, in RAM.
        c.ramBytes = gpu ? c.need.ramBytes : c.need.routedExpertBytes + c.need.denseBytes + c.need.kvCacheBytes;
        c.vramBytes = gpu ? c.need.vramBytes : 0;
        c.diskBytes = c.need.storeBytes + (download ? c.need.downloadBytes : 0);
        c.ramFits = c.ramBytes <= usable(machine.ramBytes);
        c.vramFits = !gpu || c.vramBytes <= usable(machine.vramBytes);
        c.diskFits = c.diskBytes <= machine.freeDiskBytes;
        c.fit = tandem::estimateExpertFit(c.need, machine.vramBytes);
        if (machine.ramGbps > 0 && c.fit.ramBytesPerToken > 0)
            c.decodeCeiling = machine.ramGbps * 1e9 / static_cast<double>(c.fit.ramBytesPerToken);
        advice.choices.append(c);
    }
    for (qsizetype i = 0; i < advice.choices.size() && advice.recommended < 0; ++i)
        if (advice.choices[i].fits()) advice.recommended = static_cast<int>(i);

    const QString cpuOnly = gpu ? QString()
                                : tr(" No NVIDIA GPU was found, so everything runs on the CPU from RAM; answers come "
                                     "slower than with a GPU.");
    switch (advice.recommended) {
    case 0: advice.explanation = tr("bf16 fits: the experts keep the model's own weights, at full quality."); break;
    case 1:
        advice.explanation = tr("int8 is the best that fits: nearly the quality of bf16 at half its size. %1")
                                 .arg(shortfalls(advice.choices[0], machine).join(QLatin1Char(' ')));
        break;
    case 2:
        advice.explanation = tr("int4 is the one that fits: the smallest and fastest, with a small loss of quality. %1")
                                 .arg(shortfalls(advice.choices[1], machine).join(QLatin1Char(' ')));
        break;
    default:
        advice.explanation = tr("This model does not fit on this computer, even as int4. %1 Choose a smaller model, "
                                "or convert anyway if you will add memory or disk space before using it.")
                                 .arg(shortfalls(advice.choices.back(), machine).join(QLatin1Char(' ')));
        break;
    }
    advice.explanation = (advice.explanation.trimmed() + cpuOnly).trimmed();
    return advice;
}

QString formatBytes(quint64 bytes) {
    return QLocale::c().formattedDataSize(static_cast<qint64>(bytes), 1, QLocale::DataSizeSIFormat);
}

QString formatParameters(quint64 count) {
    const double billions = static_cast<double>(count) / 1e9;
    if (billions >= 1000) return QStringLiteral("%1 T").arg(billions / 1000, 0, 'f', 2);
    if (billions >= 100) return QStringLiteral("%1 B").arg(billions, 0, 'f', 0);
    return QStringLiteral("%1 B").arg(billions, 0, 'f', 1);
}

}  // namespace tandem::ui
