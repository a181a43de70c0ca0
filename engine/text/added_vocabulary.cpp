#include "text/added_vocabulary.h"

#include "text/normalizer.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace tandem::text {
namespace {

// The character just before byte `pos` of valid UTF-8 `text` (pos > 0).
char32_t characterBefore(std::string_view text, std::size_t pos) {
    std::size_t start = pos - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    return utf8::decode(text, start);
}

char32_t characterAt(std::string_view text, std::size_t pos) { return utf8::decode(text, pos); }

// Start of the run of whitespace that ends at `pos`.
std::size_t whitespaceRunBefore(std::string_view text, std::size_t pos) {
    while (pos > 0 && unicode::isWhitespace(characterBefore(text, pos))) {
        --pos;
        while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
    }
    return pos;
}

// End of the run of whitespace that starts at `pos`.
std::size_t whitespaceRunAfter(std::string_view text, std::size_t pos) {
    while (pos < text.size()) {
        std::size_t next = pos;
        if (!unicode::isWhitespace(utf8::decode(text, next))) break;
        pos = next;
    }
    return pos;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view key, int token) {
    if (key.empty()) return;
    startsToken[static_cast<unsigned char>(key.front())] = true;
    int node = 0;
    for (const char ch : key) {
        const auto byte = static_cast<unsigned char>(ch);
        int child = -1;
        for (const auto& [b, index] : nodes[static_cast<std::size_t>(node)].children)
            if (b == byte) child = index;
        if (child < 0) {
            child = static_cast<int>(nodes.size());
            nodes[static_cast<std::size_t>(node)].children.emplace_back(byte, child);
            nodes.emplace_back();
        }
        node = child;
    }
    // Two tokens with one content: the first one listed wins, like the first pattern of a match set.
    if (nodes[static_cast<std::size_t>(node)].token < 0) nodes[static_cast<std::size_t>(node)].token = token;
}

std::optional<std::pair<int, std::size_t>> AddedVocabulary::Trie::longestAt(std::string_view text, std::size_t pos) const {
    std::optional<std::pair<int, std::size_t>> best;
    int node = 0;
    for (std::size_t i = pos; i < text.size(); ++i) {
        const auto byte = static_cast<unsigned char>(text[i]);
        int child = -1;
        for (const auto& [b, index] : nodes[static_cast<std::size_t>(node)].children)
            if (b == byte) child = index;
        if (child < 0) break;
        node = child;
        if (nodes[static_cast<std::size_t>(node)].token >= 0) best = {nodes[static_cast<std::size_t>(node)].token, i + 1};
    }
    return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer) : tokens_(std::move(tokens)) {
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        const AddedToken& token = tokens_[i];
        byId_.emplace(token.id, i);
        byContent_.emplace(token.content, token.id);
        if (!token.normalized) {
            original_.insert(token.content, static_cast<int>(i));
        } else {
            std::string pattern = token.content;
            if (normalizer) normalizer->normalize(pattern);
            normalized_.insert(pattern, static_cast<int>(i));
        }
    }
}

std::vector<AddedVocabulary::Span> AddedVocabulary::split(std::string_view text, bool normalizedTokens) const {
    const Trie& trie = normalizedTokens ? normalized_ : original_;
    std::vector<Span> spans;
    std::size_t textStart = 0;  // where the ordinary text not yet emitted begins
    std::size_t pos = 0;
    while (pos < text.size()) {
        if (!trie.startsToken[static_cast<unsigned char>(text[pos])]) {
            ++pos;
            continue;
        }
        const auto match = trie.longestAt(text, pos);
        if (!match) {
            ++pos;
            continue;
        }
        const AddedToken& token = tokens_[static_cast<std::size_t>(match->first)];
        std::size_t start = pos;
        std::size_t end = match->second;
        if (token.singleWord) {
            const bool wordBefore = start > 0 && unicode::isWordCharacter(characterBefore(text, start));
            const bool wordAfter = end < text.size() && unicode::isWordCharacter(characterAt(text, end));
            if (wordBefore || wordAfter) {
                pos = end;
                continue;
            }
        }
        if (token.lstrip) start = std::max(whitespaceRunBefore(text, start), textStart);
        if (token.rstrip) end = whitespaceRunAfter(text, end);
        if (start > textStart) spans.push_back({textStart, start, std::nullopt});
        spans.push_back({start, end, token.id});
        textStart = pos = end;
    }
    if (textStart < text.size()) spans.push_back({textStart, text.size(), std::nullopt});
    return spans;
}

const AddedToken* AddedVocabulary::find(int id) const {
    const auto it = byId_.find(id);
    return it == byId_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int> AddedVocabulary::idOf(std::string_view content) const {
    const auto it = byContent_.find(std::string(content));
    if (it == byContent_.end()) return std::nullopt;
    return it->second;
}

}  // namespace tandem::text
