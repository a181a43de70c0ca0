// tokenizer.json: load it, then encode a fixed text (with and without special tokens) and decode the ids.
#include <cstdint>
#include <string_view>

#include "tandem/error.h"
#include "tandem/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view json(reinterpret_cast<const char*>(data), size);
    try {
        const auto tokenizer = tandem::text::Tokenizer::fromJson(json, "fuzz");
        static constexpr std::string_view text = "Hello, world! <|im_start|>user\n  2+2=4 \xc3\xa9\xe2\x80\x94\xf0\x9f\x98\x80 \t\r\n";
        for (const bool specials : {true, false}) {
            const auto ids = tokenizer.encode(text, specials);
            (void)tokenizer.decode(ids, !specials);
        }
        const int odd[] = {0, 1, -1, 2147483647, 3, 255};
        (void)tokenizer.decode(odd, false);
    } catch (const tandem::Error&) {
    }
    return 0;
}
