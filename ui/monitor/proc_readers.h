#pragma once
// Parsers for Linux's /proc files, separate from the reading so tests can feed them text.
#include <QByteArray>
#include <optional>

namespace tandem::ui {

// Aggregate CPU time from the first line of /proc/stat, in clock ticks.
struct CpuTimes {
    quint64 busy = 0;
    quint64 total = 0;
};
std::optional<CpuTimes> parseProcStat(const QByteArray& text);
// Busy fraction between two readings (0..1); absent when no time passed.
std::optional<double> cpuBusyBetween(const CpuTimes& before, const CpuTimes& after);

struct MemoryInfo {
    quint64 total = 0;
    quint64 available = 0;
};
std::optional<MemoryInfo> parseMeminfo(const QByteArray& text);

// Resident bytes of a process from /proc/<pid>/statm (second field, in pages).
quint64 parseStatmResident(const QByteArray& text, quint64 pageSize);

}  // namespace tandem::ui
