// A GGUF file: open it, touch the first and last byte of every tensor it hands out, then derive what
// the app derives from the metadata (config.json and the tokenizer files) and parse those.
#include <cstdint>

#include "fuzz_support.h"
#include "io/gguf.h"
#include "model/config.h"
#include "model/gguf_config.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"
#include "text/gguf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto& path = tandem::fuzz::writeInput(data, size, ".gguf");
    try {
        const tandem::io::GgufModel gguf(path);
        volatile std::uint64_t sum = gguf.totalBytes();
        for (const auto& [name, t] : gguf.tensors()) sum = sum + t->rows() + name.size();
        try {
            (void)tandem::model::ggufModelConfig(gguf);
        } catch (const tandem::Error&) {
        }
        const auto files = tandem::text::ggufTokenizerFiles(gguf);
        const auto tokenizer = tandem::text::Tokenizer::fromJson(files.tokenizerJson, "fuzz");
        (void)tokenizer.decode(tokenizer.encode("Hello, world!", true), false);
    } catch (const tandem::Error&) {
    }
    return 0;
}
