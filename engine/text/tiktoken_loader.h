#pragma once
// A tiktoken tokenizer as Moonshot ships it with Kimi-K2 (K2-Instruct, K2-Thinking) and Moonlight:
// tiktoken.model holds one "BASE64 RANK" line per token (its bytes and its rank, which is also its id);
// tokenizer_config.json names the special tokens, which take the 256 ids after the ranks (Kimi's
// TikTokenTokenizer calls the unnamed ones "<|reserved_token_ID|>"); the pre-tokenization regex is the
// one in tokenization_kimi.py (kKimiPattern).
//
// It becomes the parts of a byte-level BPE tokenizer that encodes exactly as tiktoken does:
// - vocabulary: every token's bytes in GPT-2's byte-level alphabet, its id the rank. Tokens that are not
//   UTF-8 on their own (part of a character) are no different: one alphabet character per byte.
// - merges: tiktoken starts a piece as single bytes and joins the adjacent pair whose concatenation has
//   the lowest rank (the leftmost on a tie) until no concatenation is a token. Its parts are always
//   tokens, so every split of a token into two tokens is a merge, ranked by the token's rank: the same
//   pairs join in the same order, since BpeModel too takes the lowest rank and the leftmost on a tie.
// - ignore_merges: tiktoken first looks the whole piece up and takes its rank if it is a token, even
//   one that no chain of merges reaches.
// - pre-tokenizer: Kimi's regex translated for PCRE2 (tiktoken_pattern.h), each match then mapped into
//   the byte-level alphabet; before it, text is cut as Kimi's encode cuts it (text_chunks.h).
// - special tokens: found anywhere in the text, as tiktoken's allowed_special="all" finds them (no
//   Kimi special token is a prefix of another, the one case where tiktoken's choice would be arbitrary
//   and Tandem takes the longest); no BOS is added, as Kimi's encode adds none.
// - decoding: the bytes of the tokens joined (special tokens as their text), invalid UTF-8 replaced by
//   U+FFFD as Python's bytes.decode("utf-8", "replace") does.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer_impl.h"

namespace tandem::text {

// The tokens of a tiktoken.model by rank, an empty string where no line has that rank. Throws
// tandem::Error naming `source` and the line for a malformed line, a repeated rank or a repeated token.
std::vector<std::string> parseTiktokenRanks(std::string_view text, const std::string& source);

// The pat_str of a tokenizer's Python code (tokenization_kimi.py): the raw string literals of
// `pat_str = "|".join([...])` joined by "|", or nullopt when the code does not spell it that way.
std::optional<std::string> pythonPatternOf(std::string_view code);

// The tokenizer of `modelDir`'s tiktoken.model and tokenizer_config.json. Throws tandem::Error naming
// the file for what is missing, malformed or not Kimi's tokenizer.
std::shared_ptr<const Tokenizer::Impl> loadTiktokenTokenizer(const std::filesystem::path& modelDir);

}  // namespace tandem::text
