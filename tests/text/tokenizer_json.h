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

// gpt-oss's harmony layout on a small byte-level BPE: the tiny-qwen3moe fixture's tokenizer.json with
// its added tokens replaced by <|endoftext|>=1000 and the special tokens <|start|> <|end|> <|message|>
// <|channel|> <|constrain|> <|return|> <|call|> (ids 1001..1007; o200k_harmony has them at 200006,
// 200007, 200008, 200005, 200003, 200002, 200012).
Json harmonyTokenizerJson();

text::Tokenizer tokenizerFrom(const Json& config);

// Id of a token that must exist (fails the calling test through an exception otherwise).
int idOf(const text::Tokenizer& tokenizer, const std::string& token);

}  // namespace tandem::test
