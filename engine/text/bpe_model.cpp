#include "text/bpe_model.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <queue>

#include "tandem/error.h"
#include "text/utf8.h"

namespace tandem::text {
namespace {

std::uint64_t pairKey(int left, int right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

// A merge that applies at symbol `position`; the heap yields the lowest rank first and, among equal
// ranks, the leftmost position.
struct Candidate {
    std::uint32_t rank;
    int position;
    int left;
    int right;
    int merged;
    bool operator>(const Candidate& other) const {
        return rank != other.rank ? rank > other.rank : position > other.position;
    }
};

}  // namespace

BpeModel::BpeModel(const Json& config, const std::string& where) {
    const Json& vocab = requiredField(config, "vocab", where);
    if (!vocab.is_object()) throwMalformed(where + ".vocab", "expected an object of token -> id");
    int largest = -1;
    vocab_.reserve(vocab.size());
    for (const auto& [token, id] : vocab.items()) {
        if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() > kMaxTokenId)
            throwMalformed(where + ".vocab", "the id of '" + token + "' is not a whole number from 0 to " +
                                                 std::to_string(kMaxTokenId));
        vocab_.emplace(token, id.get<int>());
        largest = std::max(largest, id.get<int>());
    }
    tokens_.resize(static_cast<std::size_t>(largest + 1));
    idUsed_.resize(tokens_.size());
    for (const auto& [token, id] : vocab_) {
        tokens_[static_cast<std::size_t>(id)] = token;
        idUsed_[static_cast<std::size_t>(id)] = true;
    }

    if (const std::string unk = stringField(config, "unk_token", where, ""); !unk.empty()) {
        unkToken_ = unk;
        unkId_ = tokenToId(unk);
    }
    fuseUnk_ = boolField(config, "fuse_unk", where, false);
    byteFallback_ = boolField(config, "byte_fallback", where, false);
    ignoreMerges_ = boolField(config, "ignore_merges", where, false);
    continuingSubwordPrefix_ = stringField(config, "continuing_subword_prefix", where, "");
    endOfWordSuffix_ = stringField(config, "end_of_word_suffix", where, "");
    if (byteFallback_) {
        byteTokens_.assign(256, -1);
        for (int b = 0; b < 256; ++b) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            if (const auto id = tokenToId(name)) byteTokens_[static_cast<std::size_t>(b)] = *id;
        }
    }
    loadMerges(requiredField(config, "merges", where), where + ".merges");
}

BpeModel::BpeModel(std::vector<std::string> tokens, const std::vector<BpeMerge>& merges, bool ignoreMerges)
    : tokens_(std::move(tokens)), idUsed_(tokens_.size()), ignoreMerges_(ignoreMerges) {
    vocab_.reserve(tokens_.size());
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
        if (tokens_[id].empty()) continue;
        vocab_.emplace(tokens_[id], static_cast<int>(id));
        idUsed_[id] = true;
    }
    merges_.reserve(merges.size());
    for (const BpeMerge& m : merges) merges_.insert_or_assign(pairKey(m.left, m.right), Merge{m.rank, m.merged});
}

void BpeModel::loadMerges(const Json& merges, const std::string& where) {
    if (!merges.is_array()) throwMalformed(where, "expected a list");
    merges_.reserve(merges.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
        const Json& entry = merges[rank];
        const std::string at = where + "[" + std::to_string(rank) + "]";
        std::string left, right;
        // Two spellings exist: "a b" (older files) and ["a", "b"] (newer, which allows spaces in tokens).
        if (entry.is_string()) {
            const std::string line = entry.get<std::string>();
            const std::size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
                throwMalformed(at, "expected two tokens separated by one space, got '" + line + "'");
            left = line.substr(0, space);
            right = line.substr(space + 1);
        } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
            left = entry[0].get<std::string>();
            right = entry[1].get<std::string>();
        } else {
            throwMalformed(at, "expected \"a b\" or [\"a\", \"b\"]");
        }
        const auto leftId = tokenToId(left);
        const auto rightId = tokenToId(right);
        if (!leftId || !rightId)
            throwMalformed(at, "merge token '" + (leftId ? right : left) + "' is not in the vocabulary");
        // The right part's continuing-subword prefix does not survive the merge ("##b" + "##c" -> "##bc").
        std::string merged = left;
        merged += std::string_view(right).substr(
            right.starts_with(continuingSubwordPrefix_) ? continuingSubwordPrefix_.size() : 0);
        const auto mergedId = tokenToId(merged);
        if (!mergedId) throwMalformed(at, "the merged token '" + merged + "' is not in the vocabulary");
        // A repeated merge keeps its last rank, as Hugging Face tokenizers do.
        merges_.insert_or_assign(pairKey(*leftId, *rightId), Merge{static_cast<std::uint32_t>(rank), *mergedId});
    }
}

std::optional<int> BpeModel::tokenToId(std::string_view token) const {
    const auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
}

const std::string* BpeModel::idToToken(int id) const {
    if (id < 0 || id >= size() || !idUsed_[static_cast<std::size_t>(id)]) return nullptr;
    return &tokens_[static_cast<std::size_t>(id)];
}

const BpeModel::Merge* BpeModel::findMerge(int left, int right) const {
    const auto it = merges_.find(pairKey(left, right));
    return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::initialSymbols(std::string_view word, std::vector<int>& symbols) const {
    // An unknown character becomes unk_token; with fuse_unk a run of them becomes one. The pending unk is
    // only written when a known character or the end of the word follows, which is also where Hugging
    // Face puts it relative to byte-fallback tokens.
    int pendingUnk = -1;
    std::string decorated;
    std::size_t pos = 0;
    while (pos < word.size()) {
        const std::size_t start = pos;
        pos += utf8::sequenceLength(static_cast<unsigned char>(word[pos]));
        std::string_view symbol = word.substr(start, pos - start);
        if ((start > 0 && !continuingSubwordPrefix_.empty()) || (pos == word.size() && !endOfWordSuffix_.empty())) {
            decorated.assign(start > 0 ? continuingSubwordPrefix_ : std::string());
            decorated += symbol;
            if (pos == word.size()) decorated += endOfWordSuffix_;
            symbol = decorated;
        }
        if (const auto id = tokenToId(symbol)) {
            if (pendingUnk >= 0) symbols.push_back(pendingUnk);
            pendingUnk = -1;
            symbols.push_back(*id);
            continue;
        }
        if (byteFallback_) {
            bool allBytesKnown = true;
            for (const char b : symbol) allBytesKnown &= byteTokens_[static_cast<unsigned char>(b)] >= 0;
            if (allBytesKnown) {
                for (const char b : symbol) symbols.push_back(byteTokens_[static_cast<unsigned char>(b)]);
                continue;
            }
        }
        if (unkToken_.empty()) continue;  // without unk_token an unknown character is dropped
        if (!unkId_)
            throw Error("the tokenizer's unk_token '" + unkToken_ +
                        "' is not in its vocabulary, so the unknown character '" + std::string(symbol) +
                        "' cannot be encoded; the tokenizer.json is inconsistent");
        if (pendingUnk >= 0 && !fuseUnk_) symbols.push_back(pendingUnk);
        pendingUnk = *unkId_;
    }
    if (pendingUnk >= 0) symbols.push_back(pendingUnk);
}

void BpeModel::applyMerges(std::vector<int>& symbols) const {
    const int n = static_cast<int>(symbols.size());
    if (n < 2) return;
    // A doubly linked list over the symbols: merging marks the right symbol dead (-1) and relinks.
    std::vector<int> next(static_cast<std::size_t>(n)), prev(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        next[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : -1;
        prev[static_cast<std::size_t>(i)] = i - 1;
    }
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    const auto consider = [&](int position) {
        const int right = next[static_cast<std::size_t>(position)];
        if (right < 0) return;
        const int leftId = symbols[static_cast<std::size_t>(position)];
        const int rightId = symbols[static_cast<std::size_t>(right)];
        if (const Merge* m = findMerge(leftId, rightId)) queue.push({m->rank, position, leftId, rightId, m->merged});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        const auto p = static_cast<std::size_t>(c.position);
        // Skip candidates that an earlier merge made stale.
        if (symbols[p] != c.left) continue;
        const int right = next[p];
        if (right < 0 || symbols[static_cast<std::size_t>(right)] != c.right) continue;
        symbols[p] = c.merged;
        symbols[static_cast<std::size_t>(right)] = -1;
        next[p] = next[static_cast<std::size_t>(right)];
        if (next[p] >= 0) prev[static_cast<std::size_t>(next[p])] = c.position;
        if (prev[p] >= 0) consider(prev[p]);
        consider(c.position);
    }
    std::erase(symbols, -1);
}

void BpeModel::encodeWord(std::string_view word, std::vector<int>& ids) const {
    if (word.empty()) return;
    if (ignoreMerges_) {
        if (const auto id = tokenToId(word)) {
            ids.push_back(*id);
            return;
        }
    }
    const bool cacheable = word.size() <= kLongestCachedWord;
    if (cacheable) {
        const std::lock_guard lock(cacheMutex_);
        const auto it = cache_.find(word);
        if (it != cache_.end()) {
            ids.insert(ids.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::vector<int> symbols;
    symbols.reserve(word.size());
    initialSymbols(word, symbols);
    applyMerges(symbols);
    ids.insert(ids.end(), symbols.begin(), symbols.end());
    if (cacheable) {
        const std::lock_guard lock(cacheMutex_);
        if (cache_.size() < kCacheCapacity) cache_.emplace(word, std::move(symbols));
    }
}

}  // namespace tandem::text
