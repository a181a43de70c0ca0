#pragma once
// A packed model store, the output of `tandem-cli convert`: a folder with
//   tandem-store.json     the manifest (io/store_manifest.h)
//   model.safetensors     every tensor of the source checkpoint except the routed experts, byte for
//                         byte (FP8 stays FP8 with its scales); opens with io::Checkpoint
//   experts-LLL.bin       per MoE layer, its routed experts packed (cpu/expert_pack.h) back to back,
//                         expert e at e * layout().expertBytes, ready for cpu::PackedMoeLayer
//   config.json, tokenizer files   copied from the source
// Opening a store checks the manifest, every file's size and first page, and maps the expert files;
// nothing is read or repacked beyond that, so a store opens in milliseconds whatever its size. It then
// checks the store's verification record (io/store_verification.h: the files' sizes and times, a few
// MiB of sampled windows) and says in verification() whether the store is verified, unverified (the
// caller runs a full verification, in the background if it likes) or known to be damaged.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/expert_layout.h"
#include "io/mapped_file.h"
#include "io/store_manifest.h"
#include "io/store_verification.h"

namespace tandem::io {

class PackedStore {
public:
    // True when dir holds a store manifest (complete or not).
    static bool isStore(const std::filesystem::path& dir);

    // Throws tandem::Error naming the file and what to do for an incomplete conversion, another
    // format version or layout, or a missing, truncated or swapped file.
    explicit PackedStore(const std::filesystem::path& dir);

    const std::filesystem::path& dir() const { return dir_; }
    const StoreManifest& manifest() const { return manifest_; }
    // The non-expert tensors: open with io::Checkpoint(dir()).
    std::filesystem::path denseFile() const { return dir_ / kStoreDenseName; }

    io::ExpertType expertType() const { return layout_.type; }
    const io::ExpertLayout& layout() const { return layout_; }
    int experts() const { return manifest_.experts; }
    const std::vector<int>& moeLayers() const { return manifest_.moeLayers; }
    bool hasLayer(int layer) const { return layers_.count(layer) != 0; }
    // The layer's packed experts, expert e at + e * layout().expertBytes, 4 KiB aligned. Throws
    // tandem::Error for a layer without routed experts.
    const std::byte* layerExperts(int layer) const;

    // What the verification record says about the store as it is now (checked when it was opened).
    const VerificationStatus& verification() const { return verification_; }

    // Reads every byte and compares each file's checksum with the manifest, on all cores;
    // progress(fraction done). Returns one line per damaged file (empty: the store is intact). Writes
    // no record: io::verifyStoreFiles does.
    std::vector<std::string> findDamage(const std::function<void(double)>& progress = {}) const;
    bool verify(const std::function<void(double)>& progress = {}) const { return findDamage(progress).empty(); }

private:
    std::filesystem::path dir_;
    StoreManifest manifest_;
    io::ExpertLayout layout_;
    std::map<int, std::unique_ptr<MappedFile>> layers_;
    VerificationStatus verification_;
};

}  // namespace tandem::io
