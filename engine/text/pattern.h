#pragma once
// The "pattern" of a Split pre-tokenizer or a Replace normalizer/decoder: {"String": "..."} is matched
// literally, {"Regex": "..."} as a regular expression.
#include <optional>
#include <string>
#include <string_view>

#include "text/json_fields.h"
#include "text/regex.h"

namespace tandem::text {

class Pattern {
public:
    static Pattern fromJson(const Json& pattern, const std::string& where);
    static Pattern literal(std::string text);

    // The leftmost non-empty match at or after byte `from` of valid UTF-8 `text`.
    std::optional<Regex::Match> find(std::string_view text, std::size_t from) const;

    // `text` with every match replaced by `replacement`.
    std::string replaceAll(std::string_view text, std::string_view replacement) const;

private:
    Pattern(std::string literal, std::optional<Regex> regex) : literal_(std::move(literal)), regex_(std::move(regex)) {}

    std::string literal_;
    std::optional<Regex> regex_;
};

}  // namespace tandem::text
