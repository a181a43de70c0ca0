#include "tandem/byte_size.h"

#include <cstdio>

namespace tandem {

std::string formatBytes(std::uint64_t bytes) {
    char text[32];
    if (bytes < 1'000'000'000)
        std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
    else
        std::snprintf(text, sizeof text, "%.2f GB", static_cast<double>(bytes) / 1e9);
    return text;
}

}  // namespace tandem
