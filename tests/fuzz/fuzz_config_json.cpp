// config.json and generation_config.json: the input is config.json, then optionally a NUL byte and
// generation_config.json (empty when there is none).
#include <cstdint>
#include <string>
#include <string_view>

#include "model/config.h"
#include "tandem/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = input.find('\0');
    const std::string config(input.substr(0, nul));
    const std::string generation(nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1));
    try {
        (void)tandem::model::parseModelConfig(config, generation, "fuzz");
    } catch (const tandem::Error&) {
    }
    return 0;
}
