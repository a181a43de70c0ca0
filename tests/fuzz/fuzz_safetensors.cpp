// A safetensors file: open it, then read the first and last byte of every tensor's data, so a span
// outside the mapping shows under ASan.
#include <cstdint>

#include "fuzz_support.h"
#include "io/safetensors.h"
#include "tandem/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto& path = tandem::fuzz::writeInput(data, size, ".safetensors");
    try {
        const tandem::io::SafetensorsFile file(path);
        volatile std::uint64_t sum = 0;
        for (const auto& t : file.tensors()) {
            const auto bytes = file.data(t);
            sum = sum + t.numel() + t.shapeString().size();
            if (!bytes.empty()) sum = sum + static_cast<std::uint8_t>(bytes.front()) + static_cast<std::uint8_t>(bytes.back());
            (void)file.get(t.name);
        }
    } catch (const tandem::Error&) {
    }
    return 0;
}
