#pragma once
// Sizes in messages and progress lines: "812.4 MB", "12.31 GB", in decimal units as disks and memory
// are sold. One spelling for the engine and tandem-cli.
#include <cstdint>
#include <string>

namespace tandem {

std::string formatBytes(std::uint64_t bytes);

}  // namespace tandem
