#pragma once
// The pre-tokenization regex of a tiktoken tokenizer, written for Rust's regex engine (fancy-regex,
// which tiktoken runs), rewritten for PCRE2 so that every character class holds exactly the characters
// it holds in tiktoken:
// - class intersection "[A&&[^B]]", which PCRE2 lacks, becomes a lookahead before the class (see
//   onig_syntax.h): "(?:(?=[^B])[A])";
// - \p{Han} is the Han *script* in Rust, while PCRE2 (since 10.40) reads it as the script extension,
//   which adds shared punctuation such as "、" and "。": it is spelled out as the script's ranges;
// - \s is Unicode's White_Space in Rust, while PCRE2's also holds U+180E: it is spelled out;
// - \p{L}, \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo}, \p{M} and \p{N} keep PCRE2's property lookup (fast),
//   plus the characters Unicode 15.0-16.0 added to them, which PCRE2 10.42 (Unicode 14) lacks; a newer
//   PCRE2 already has them, and adding them again changes nothing.
// Anything else whose meaning differs between the two engines (\w, \b, \d, other properties and
// scripts, POSIX classes) is refused rather than guessed. tests/text/tst_tiktoken.cpp checks every
// class of Kimi's pattern against tiktoken on every code point.
#include <string>
#include <string_view>

namespace tandem::text {

// tokenization_kimi.py's TikTokenTokenizer.pat_str (Kimi-K2, K2-Instruct, K2-Thinking, Moonlight), as
// written there.
extern const std::string_view kKimiPattern;

// `pattern` (Rust regex syntax) as a PCRE2 pattern with the same matches. Throws tandem::Error naming
// `where` for a construct it cannot translate exactly.
std::string tiktokenPatternToPcre2(std::string_view pattern, const std::string& where);

}  // namespace tandem::text
