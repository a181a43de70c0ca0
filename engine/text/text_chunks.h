#pragma once
// The cuts Kimi's TikTokenTokenizer.encode makes before tiktoken sees the text: chunks of at most
// 400,000 characters, each cut again wherever a run of whitespace or of non-whitespace characters
// (Python's str.isspace) would pass 25,000, so that tiktoken's regex never meets a longer run. Each
// piece is then encoded on its own, special tokens included, so the cuts change the ids of long runs
// and Tandem makes the same cuts.
#include <cstddef>
#include <string_view>

#include "text/function_ref.h"

namespace tandem::text {

struct ChunkLimits {
    std::size_t maxCharacters;  // characters (code points) per chunk
    std::size_t maxRun;         // characters per run of whitespace or of non-whitespace within a chunk
};

// Kimi-K2's limits (TIKTOKEN_MAX_ENCODE_CHARS, MAX_NO_WHITESPACES_CHARS).
inline constexpr ChunkLimits kKimiChunkLimits{400'000, 25'000};

// Python's str.isspace: general category Zs or bidirectional class WS, B or S. Unlike the White_Space
// property (regex \s) it includes U+001C..U+001F.
bool isPythonSpace(char32_t c);

// Passes the non-empty pieces of valid UTF-8 `text`, in order, to `emit`; `atStart` is true for the
// piece that begins the text.
void forEachChunk(std::string_view text, const ChunkLimits& limits,
                  FunctionRef<void(std::string_view piece, bool atStart)> emit);

}  // namespace tandem::text
