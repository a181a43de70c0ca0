#pragma once
// The parts of a loaded tokenizer, in the order text flows through them when encoding.
#include <memory>
#include <optional>
#include <string>

#include "tandem/tokenizer.h"
#include "text/added_vocabulary.h"
#include "text/bpe_model.h"
#include "text/decoder.h"
#include "text/json_fields.h"
#include "text/normalizer.h"
#include "text/post_processor.h"
#include "text/pre_tokenizer.h"
#include "text/text_chunks.h"

namespace tandem::text {

struct Tokenizer::Impl {
    std::string source;  // the file (or name) it was loaded from, for error messages
    std::unique_ptr<Normalizer> normalizer;
    std::unique_ptr<PreTokenizer> preTokenizer;
    std::unique_ptr<BpeModel> model;
    std::unique_ptr<PostProcessor> postProcessor;
    std::unique_ptr<Decoder> decoder;
    std::unique_ptr<AddedVocabulary> addedTokens;
    int vocabSize = 0;
    // Cuts made before anything else, each piece encoded on its own (Kimi's tiktoken tokenizer).
    std::optional<ChunkLimits> chunking;
    // The added tokens are plain text rather than byte-level strings (tiktoken's special tokens): decode
    // maps them into the byte-level alphabet first, so that the ByteLevel decoder gives their text back.
    bool byteLevelAddedTokens = false;
};

// Builds the parts from a parsed tokenizer.json; errors name `source` and the JSON path.
std::shared_ptr<const Tokenizer::Impl> buildTokenizer(const Json& config, const std::string& source);

}  // namespace tandem::text
