#pragma once
// tokenizer.json regexes are written for Oniguruma, which Hugging Face tokenizers runs. PCRE2 reads
// almost all of that syntax the same way; the exception that real tokenizers use is class
// intersection, as in Kimi-K2's "[\p{Lu}\p{Lt}&&[^\p{Han}]]", which PCRE2 would silently read as a
// different class. This rewrites it into lookaheads PCRE2 understands.
#include <string>
#include <string_view>

namespace tandem::text {

// `pattern` with every "[A&&B]" written as "(?:(?=B)[A])" (and "[^A&&B]" as its complement).
// Throws tandem::Error naming `where` for a nested class that cannot be rewritten.
std::string oniguramaToPcre2(std::string_view pattern, const std::string& where);

}  // namespace tandem::text
