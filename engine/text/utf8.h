#pragma once
// UTF-8 encoding and decoding: validation, code point iteration, and the lossy conversion that
// Hugging Face's decoders apply to byte sequences (each maximal invalid subpart becomes U+FFFD).
#include <cstddef>
#include <string>
#include <string_view>

namespace tandem::text::utf8 {

inline constexpr std::size_t kValid = static_cast<std::size_t>(-1);
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// Byte offset of the first byte that does not start a well-formed UTF-8 sequence, or kValid.
std::size_t firstInvalidOffset(std::string_view bytes);

// Length in bytes of the (valid) character starting with `leadByte`.
inline std::size_t sequenceLength(unsigned char leadByte) {
    return leadByte < 0x80 ? 1 : leadByte < 0xE0 ? 2 : leadByte < 0xF0 ? 3 : 4;
}

// Decodes the character at `pos` of valid UTF-8 and advances `pos` past it.
char32_t decode(std::string_view text, std::size_t& pos);

void append(std::string& out, char32_t codePoint);

// `bytes` as valid UTF-8: each maximal subpart of an ill-formed sequence is replaced by one U+FFFD,
// the recommendation of the Unicode standard that Rust's String::from_utf8_lossy follows.
std::string toValidLossy(std::string_view bytes);

}  // namespace tandem::text::utf8
