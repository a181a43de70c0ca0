#pragma once
// Shared by the libFuzzer targets in this folder. Each target hands its input to one parser: a
// tandem::Error is the parser refusing bad input, which is fine; anything else (another exception, a
// crash, a sanitizer report, a hang past -timeout) is a bug libFuzzer keeps the input of.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace tandem::fuzz {

// The readers of model files take a path, so each input is written to one file per process (in
// $TMPDIR, named by the process id), rewritten for every input. `extension` is the one the reader
// expects, ".gguf" say.
inline const std::filesystem::path& writeInput(const std::uint8_t* data, std::size_t size, const char* extension) {
    static const std::filesystem::path path = [&] {
        const char* tmp = std::getenv("TMPDIR");
        return std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
               ("tandem-fuzz-" + std::to_string(::getpid()) + extension);
    }();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
        std::perror(path.c_str());
        std::abort();  // the machine's problem, not the parser's: stop rather than fuzz nothing
    }
    return path;
}

}  // namespace tandem::fuzz
