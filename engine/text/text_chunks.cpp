#include "text/text_chunks.h"

#include "text/utf8.h"

namespace tandem::text {

bool isPythonSpace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

void forEachChunk(std::string_view text, const ChunkLimits& limits,
                  FunctionRef<void(std::string_view piece, bool atStart)> emit) {
    std::size_t pieceStart = 0;  // byte offset of the piece not yet emitted
    std::size_t pos = 0;
    std::size_t chunkCharacters = 0;
    std::size_t run = 0;
    bool runIsSpace = false;
    const auto cut = [&](std::size_t at) {
        if (at > pieceStart) emit(text.substr(pieceStart, at - pieceStart), pieceStart == 0);
        pieceStart = at;
    };
    while (pos < text.size()) {
        const std::size_t start = pos;
        const bool space = isPythonSpace(utf8::decode(text, pos));
        // A chunk starts its runs afresh, with the kind of its first character.
        if (chunkCharacters == limits.maxCharacters) {
            cut(start);
            chunkCharacters = 0;
        }
        if (chunkCharacters == 0) {
            run = 0;
            runIsSpace = space;
        }
        ++chunkCharacters;
        if (space != runIsSpace) {
            run = 1;
            runIsSpace = space;
        } else if (++run > limits.maxRun) {
            cut(start);
            run = 1;
        }
    }
    cut(text.size());
}

}  // namespace tandem::text
