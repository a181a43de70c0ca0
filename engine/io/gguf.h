#pragma once
// One GGUF file (llama.cpp's model format, versions 2 and 3), memory-mapped: a header, metadata
// key/values, tensor infos, then the tensor data at general.alignment. Everything is validated when
// the file is opened -- counts, strings and arrays inside the file, known tensor types, dimensions
// that do not overflow, data inside the file and not overlapping -- so a tensor handed out is always
// inside the mapping. A model split by llama.cpp's gguf-split (NAME-00001-of-00003.gguf, ...) is
// opened as one by GgufModel.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/gguf_quant.h"
#include "io/mapped_file.h"

namespace tandem::io {

enum class GgufValueType : std::uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9, U64 = 10,
    I64 = 11, F64 = 12,
};

struct GgufValue {
    GgufValueType type = GgufValueType::U8;
    GgufValueType itemType = GgufValueType::U8;  // of an array's items
    std::int64_t integer = 0;   // every integer type (a U64 above 2^63 is refused when read)
    double real = 0;            // F32, F64
    bool boolean = false;
    std::string string;
    std::vector<GgufValue> items;

    bool isInteger() const;
    bool isNumber() const { return isInteger() || type == GgufValueType::F32 || type == GgufValueType::F64; }
    double number() const { return isInteger() ? static_cast<double>(integer) : real; }
};

struct GgufTensor {
    std::string name;
    const GgmlType* type = nullptr;
    std::vector<std::int64_t> dims;  // ggml order: dims[0] is the length of a row
    std::uint64_t offset = 0;        // inside the data section
    std::uint64_t bytes = 0;
    std::span<const std::byte> data;
    const std::filesystem::path* file = nullptr;

    std::int64_t rowLength() const { return dims.empty() ? 1 : dims[0]; }
    std::int64_t rows() const;  // the product of the other dimensions
    std::string dimsString() const;  // "[128, 1024]" in ggml order
};

class GgufFile {
public:
    explicit GgufFile(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return file_.path(); }
    std::uint32_t version() const { return version_; }
    std::uint32_t alignment() const { return alignment_; }
    const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
    const std::vector<GgufTensor>& tensors() const { return tensors_; }

private:
    MappedFile file_;
    std::uint32_t version_ = 0;
    std::uint32_t alignment_ = 32;
    std::map<std::string, GgufValue> metadata_;
    std::vector<GgufTensor> tensors_;
};

// A GGUF model: one file, or every part of a split one given any part's path. The metadata is the
// first part's (the others hold only split.* keys); tensor names are unique across the parts.
class GgufModel {
public:
    explicit GgufModel(const std::filesystem::path& path);

    // True for a path that names a GGUF file (by its extension), split or not.
    static bool isGgufPath(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return path_; }  // the first part
    const std::vector<std::unique_ptr<GgufFile>>& files() const { return files_; }
    const std::map<std::string, GgufValue>& metadata() const { return files_.front()->metadata(); }
    const GgufValue* find(const std::string& key) const;
    const GgufTensor* tensor(const std::string& name) const;
    const std::map<std::string, const GgufTensor*>& tensors() const { return tensors_; }
    std::uint64_t totalBytes() const;

private:
    std::filesystem::path path_;
    std::vector<std::unique_ptr<GgufFile>> files_;
    std::map<std::string, const GgufTensor*> tensors_;
};

}  // namespace tandem::io
