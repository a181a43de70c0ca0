#include "tandem/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tandem/error.h"

namespace tandem {

std::string formatBytes(std::uint64_t bytes) {
    char text[32];
    if (bytes < 1'000'000'000)
        std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
    else
        std::snprintf(text, sizeof text, "%.2f GB", static_cast<double>(bytes) / 1e9);
    return text;
}

std::uint64_t parseByteSize(const std::string& text, const std::string& what) {
    const auto bad = [&] {
        return Error(what + " takes a size such as 16G, 800M or 12.5GiB (or 0), not '" + text + "'");
    };
    const char* begin = text.c_str();
    while (std::isspace(static_cast<unsigned char>(*begin))) ++begin;
    if (!std::isdigit(static_cast<unsigned char>(*begin)) && *begin != '.') throw bad();
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(value) || value < 0) throw bad();
    std::string unit;
    for (const char* p = end; *p; ++p)
        if (!std::isspace(static_cast<unsigned char>(*p))) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    double scale = 1;
    if (unit.empty() || unit == "b") scale = 1;
    else if (unit == "k" || unit == "kb") scale = 1e3;
    else if (unit == "m" || unit == "mb") scale = 1e6;
    else if (unit == "g" || unit == "gb") scale = 1e9;
    else if (unit == "t" || unit == "tb") scale = 1e12;
    else if (unit == "kib") scale = 1024.0;
    else if (unit == "mib") scale = 1024.0 * 1024;
    else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
    else if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
    else throw bad();
    const double bytes = value * scale;
    if (bytes >= 1.8e19) throw bad();
    return static_cast<std::uint64_t>(std::llround(bytes));
}

}  // namespace tandem
