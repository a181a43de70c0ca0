#pragma once
// tokenizer.json documents for the tokenizer tests: a fixture's own file to patch, and a small
// SentencePiece-style BPE tokenizer (the Llama 2 / Mistral layout) that the tests build themselves.
#include <QString>
#include <nlohmann/json.hpp>

#include "tandem/tokenizer.h"

namespace tandem::test {

using Json = nlohmann::json;

// The parsed tokenizer.json of a fixture folder (tiny-*).
Json fixtureTokenizerJson(const QString& fixture);

enum class SentencePieceStyle {
    // Llama 2 "legacy": a Prepend("▁") + Replace(" " -> "▁") normalizer and no pre-tokenizer.
    NormalizerPrependReplace,
    // Newer Llama/Mistral files: a Metaspace pre-tokenizer (prepend_scheme "first", no split).
    MetaspacePreTokenizer,
};

// Vocabulary: <unk>=0, <s>=1, </s>=2, the 256 byte tokens <0x00>..<0xFF> (ids 3..258), then a few
// dozen pieces spelling "hello", "world", "the", "café" and their parts. byte_fallback is on, the
// post-processor puts <s> in front, and the decoder is Sequence[Replace, ByteFallback, Fuse, Strip].
Json sentencePieceTokenizerJson(SentencePieceStyle style);

text::Tokenizer tokenizerFrom(const Json& config);

// Id of a token that must exist (fails the calling test through an exception otherwise).
int idOf(const text::Tokenizer& tokenizer, const std::string& token);

}  // namespace tandem::test
