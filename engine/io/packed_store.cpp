#include "io/packed_store.h"

#include <algorithm>

#include "io/store_checksum.h"
#include "tandem/error.h"

namespace tandem::io {

namespace fs = std::filesystem;

namespace {

std::string convertAgain(const fs::path& dir) {
    return "; convert the model into " + dir.string() + " again (tandem-cli convert)";
}

// The size and first page of a store file against the manifest.
void checkFile(const fs::path& dir, const StoreFile& f, std::span<const std::byte> bytes) {
    const fs::path path = dir / f.name;
    if (bytes.size() != f.bytes)
        throw Error(path.string() + " holds " + std::to_string(bytes.size()) + " bytes where the manifest says " +
                    std::to_string(f.bytes) + " (truncated or replaced)" + convertAgain(dir));
    if (hashBytes(bytes.first(std::min<std::size_t>(bytes.size(), kStoreHeadBytes))) != f.headChecksum)
        throw Error(path.string() + " does not hold the bytes the manifest describes (its first page differs)" +
                    convertAgain(dir));
}

std::unique_ptr<MappedFile> mapStoreFile(const fs::path& dir, const StoreFile& f) {
    const fs::path path = dir / f.name;
    if (!fs::exists(path)) throw Error(path.string() + " is missing from the store" + convertAgain(dir));
    auto file = std::make_unique<MappedFile>(path);
    checkFile(dir, f, file->bytes());
    return file;
}

}  // namespace

bool PackedStore::isStore(const fs::path& dir) { return fs::is_regular_file(dir / kStoreManifestName); }

PackedStore::PackedStore(const fs::path& dir) : dir_(dir) {
    if (!isStore(dir)) throw Error(dir.string() + " is not a Tandem store: it has no " + kStoreManifestName);
    manifest_ = readManifest(dir);
    const std::string where = (dir / kStoreManifestName).string();
    if (!manifest_.complete) {
        fs::path out = dir;
        if (out.extension() == ".partial") out.replace_extension();
        throw Error(dir.string() + " holds an unfinished conversion of " + manifest_.sourcePath +
                    "; run tandem-cli convert --model " + manifest_.sourcePath + " --out " + out.string() +
                    " --experts " + std::string(io::expertTypeName(manifest_.expertType)) + " again to finish it");
    }
    layout_ = io::ExpertLayout::make(manifest_.expertType, manifest_.hidden, manifest_.inter);
    if (layout_.expertBytes != manifest_.expertBytes)
        throw Error(where + ": the experts were packed " + std::to_string(manifest_.expertBytes) +
                    " bytes each, this Tandem packs them in " + std::to_string(layout_.expertBytes) +
                    " (another packed layout)" + convertAgain(dir));
    if (!manifest_.dense) throw Error(where + " lists no " + kStoreDenseName + convertAgain(dir));
    mapStoreFile(dir, *manifest_.dense);
    const std::uint64_t layerBytes = layout_.expertBytes * static_cast<std::uint64_t>(manifest_.experts);
    for (const int layer : manifest_.moeLayers) {
        const StoreLayer* entry = manifest_.findLayer(layer);
        if (!entry) throw Error(where + " lists no expert file for MoE layer " + std::to_string(layer) + convertAgain(dir));
        if (entry->file.bytes != layerBytes || entry->file.pieceBytes != layout_.expertBytes)
            throw Error(where + ": " + entry->file.name + " should hold " + std::to_string(manifest_.experts) +
                        " experts of " + std::to_string(layout_.expertBytes) + " bytes" + convertAgain(dir));
        layers_[layer] = mapStoreFile(dir, entry->file);
    }
    verification_ = checkVerification(dir, manifest_);
}

const std::byte* PackedStore::layerExperts(int layer) const {
    const auto it = layers_.find(layer);
    if (it == layers_.end())
        throw Error(dir_.string() + ": layer " + std::to_string(layer) + " has no routed experts in this store");
    return it->second->bytes().data();
}

std::vector<std::string> PackedStore::findDamage(const std::function<void(double)>& progress) const {
    VerifyOptions options;
    options.writeRecord = false;
    if (progress) options.progress = [&](double fraction) {
        progress(fraction);
        return true;
    };
    return verifyStoreFiles(dir_, manifest_, options).damage;
}

}  // namespace tandem::io
