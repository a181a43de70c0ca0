#pragma once
// Sizes in messages and progress lines: "812.4 MB", "12.31 GB", in decimal units as disks and memory
// are sold. One spelling for the engine and tandem-cli.
#include <cstdint>
#include <string>

namespace tandem {

std::string formatBytes(std::uint64_t bytes);

// "16G", "16 GB", "12.5GiB", "800M", "0" (a bare number is bytes): decimal units (K, M, G, T, with an
// optional B) and binary ones (KiB, MiB, GiB, TiB), case-insensitive. Throws tandem::Error naming `what`
// for anything else.
std::uint64_t parseByteSize(const std::string& text, const std::string& what);

}  // namespace tandem
