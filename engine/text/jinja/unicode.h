#pragma once
// The few Unicode facts Python's str methods depend on: UTF-8 <-> code points, str.isspace(),
// str.isprintable() (for repr) and simple case mapping. Python strings are sequences of code points,
// so every length, index and slice in a template counts code points, not bytes.
#include <string>
#include <string_view>

namespace tandem::text::jinja::unicode {

// Invalid UTF-8 bytes decode to U+FFFD, like Python's errors="replace".
std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view text);
void append(std::string& out, char32_t cp);
std::size_t length(std::string_view utf8);

// Python's str.isspace() for one code point: the set that str.split() and str.strip() use.
bool isSpace(char32_t cp);
// Python's str.isprintable() for one code point, which decides what repr() escapes. Exact for
// Latin-1 and the format/separator characters templates meet; unassigned code points count as printable.
bool isPrintable(char32_t cp);
// Line boundaries of str.splitlines().
bool isLineBreak(char32_t cp);

// Simple (one-to-one) case mapping from the C library's UTF-8 locale; ASCII only where that locale is missing.
char32_t toUpper(char32_t cp);
char32_t toLower(char32_t cp);
char32_t toTitle(char32_t cp);  // the first letter of a word in str.title() and str.capitalize()
bool isAlpha(char32_t cp);
bool isDigit(char32_t cp);
bool isUpper(char32_t cp);
bool isLower(char32_t cp);
// Python's \w: letters, digits and underscore.
bool isWordChar(char32_t cp);

// str.upper(), including the one special casing templates meet: ß becomes SS.
std::string upper(std::string_view utf8);
std::string lower(std::string_view utf8);

}  // namespace tandem::text::jinja::unicode
