#include "text/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include <vector>

#include "text/byte_level_alphabet.h"
#include "text/regex.h"
#include "text/split_pre_tokenizer.h"
#include "text/unicode.h"
#include "text/utf8.h"

namespace tandem::text {
namespace {

class SequencePreTokenizer final : public PreTokenizer {
public:
    explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> stages) : stages_(std::move(stages)) {}

    void split(const Piece& piece, PieceSink emit) const override { runFrom(0, piece, emit); }

private:
    void runFrom(std::size_t stage, const Piece& piece, PieceSink emit) const {
        if (stage == stages_.size()) {
            emit(piece);
            return;
        }
        stages_[stage]->split(piece, [&](const Piece& part) { runFrom(stage + 1, part, emit); });
    }

    std::vector<std::unique_ptr<PreTokenizer>> stages_;
};

// GPT-2's word pattern, which ByteLevel applies when use_regex is set.
const Regex& gpt2WordRegex() {
    static const Regex regex(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
                             "the built-in GPT-2 pattern");
    return regex;
}

class ByteLevelPreTokenizer final : public PreTokenizer {
public:
    ByteLevelPreTokenizer(bool addPrefixSpace, bool useRegex) : addPrefixSpace_(addPrefixSpace), useRegex_(useRegex) {}

    void split(const Piece& piece, PieceSink emit) const override {
        std::string prefixed;
        Piece source = piece;
        if (addPrefixSpace_ && piece.text.front() != ' ') {
            prefixed.reserve(piece.text.size() + 1);
            prefixed += ' ';
            prefixed += piece.text;
            source.text = prefixed;
        }
        if (!useRegex_) {
            emitMapped(source, emit);
            return;
        }
        splitAtMatches(
            source, [](std::string_view text, std::size_t from) { return gpt2WordRegex().find(text, from); },
            SplitBehavior::Isolated, false, [&](const Piece& word) { emitMapped(word, emit); });
    }

private:
    static void emitMapped(const Piece& piece, PieceSink emit) {
        std::string mapped;
        mapped.reserve(piece.text.size() * 2);
        byte_level::appendMapped(mapped, piece.text);
        emit(Piece{mapped, piece.atStart});
    }

    bool addPrefixSpace_;
    bool useRegex_;
};

enum class PrependScheme { Always, First, Never };

// SentencePiece's view of text: spaces become the replacement character ("▁"), a word starts at each
// one, and a "▁" is put in front so the first word looks like the others.
class MetaspacePreTokenizer final : public PreTokenizer {
public:
    MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool splitWords)
        : replacement_(std::move(replacement)), scheme_(scheme), splitWords_(splitWords) {}

    void split(const Piece& piece, PieceSink emit) const override {
        std::string text;
        text.reserve(piece.text.size() + replacement_.size() * 4);
        const bool prepend = (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && piece.atStart)) &&
                             !piece.text.starts_with(replacement_) && !piece.text.starts_with(' ');
        if (prepend) text += replacement_;
        for (const char ch : piece.text) {
            if (ch == ' ')
                text += replacement_;
            else
                text += ch;
        }
        const Piece replaced{text, piece.atStart};
        if (!splitWords_) {
            emit(replaced);
            return;
        }
        splitAtMatches(
            replaced,
            [this](std::string_view s, std::size_t from) -> std::optional<Regex::Match> {
                const std::size_t at = s.find(replacement_, from);
                if (at == std::string_view::npos) return std::nullopt;
                return Regex::Match{at, at + replacement_.size()};
            },
            SplitBehavior::MergedWithNext, false, emit);
    }

private:
    std::string replacement_;
    PrependScheme scheme_;
    bool splitWords_;
};

class DigitsPreTokenizer final : public PreTokenizer {
public:
    explicit DigitsPreTokenizer(bool individualDigits) : individualDigits_(individualDigits) {}

    void split(const Piece& piece, PieceSink emit) const override {
        splitAtMatches(
            piece, [](std::string_view text, std::size_t from) { return nextDigit(text, from); },
            individualDigits_ ? SplitBehavior::Isolated : SplitBehavior::Contiguous, false,
                       emit);
    }

private:
    static std::optional<Regex::Match> nextDigit(std::string_view text, std::size_t from) {
        std::size_t pos = from;
        while (pos < text.size()) {
            const std::size_t start = pos;
            if (unicode::isNumeric(utf8::decode(text, pos))) return Regex::Match{start, pos};
        }
        return std::nullopt;
    }

    bool individualDigits_;
};

PrependScheme metaspaceScheme(const Json& config, const std::string& where) {
    // Files written before prepend_scheme existed say add_prefix_space instead.
    if (!config.contains("prepend_scheme") || config["prepend_scheme"].is_null())
        return boolField(config, "add_prefix_space", where, true) ? PrependScheme::Always : PrependScheme::Never;
    const std::string scheme = stringField(config, "prepend_scheme", where);
    if (scheme == "always") return PrependScheme::Always;
    if (scheme == "first") return PrependScheme::First;
    if (scheme == "never") return PrependScheme::Never;
    throwMalformed(where + ".prepend_scheme", "'" + scheme + "' is unknown (expected always, first or never)");
}

std::string metaspaceReplacement(const Json& config, const std::string& where) {
    const std::string replacement = stringField(config, "replacement", where, "\u2581");
    std::size_t pos = 0;
    if (replacement.empty() || utf8::firstInvalidOffset(replacement) != utf8::kValid ||
        (utf8::decode(replacement, pos), pos != replacement.size()))
        throwMalformed(where + ".replacement", "expected a single character");
    return replacement;
}

}  // namespace

std::unique_ptr<PreTokenizer> makePreTokenizer(const Json& config, const std::string& where) {
    if (config.is_null()) return nullptr;
    const std::string type = componentType(config, where);
    if (type == "Split") return makeSplitPreTokenizer(config, where);
    if (type == "ByteLevel")
        return std::make_unique<ByteLevelPreTokenizer>(boolField(config, "add_prefix_space", where, true),
                                                       boolField(config, "use_regex", where, true));
    if (type == "Metaspace")
        return std::make_unique<MetaspacePreTokenizer>(metaspaceReplacement(config, where), metaspaceScheme(config, where),
                                                       boolField(config, "split", where, true));
    if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(boolField(config, "individual_digits", where, false));
    if (type == "Sequence") {
        const Json& list = requiredField(config, "pretokenizers", where);
        if (!list.is_array()) throwMalformed(where + ".pretokenizers", "expected a list");
        std::vector<std::unique_ptr<PreTokenizer>> stages;
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto stage = makePreTokenizer(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
            if (stage) stages.push_back(std::move(stage));
        }
        return std::make_unique<SequencePreTokenizer>(std::move(stages));
    }
    throwMalformed(where, "pre-tokenizer type '" + type +
                              "' is not supported (supported: ByteLevel, Digits, Metaspace, Sequence, Split)");
}

}  // namespace tandem::text
