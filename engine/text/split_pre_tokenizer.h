#pragma once
// Cutting text at the matches of a pattern, with the five "behaviors" of Hugging Face tokenizers that
// say where a match goes: dropped, on its own, glued to the part before or after, or merged with the
// adjacent matches. Split, Digits and Metaspace pre-tokenizers are all built on it.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "text/function_ref.h"
#include "text/pre_tokenizer.h"
#include "text/regex.h"

namespace tandem::text {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

SplitBehavior parseSplitBehavior(const std::string& name, const std::string& where);

// Finds the next match at or after a byte offset.
using MatchFinder = FunctionRef<std::optional<Regex::Match>(std::string_view text, std::size_t from)>;

// Cuts `piece` at the matches `findMatch` reports; with `invert` the stretches between matches count as
// the matches.
void splitAtMatches(const Piece& piece, MatchFinder findMatch, SplitBehavior behavior, bool invert, PieceSink emit);

// The Split pre-tokenizer: {"type": "Split", "pattern": ..., "behavior": ..., "invert": ...}.
std::unique_ptr<PreTokenizer> makeSplitPreTokenizer(const Json& config, const std::string& where);

}  // namespace tandem::text
