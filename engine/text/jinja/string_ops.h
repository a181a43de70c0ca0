#pragma once
// String algorithms shared by the str methods and the filters, each matching its Python namesake.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::text::jinja::strings {

// str.split / str.rsplit; no separator splits on runs of whitespace.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
// str.strip / lstrip / rstrip; no chars strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
std::string replace(std::string_view s, std::string_view old, std::string_view replacement, std::int64_t count);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
// jinja2's title filter: capitalises after whitespace, '-', '(', '{', '[' and '<'.
std::string titleFilter(std::string_view s);
// jinja2's wordcount filter: the number of \w+ runs.
std::size_t wordCount(std::string_view s);

}  // namespace tandem::text::jinja::strings
