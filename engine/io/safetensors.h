#pragma once
// One .safetensors file: an 8-byte little-endian header length, a JSON header that maps tensor names
// to {dtype, shape, data_offsets}, then the raw data. The whole header is validated when the file is
// opened, so a tensor handed out is always inside the file.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/dtype.h"
#include "io/mapped_file.h"

namespace tandem::io {

struct TensorInfo {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;  // byte offsets inside the data section
    std::uint64_t end = 0;

    std::int64_t numel() const;
    std::string shapeString() const;  // "[64, 128]"
};

class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return file_.path(); }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const std::map<std::string, std::string>& metadata() const { return metadata_; }

    // nullptr when the file has no tensor of that name.
    const TensorInfo* find(const std::string& name) const;
    // Throws an Error naming the file when the tensor is missing.
    const TensorInfo& get(const std::string& name) const;
    std::span<const std::byte> data(const TensorInfo& t) const;

private:
    MappedFile file_;
    std::uint64_t dataStart_ = 0;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, std::size_t> byName_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace tandem::io
