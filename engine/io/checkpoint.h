#pragma once
// A Hugging Face checkpoint folder: a single model.safetensors, or shards listed by
// model.safetensors.index.json. Every shard is memory-mapped and validated when the folder is opened.
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/tensor_lookup.h"

namespace tandem::io {

struct TensorRef {
    const SafetensorsFile* file;
    const TensorInfo* info;
    std::span<const std::byte> data;
};

class Checkpoint : public TensorLookup {
public:
    explicit Checkpoint(const std::filesystem::path& dir);

    const std::filesystem::path& dir() const { return dir_; }
    bool has(const std::string& name) const override { return where_.count(name) != 0; }
    // Throws an Error naming the folder when the checkpoint has no such tensor.
    TensorRef get(const std::string& name) const;
    TensorView view(const std::string& name) const override;
    std::string describe() const override { return dir_.string(); }
    std::vector<std::string> tensorNames() const;
    std::uint64_t totalBytes() const;

private:
    std::filesystem::path dir_;
    std::vector<std::unique_ptr<SafetensorsFile>> shards_;
    std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace tandem::io
