#include "ui/monitor/proc_readers.h"

#include <QList>

namespace tandem::ui {

std::optional<CpuTimes> parseProcStat(const QByteArray& text) {
    const QByteArray line = text.left(text.indexOf('\n'));
    const QList<QByteArray> fields = line.simplified().split(' ');
    // "cpu user nice system idle iowait irq softirq steal guest guest_nice"
    if (fields.size() < 5 || fields[0] != "cpu") return std::nullopt;
    CpuTimes t;
    quint64 idle = 0;
    // guest and guest_nice are already counted in user and nice.
    for (qsizetype i = 1; i < fields.size() && i <= 8; ++i) {
        bool ok = false;
        const quint64 v = fields[i].toULongLong(&ok);
        if (!ok) return std::nullopt;
        t.total += v;
        if (i == 4 || i == 5) idle += v;  // idle, iowait
    }
    t.busy = t.total - idle;
    return t;
}

std::optional<double> cpuBusyBetween(const CpuTimes& before, const CpuTimes& after) {
    if (after.total <= before.total || after.busy < before.busy) return std::nullopt;
    return static_cast<double>(after.busy - before.busy) / static_cast<double>(after.total - before.total);
}

std::optional<MemoryInfo> parseMeminfo(const QByteArray& text) {
    MemoryInfo m;
    bool haveTotal = false, haveAvailable = false;
    for (const QByteArray& line : text.split('\n')) {
        const QList<QByteArray> f = line.simplified().split(' ');
        if (f.size() < 2) continue;
        const quint64 kib = f[1].toULongLong();
        if (f[0] == "MemTotal:") m.total = kib * 1024, haveTotal = true;
        if (f[0] == "MemAvailable:") m.available = kib * 1024, haveAvailable = true;
    }
    if (!haveTotal || !haveAvailable) return std::nullopt;
    return m;
}

quint64 parseStatmResident(const QByteArray& text, quint64 pageSize) {
    const QList<QByteArray> f = text.simplified().split(' ');
    return f.size() >= 2 ? f[1].toULongLong() * pageSize : 0;
}

}  // namespace tandem::ui
