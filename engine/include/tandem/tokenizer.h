#pragma once
// A model's own tokenizer, read from its Hugging Face tokenizer.json, producing the same ids and text
// as Hugging Face `tokenizers` / transformers for the BPE tokenizers of Qwen2/3, DeepSeek-V2/V3/R1,
// Kimi-K2, Llama 3 and the SentencePiece-style (byte-fallback) ones of Llama 2 and Mistral/Mixtral;
// or from the tiktoken.model and tokenizer_config.json of Kimi-K2's release, producing the ids of its
// TikTokenTokenizer (tiktoken).
//
//   auto tokenizer = tandem::text::Tokenizer::load("/models/Qwen3-30B-A3B");
//   std::vector<int> ids = tokenizer.encode("Hello", /*addSpecialTokens=*/true);
//   std::string text = tokenizer.decode(ids, /*skipSpecialTokens=*/false);
//
// A Tokenizer is immutable and cheap to copy (copies share one loaded vocabulary); its methods may be
// called from several threads at once.
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/error.h"

namespace tandem::text {

class Tokenizer {
public:
    // A model folder (its tokenizer.json is used, else its tiktoken.model) or a tokenizer.json or
    // tiktoken.model file itself.
    static Tokenizer load(const std::filesystem::path& modelDirOrTokenizerFile);
    // The text of a tokenizer.json; `sourceName` names it in error messages.
    static Tokenizer fromJson(std::string_view json, const std::string& sourceName = "tokenizer.json");

    // Token ids of UTF-8 text; with addSpecialTokens the post-processor adds what the model expects
    // around a single text (for example BOS). Throws tandem::Error when `utf8` is not valid UTF-8.
    std::vector<int> encode(std::string_view utf8, bool addSpecialTokens) const;

    // The text of `ids`; with skipSpecialTokens the special added tokens (BOS, EOS, <|im_end|>, ...)
    // are left out. Bytes that do not form whole characters come out as U+FFFD. Throws tandem::Error
    // for an id that the vocabulary does not have.
    std::string decode(std::span<const int> ids, bool skipSpecialTokens) const;

    std::optional<int> tokenToId(std::string_view token) const;
    std::optional<std::string> idToToken(int id) const;
    // True for the added tokens marked special (never shown as text to a user).
    bool isSpecial(int id) const;
    // One past the largest id, counting the added tokens.
    int vocabSize() const;

    struct Impl;

private:
    explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    std::shared_ptr<const Impl> impl_;
};

}  // namespace tandem::text
