#pragma once
// Writing files that must survive a crash in a known state: a plain POSIX file written at offsets and
// synced, and small files replaced atomically (write a temporary, sync, rename). The packed store's
// converter relies on both to resume after an interruption.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "tandem/error.h"

namespace tandem::io {

// A write to the output failed (disk full, permissions, I/O error). The input was fine, so whatever
// was completed before can be kept for a later run.
class OutputError : public Error {
public:
    using Error::Error;
};

class OutputFile {
public:
    // Creates the file, or truncates an existing one. Throws OutputError.
    explicit OutputFile(const std::filesystem::path& path);
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    // Writes all of `bytes` at `offset`, retrying short writes. Throws OutputError.
    void writeAt(std::uint64_t offset, std::span<const std::byte> bytes);
    // Makes everything written durable, then lets the kernel drop the file's now-clean pages, so
    // converting a model larger than RAM does not push the input out of the page cache.
    void syncAndDropCache();
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    int fd_ = -1;
};

// Replaces `path` with `text` so that a crash leaves either the old or the new contents.
void writeFileAtomically(const std::filesystem::path& path, const std::string& text);
// Makes a folder's entries (created, renamed files) durable.
void syncDirectory(const std::filesystem::path& dir);
// Bytes free for an unprivileged user on the file system holding `path` (which must exist).
std::uint64_t freeBytes(const std::filesystem::path& path);

}  // namespace tandem::io
