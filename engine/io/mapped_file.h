#pragma once
// A read-only memory mapping of a whole file. Weights are used straight from the mapping, so loading
// a model copies nothing and the page cache is shared between runs.
#include <cstddef>
#include <filesystem>
#include <span>

namespace tandem::io {

class MappedFile {
public:
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    std::size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

// Says this process is done reading `bytes` (part of a read-only mapping) for now: their pages leave
// its resident set, staying in the page cache, and a later read maps them again. A converter streaming
// through a model larger than RAM calls it on what it has read, so its memory use stays what it holds.
void releaseMappedPages(std::span<const std::byte> bytes);

}  // namespace tandem::io
