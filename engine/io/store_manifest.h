#pragma once
// tandem-store.json: what a packed model store holds and whether its conversion finished. The
// converter rewrites it (atomically) after every file it completes, so an interrupted run knows
// which files it can keep; the loader refuses a store whose manifest says it is incomplete.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/expert_layout.h"

namespace tandem::io {

inline constexpr const char* kStoreManifestName = "tandem-store.json";
inline constexpr const char* kStoreDenseName = "model.safetensors";
// Bump when the meaning of a store's bytes changes: the manifest's fields, or the packed expert
// layout of io/expert_layout.h (which expert_bytes alone would not always reveal).
inline constexpr int kStoreFormatVersion = 1;

// One file of the store with its size and checksum (io/store_checksum.h over pieces of pieceBytes).
// headChecksum, the hash of the first kStoreHeadBytes, is what opening a store checks: one page per
// file catches a file swapped for another or zeroed, where the full checksum would read everything.
inline constexpr std::size_t kStoreHeadBytes = 4096;
struct StoreFile {
    std::string name;
    std::uint64_t bytes = 0;
    std::uint64_t checksum = 0;
    std::uint64_t pieceBytes = 0;
    std::uint64_t headChecksum = 0;
};

struct StoreLayer {
    int layer = 0;
    StoreFile file;  // experts packed back to back; pieces are experts
};

struct StoreManifest {
    int formatVersion = kStoreFormatVersion;
    std::string converter;               // the program and version that wrote it
    bool complete = false;
    std::string sourcePath;              // the Hugging Face folder converted
    std::uint64_t sourceFingerprint = 0;  // of its config and shard headers: tells a resumed run it is the same input
    io::ExpertType expertType = io::ExpertType::BF16;
    int hidden = 0, inter = 0, experts = 0;
    std::uint64_t expertBytes = 0;       // ExpertLayout::expertBytes when written: the stride in a layer file
    std::vector<int> moeLayers;
    // How model.safetensors holds the dense products (convert --dense): "checkpoint" (as the input has
    // them), "int8" (a scale per row) or "bf16". Stores written before the field existed are "checkpoint".
    std::string denseType = "checkpoint";
    std::optional<StoreFile> dense;      // model.safetensors, once written
    std::vector<StoreLayer> layers;      // the layer files written so far, in the order written

    const StoreLayer* findLayer(int layer) const;
    // True when `other` describes the same conversion (same input, type and layout), so files written
    // for one are valid for the other.
    bool sameConversion(const StoreManifest& other) const;
};

// "experts-007.bin"
std::string layerFileName(int layer);

std::string manifestToJson(const StoreManifest& manifest);
// Throws tandem::Error naming `where` and the field for a malformed manifest.
StoreManifest manifestFromJson(const std::string& text, const std::string& where);

// Reads dir/tandem-store.json; throws tandem::Error if it is missing or malformed.
StoreManifest readManifest(const std::filesystem::path& dir);
// Replaces dir/tandem-store.json atomically. Throws OutputError.
void writeManifest(const std::filesystem::path& dir, const StoreManifest& manifest);

}  // namespace tandem::io
