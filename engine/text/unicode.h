#pragma once
// Unicode character properties and normalization forms, answered by utf8proc so that no Unicode table
// is written by hand. The properties mirror what Hugging Face tokenizers (Rust) use for each decision.
#include <string>
#include <string_view>

namespace tandem::text::unicode {

// Rust's char::is_whitespace: the White_Space property (space separators, line and paragraph
// separators, and the controls TAB, LF, VT, FF, CR and NEL).
bool isWhitespace(char32_t c);

// Rust's char::is_numeric: general categories Nd, Nl and No.
bool isNumeric(char32_t c);

// A word character of Rust's regex \w: letters, marks, decimal and letter numbers, connector punctuation.
bool isWordCharacter(char32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };

// `text` (valid UTF-8) in the given normalization form.
std::string normalize(std::string_view text, NormalForm form);

}  // namespace tandem::text::unicode
