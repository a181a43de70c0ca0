#pragma once
// The BPE model of a tokenizer.json: a vocabulary, ranked merges, and the options byte_fallback,
// unk_token (with fuse_unk), ignore_merges, continuing_subword_prefix and end_of_word_suffix.
// Encoding a word starts from its characters and applies the lowest-ranked merge of any adjacent pair
// until none applies; results are cached per word, since prose repeats its words.
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/json_fields.h"

namespace tandem::text {

// Hashes std::string and std::string_view alike, so lookups by view allocate nothing.
struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int, StringHash, std::equal_to<>>;

// A merge of a model built from parts: the adjacent symbols `left` and `right` become `merged`; the
// lowest `rank` applies first.
struct BpeMerge {
    int left;
    int right;
    int merged;
    std::uint32_t rank;
};

class BpeModel {
public:
    // `config` is the tokenizer.json "model" object; `where` names it in errors.
    BpeModel(const Json& config, const std::string& where);
    // A model from its parts (a tiktoken vocabulary): `tokens` by id, an empty string where an id is
    // unused. With `ignoreMerges` a word that is a token itself is that token, whatever the merges say.
    BpeModel(std::vector<std::string> tokens, const std::vector<BpeMerge>& merges, bool ignoreMerges);

    // Appends the ids of one pre-tokenized word.
    void encodeWord(std::string_view word, std::vector<int>& ids) const;

    std::optional<int> tokenToId(std::string_view token) const;
    // nullptr when no vocabulary entry has this id.
    const std::string* idToToken(int id) const;
    // One past the largest id of the vocabulary.
    int size() const { return static_cast<int>(tokens_.size()); }

private:
    struct Merge {
        std::uint32_t rank;
        int merged;
    };

    void loadMerges(const Json& merges, const std::string& where);
    // The symbols a word starts as, before any merge.
    void initialSymbols(std::string_view word, std::vector<int>& symbols) const;
    void applyMerges(std::vector<int>& symbols) const;
    const Merge* findMerge(int left, int right) const;

    TokenIds vocab_;
    std::vector<std::string> tokens_;  // id -> token; empty where an id is unused
    std::vector<bool> idUsed_;
    std::unordered_map<std::uint64_t, Merge> merges_;
    std::string unkToken_;
    std::optional<int> unkId_;
    bool fuseUnk_ = false;
    bool byteFallback_ = false;
    bool ignoreMerges_ = false;
    std::string continuingSubwordPrefix_;
    std::string endOfWordSuffix_;
    std::vector<int> byteTokens_;  // byte -> id of "<0xNN>", or -1; filled when byte_fallback is on

    // Cached word encodings. Bounded so that adversarial input cannot grow it without limit.
    static constexpr std::size_t kCacheCapacity = 100'000;
    static constexpr std::size_t kLongestCachedWord = 256;
    mutable std::mutex cacheMutex_;
    mutable std::unordered_map<std::string, std::vector<int>, StringHash, std::equal_to<>> cache_;
};

}  // namespace tandem::text
