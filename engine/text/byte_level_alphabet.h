#pragma once
// GPT-2's byte-level alphabet: every byte is shown as one printable character (printable Latin-1 bytes
// as themselves, the others as U+0100 onwards, so a space becomes "Ġ"). Byte-level BPE vocabularies are
// written in this alphabet; the ByteLevel pre-tokenizer maps into it and the ByteLevel decoder back.
#include <string>
#include <string_view>

namespace tandem::text::byte_level {

// Appends the alphabet's characters for `bytes` to `out`.
void appendMapped(std::string& out, std::string_view bytes);

// Appends the bytes that the alphabet characters of `token` stand for and returns true; returns false
// and appends nothing when `token` has a character outside the alphabet (an added token such as
// "<｜begin▁of▁sentence｜>", which the decoder then keeps as it is).
bool appendUnmapped(std::string& out, std::string_view token);

}  // namespace tandem::text::byte_level
