#include "text/tiktoken_pattern.h"

#include "tandem/error.h"
#include "text/onig_syntax.h"

namespace tandem::text {

const std::string_view kKimiPattern =
    R"([\p{Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";

namespace {

// The Han script (Script=Han, not Script_Extensions) of Unicode 16.0, as Rust's regex crate has it.
constexpr std::string_view kHan =
    R"(\x{2E80}-\x{2E99}\x{2E9B}-\x{2EF3}\x{2F00}-\x{2FD5}\x{3005}\x{3007}\x{3021}-\x{3029}\x{3038}-\x{303B})"
    R"(\x{3400}-\x{4DBF}\x{4E00}-\x{9FFF}\x{F900}-\x{FA6D}\x{FA70}-\x{FAD9}\x{16FE2}-\x{16FE3}\x{16FF0}-\x{16FF1})"
    R"(\x{20000}-\x{2A6DF}\x{2A700}-\x{2B739}\x{2B740}-\x{2B81D}\x{2B820}-\x{2CEA1}\x{2CEB0}-\x{2EBE0})"
    R"(\x{2EBF0}-\x{2EE5D}\x{2F800}-\x{2FA1D}\x{30000}-\x{3134A}\x{31350}-\x{323AF})";

// The White_Space property, which is Rust's \s.
constexpr std::string_view kWhiteSpace =
    R"(\x{9}-\x{D}\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// What each general category gained in Unicode 15.0, 15.1 and 16.0 (Rust's regex crate, which tiktoken
// 0.14 uses, has Unicode 16.0; PCRE2 10.42 has Unicode 14.0). No character left these categories.
constexpr std::string_view kAddedLu = R"(\x{1C89}\x{A7CB}-\x{A7CC}\x{A7DA}\x{A7DC}\x{10D50}-\x{10D65})";
constexpr std::string_view kAddedLl = R"(\x{1C8A}\x{A7CD}\x{A7DB}\x{10D70}-\x{10D85}\x{1DF25}-\x{1DF2A})";
constexpr std::string_view kAddedLm =
    R"(\x{10D4E}\x{10D6F}\x{16D40}-\x{16D42}\x{16D6B}-\x{16D6C}\x{1E030}-\x{1E06D}\x{1E4EB})";
constexpr std::string_view kAddedLo =
    R"(\x{105C0}-\x{105F3}\x{10D4A}-\x{10D4D}\x{10D4F}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240}\x{11380}-\x{11389})"
    R"(\x{1138B}\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3}\x{11BC0}-\x{11BE0}\x{11F02}\x{11F04}-\x{11F10})"
    R"(\x{11F12}-\x{11F33}\x{1342F}\x{13441}-\x{13446}\x{13460}-\x{143FA}\x{16100}-\x{1611D}\x{16D43}-\x{16D6A})"
    R"(\x{18CFF}\x{1B132}\x{1B155}\x{1E4D0}-\x{1E4EA}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739}\x{2EBF0}-\x{2EE5D})"
    R"(\x{31350}-\x{323AF})";
constexpr std::string_view kAddedM =
    R"(\x{897}\x{CF3}\x{ECE}\x{10D69}-\x{10D6D}\x{10EFC}-\x{10EFF}\x{11241}\x{113B8}-\x{113C0}\x{113C2}\x{113C5})"
    R"(\x{113C7}-\x{113CA}\x{113CC}-\x{113D0}\x{113D2}\x{113E1}-\x{113E2}\x{11F00}-\x{11F01}\x{11F03})"
    R"(\x{11F34}-\x{11F3A}\x{11F3E}-\x{11F42}\x{11F5A}\x{13440}\x{13447}-\x{13455}\x{1611E}-\x{1612F}\x{1E08F})"
    R"(\x{1E4EC}-\x{1E4EF}\x{1E5EE}-\x{1E5EF})";
constexpr std::string_view kAddedN =
    R"(\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59}\x{16130}-\x{16139})"
    R"(\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3}\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";

class Translator {
public:
    Translator(std::string_view pattern, std::string_view original, const std::string& where)
        : p_(pattern), original_(original), where_(where) {}

    std::string run() {
        while (i_ < p_.size()) {
            if (p_[i_] == '\\') {
                escape();
            } else if (p_[i_] == '[') {
                characterClass();
            } else {
                out_ += p_[i_++];
            }
        }
        return out_;
    }

private:
    // Escapes outside a class: properties and \s become classes of their own.
    void escape() {
        if (i_ + 1 >= p_.size()) unsupported("a trailing backslash");
        const char c = p_[i_ + 1];
        if (c == 'p' || c == 'P') {
            const std::string members = property();
            out_ += (c == 'P' ? "[^" : "[") + members + "]";
        } else if (c == 's' || c == 'S') {
            out_ += (c == 'S' ? "[^" : "[") + std::string(kWhiteSpace) + "]";
            i_ += 2;
        } else {
            plainEscape();
        }
    }

    void characterClass() {
        out_ += p_[i_++];  // '['
        if (i_ < p_.size() && p_[i_] == '^') out_ += p_[i_++];
        if (i_ < p_.size() && p_[i_] == ']') out_ += p_[i_++];  // a ']' first is a literal
        while (i_ < p_.size() && p_[i_] != ']') {
            if (p_[i_] == '[') unsupported("a character class inside another one, or a POSIX class");
            if (p_[i_] != '\\') {
                out_ += p_[i_++];
                continue;
            }
            if (i_ + 1 >= p_.size()) unsupported("a trailing backslash");
            const char c = p_[i_ + 1];
            if (c == 'p') {
                out_ += property();
            } else if (c == 's') {
                out_ += kWhiteSpace;
                i_ += 2;
            } else if (c == 'P' || c == 'S') {
                unsupported("a negated property inside a character class");
            } else {
                plainEscape();
            }
        }
        if (i_ >= p_.size()) unsupported("an unclosed character class");
        out_ += p_[i_++];  // ']'
    }

    // "\x{...}", "\r", "\-", ...: the same in both engines; the Unicode shorthands are not.
    void plainEscape() {
        const char c = p_[i_ + 1];
        if (c == 'w' || c == 'W' || c == 'b' || c == 'B' || c == 'd' || c == 'D' || c == 'X' || c == 'R')
            unsupported("\\w, \\b, \\d, \\X or \\R");
        out_ += p_.substr(i_, 2);
        i_ += 2;
    }

    // The members of "\p{Name}" or "\pN" at i_, written for the inside of a class.
    std::string property() {
        std::string_view name;
        if (i_ + 2 < p_.size() && p_[i_ + 2] == '{') {
            const std::size_t close = p_.find('}', i_ + 3);
            if (close == std::string_view::npos) unsupported("an unclosed \\p{...}");
            name = p_.substr(i_ + 3, close - i_ - 3);
            i_ = close + 1;
        } else if (i_ + 2 < p_.size()) {
            name = p_.substr(i_ + 2, 1);
            i_ += 3;
        } else {
            unsupported("a trailing \\p");
        }
        const auto category = [](std::string_view n, std::initializer_list<std::string_view> added) {
            std::string s = "\\p{" + std::string(n) + "}";
            for (const auto a : added) s += a;
            return s;
        };
        if (name == "Han") return std::string(kHan);
        if (name == "L") return category(name, {kAddedLu, kAddedLl, kAddedLm, kAddedLo});
        if (name == "Lu") return category(name, {kAddedLu});
        if (name == "Ll") return category(name, {kAddedLl});
        if (name == "Lt") return category(name, {});
        if (name == "Lm") return category(name, {kAddedLm});
        if (name == "Lo") return category(name, {kAddedLo});
        if (name == "M") return category(name, {kAddedM});
        if (name == "N") return category(name, {kAddedN});
        unsupported("the property \\p{" + std::string(name) + "}");
    }

    [[noreturn]] void unsupported(const std::string& what) const {
        throw Error(where_ + ": the regex /" + std::string(original_) + "/ uses " + what +
                    ", which Tandem cannot translate exactly for PCRE2 (it knows \\p{Han}, \\p{L}, \\p{Lu}, \\p{Ll}, "
                    "\\p{Lt}, \\p{Lm}, \\p{Lo}, \\p{M}, \\p{N} and \\s); please report this tokenizer");
    }

    std::string_view p_;
    std::string_view original_;
    const std::string& where_;
    std::size_t i_ = 0;
    std::string out_;
};

}  // namespace

std::string tiktokenPatternToPcre2(std::string_view pattern, const std::string& where) {
    // Intersections first: what remains has no nested classes, only escapes, ranges and lookaheads.
    const std::string intersected = oniguramaToPcre2(pattern, where);
    return Translator(intersected, pattern, where).run();
}

}  // namespace tandem::text
