#include "io/text_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tandem::io {

std::string readRegularFile(const std::filesystem::path& path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw Error("cannot read " + path.string() + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error("cannot read " + path.string() + ": it is not a regular file");
    }
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : 0;
            ::close(fd);
            throw Error("cannot read " + path.string() + ": " + (err ? std::strerror(err) : "it became shorter while being read"));
        }
        done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    return text;
}

}  // namespace tandem::io

namespace tandem {

void failJsonDepth(const std::string& where) {
    throw Error(where + " nests JSON more than " + std::to_string(kMaxJsonDepth) +
                " levels deep, which no real document does; it is refused as damaged or hostile");
}

}  // namespace tandem
