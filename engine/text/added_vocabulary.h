#pragma once
// The added tokens of a tokenizer.json ("<|im_start|>", "<think>", ...). They are found in the text
// before it is pre-tokenized, so no pre-tokenizer can cut them apart, and become their own ids.
// Tokens with `normalized` are looked for in the normalized text, the others in the original text.
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::text {

class Normalizer;

struct AddedToken {
    int id = 0;
    std::string content;
    bool special = false;     // hidden by decode(skipSpecialTokens)
    bool singleWord = false;  // only matches when not inside a word
    bool lstrip = false;      // swallows the whitespace before it
    bool rstrip = false;      // swallows the whitespace after it
    bool normalized = false;  // matched in the normalized text instead of the original
};

class AddedVocabulary {
public:
    struct Span {
        std::size_t start;
        std::size_t end;
        std::optional<int> id;  // the added token; nullopt for ordinary text
    };

    // `normalizer` (may be null) turns the content of `normalized` tokens into what they look like in
    // normalized text.
    AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

    // Cuts `text` into ordinary text and the added tokens of one kind (normalized or not), leftmost
    // first and the longest token where several start at the same place.
    std::vector<Span> split(std::string_view text, bool normalizedTokens) const;

    const AddedToken* find(int id) const;
    std::optional<int> idOf(std::string_view content) const;

private:
    // A byte trie over the contents of one kind of token.
    struct Trie {
        struct Node {
            std::vector<std::pair<unsigned char, int>> children;
            int token = -1;  // index into tokens_ when a token ends here
        };
        std::vector<Node> nodes{Node{}};
        std::array<bool, 256> startsToken{};

        void insert(std::string_view key, int token);
        // The longest token starting at `pos`: (token index, end), or nullopt.
        std::optional<std::pair<int, std::size_t>> longestAt(std::string_view text, std::size_t pos) const;
    };

    std::vector<AddedToken> tokens_;
    std::unordered_map<int, std::size_t> byId_;
    std::unordered_map<std::string, int> byContent_;
    Trie original_;
    Trie normalized_;
};

}  // namespace tandem::text
