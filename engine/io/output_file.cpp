#include "io/output_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace tandem::io {

namespace {

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int err) {
    std::string message = "cannot " + what + " " + path.string() + ": " + std::strerror(err);
    if (err == ENOSPC || err == EDQUOT) message += "; free some disk space and run the same command again to resume";
    throw OutputError(message);
}

}  // namespace

OutputFile::OutputFile(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("create", path, errno);
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void OutputFile::writeAt(std::uint64_t offset, std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("write", path_, errno);
        }
        if (n == 0) fail("write", path_, EIO);
        bytes = bytes.subspan(static_cast<std::size_t>(n));
        offset += static_cast<std::uint64_t>(n);
    }
}

void OutputFile::syncAndDropCache() {
    if (::fsync(fd_) != 0) fail("sync", path_, errno);
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);  // advice only: failing it changes nothing
}

void writeFileAtomically(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::path temp = path;
    temp += ".tmp";
    {
        OutputFile f(temp);
        f.writeAt(0, std::as_bytes(std::span(text.data(), text.size())));
        f.syncAndDropCache();
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) fail("replace", path, errno);
    syncDirectory(path.parent_path());
}

void syncDirectory(const std::filesystem::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("open folder", dir, errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) fail("sync folder", dir, err);
}

std::uint64_t freeBytes(const std::filesystem::path& path) {
    struct statvfs st {};
    if (::statvfs(path.c_str(), &st) != 0) fail("check the free space of", path, errno);
    return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

}  // namespace tandem::io
