#include "text/jinja/lexer.h"

#include <algorithm>
#include <cstdlib>

#include "text/jinja/python_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja {
namespace {

bool isAsciiDigit(char c) { return c >= '0' && c <= '9'; }
bool isNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80; }
bool isNameChar(char c) { return isNameStart(c) || isAsciiDigit(c); }

// Newlines become "\n" and one trailing newline goes, as jinja2 does before lexing.
std::string normalizeSource(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out.push_back('\n');
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out.push_back(source[i]);
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

// Length in bytes of the Python-whitespace code point at `i`, 0 if there is none.
std::size_t spaceAt(std::string_view s, std::size_t i) {
    if (i >= s.size()) return 0;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) return unicode::isSpace(c) ? 1 : 0;
    std::size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (i + n > s.size()) return 0;
    const std::u32string cp = unicode::decode(s.substr(i, n));
    return cp.size() == 1 && unicode::isSpace(cp[0]) ? n : 0;
}

std::size_t skipSpaces(std::string_view s, std::size_t i) {
    while (std::size_t n = spaceAt(s, i)) i += n;
    return i;
}

// Python's str.rstrip() with no arguments.
std::string_view rstripSpaces(std::string_view s) {
    const std::u32string cps = unicode::decode(s);
    std::size_t keep = cps.size();
    while (keep > 0 && unicode::isSpace(cps[keep - 1])) --keep;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < keep; ++i) {
        const char32_t c = cps[i];
        bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    return s.substr(0, bytes);
}

bool allSpaces(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const std::size_t n = spaceAt(s, i);
        if (!n) return false;
        i += n;
    }
    return true;
}

int hexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// jinja2 decodes string literals with value.encode("ascii", "backslashreplace").decode("unicode-escape"):
// non-ASCII characters are first written as escapes, then every Python escape sequence is decoded.
std::string decodeStringLiteral(std::string_view body, SourcePos pos) {
    std::string ascii;
    for (const char32_t c : unicode::decode(body)) {
        if (c < 0x80) {
            ascii.push_back(static_cast<char>(c));
            continue;
        }
        char buf[16];
        if (c <= 0xFF)
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
        else if (c <= 0xFFFF)
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        else
            std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
        ascii += buf;
    }
    std::string out;
    for (std::size_t i = 0; i < ascii.size(); ++i) {
        if (ascii[i] != '\\') {
            out.push_back(ascii[i]);
            continue;
        }
        if (++i >= ascii.size()) throw TemplateSyntaxError("\\ at end of string", pos);
        const char c = ascii[i];
        auto hexEscape = [&](int digits, const char* what) {
            char32_t cp = 0;
            for (int k = 1; k <= digits; ++k) {
                const int h = i + static_cast<std::size_t>(k) < ascii.size() ? hexValue(ascii[i + static_cast<std::size_t>(k)]) : -1;
                if (h < 0) throw TemplateSyntaxError(std::string("truncated ") + what + " escape", pos);
                cp = cp * 16 + static_cast<char32_t>(h);
            }
            if (cp > 0x10FFFF) throw TemplateSyntaxError("illegal Unicode character", pos);
            i += static_cast<std::size_t>(digits);
            unicode::append(out, cp);
        };
        switch (c) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x': hexEscape(2, "\\xXX"); break;
        case 'u': hexEscape(4, "\\uXXXX"); break;
        case 'U': hexEscape(8, "\\UXXXXXXXX"); break;
        case 'N': throw TemplateSyntaxError("\\N{...} escapes are not supported in chat templates", pos);
        default:
            if (c >= '0' && c <= '7') {
                char32_t cp = 0;
                int k = 0;
                while (k < 3 && i < ascii.size() && ascii[i] >= '0' && ascii[i] <= '7') {
                    cp = cp * 8 + static_cast<char32_t>(ascii[i] - '0');
                    ++i;
                    ++k;
                }
                --i;
                unicode::append(out, cp);
            } else {
                out.push_back('\\');  // unknown escapes stay as written
                out.push_back(c);
            }
        }
    }
    return out;
}

class Lexer {
public:
    explicit Lexer(std::string_view source) : src_(normalizeSource(source)) {
        lineStarts_.push_back(0);
        for (std::size_t i = 0; i < src_.size(); ++i)
            if (src_[i] == '\n') lineStarts_.push_back(i + 1);
    }

    std::vector<Token> run() {
        std::size_t pos = 0;
        bool lineStarting = true;  // the text before the next tag starts a line (lstrip_blocks)
        while (pos < src_.size()) {
            const std::size_t tag = findTagStart(pos);
            if (tag == std::string::npos) {
                emit(TokenType::Data, src_.substr(pos), pos);
                break;
            }
            const char kind = src_[tag + 1];
            std::size_t body = tag + 2;
            char sign = 0;
            if (body < src_.size() && (src_[body] == '-' || src_[body] == '+')) sign = src_[body++];
            std::size_t rawEnd = 0;
            const bool raw = kind == '%' && matchRawBegin(body, rawEnd);

            std::string_view text = std::string_view(src_).substr(pos, tag - pos);
            text = stripBeforeTag(text, sign, kind != '{', lineStarting);
            if (!text.empty()) emit(TokenType::Data, std::string(text), pos);

            if (raw) {
                pos = lexRaw(rawEnd, lineStarting);
            } else if (kind == '#') {
                pos = lexComment(tag, body, lineStarting);
            } else {
                pos = lexTag(kind == '{', tag, body, lineStarting);
            }
        }
        Token eof;
        eof.type = TokenType::Eof;
        eof.pos = position(src_.size());
        tokens_.push_back(eof);
        return std::move(tokens_);
    }

private:
    SourcePos position(std::size_t offset) const {
        const auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset) - 1;
        const std::size_t start = *it;
        return {static_cast<int>(it - lineStarts_.begin()) + 1,
                static_cast<int>(unicode::length(std::string_view(src_).substr(start, offset - start))) + 1};
    }

    void emit(TokenType type, std::string text, std::size_t offset) {
        Token t;
        t.type = type;
        t.text = std::move(text);
        t.pos = position(offset);
        tokens_.push_back(std::move(t));
    }

    [[noreturn]] void fail(const std::string& message, std::size_t offset) const {
        throw TemplateSyntaxError(message, position(offset));
    }

    std::size_t findTagStart(std::size_t from) const {
        for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
            if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        return std::string::npos;
    }

    // `{%[-+]?\s*raw\s*(-%}\s*|%})`; `end` receives the offset after it.
    bool matchRawBegin(std::size_t i, std::size_t& end) const {
        i = skipSpaces(src_, i);
        if (src_.compare(i, 3, "raw") != 0) return false;
        i = skipSpaces(src_, i + 3);
        if (src_.compare(i, 3, "-%}") == 0) {
            end = skipSpaces(src_, i + 3);
            return true;
        }
        if (src_.compare(i, 2, "%}") == 0) {
            end = i + 2;
            return true;
        }
        return false;
    }

    // Whitespace control for the text before a tag: `-` strips all trailing whitespace; otherwise
    // lstrip_blocks strips the spaces between the line start and a block or comment tag.
    static std::string_view stripBeforeTag(std::string_view text, char sign, bool blockOrComment, bool lineStarting) {
        if (sign == '-') return rstripSpaces(text);
        if (sign == '+' || !blockOrComment) return text;
        const std::size_t nl = text.rfind('\n');
        const std::size_t lineStart = nl == std::string_view::npos ? 0 : nl + 1;
        if ((lineStart > 0 || lineStarting) && lineStart < text.size() && allSpaces(text.substr(lineStart)))
            return text.substr(0, lineStart);
        return text;
    }

    std::size_t lexRaw(std::size_t from, bool& lineStarting) {
        lineStarting = from > 0 && src_[from - 1] == '\n';
        for (std::size_t i = src_.find("{%", from); i != std::string::npos; i = src_.find("{%", i + 1)) {
            std::size_t j = i + 2;
            char sign = 0;
            if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
            j = skipSpaces(src_, j);
            if (src_.compare(j, 6, "endraw") != 0) continue;
            j = skipSpaces(src_, j + 6);
            std::size_t end;
            if (src_.compare(j, 3, "+%}") == 0) {
                end = j + 3;
            } else if (src_.compare(j, 3, "-%}") == 0) {
                end = skipSpaces(src_, j + 3);
            } else if (src_.compare(j, 2, "%}") == 0) {
                end = j + 2;
                if (end < src_.size() && src_[end] == '\n') ++end;
            } else {
                continue;
            }
            const std::string_view text = stripBeforeTag(std::string_view(src_).substr(from, i - from), sign, true, lineStarting);
            if (!text.empty()) emit(TokenType::Data, std::string(text), from);
            lineStarting = src_[end - 1] == '\n';
            return end;
        }
        fail("Missing end of raw directive", from);
    }

    std::size_t lexComment(std::size_t tag, std::size_t from, bool& lineStarting) {
        for (std::size_t i = from; i < src_.size(); ++i) {
            std::size_t end = 0;
            if (src_.compare(i, 3, "+#}") == 0) {
                end = i + 3;
            } else if (src_.compare(i, 3, "-#}") == 0) {
                end = skipSpaces(src_, i + 3);
            } else if (src_.compare(i, 2, "#}") == 0) {
                end = i + 2;
                if (end < src_.size() && src_[end] == '\n') ++end;
            } else {
                continue;
            }
            lineStarting = src_[end - 1] == '\n';
            return end;
        }
        fail("Missing end of comment tag", tag);
    }

    std::size_t lexTag(bool variable, std::size_t tag, std::size_t i, bool& lineStarting) {
        emit(variable ? TokenType::VariableBegin : TokenType::BlockBegin, "", tag);
        std::vector<char> balance;
        while (true) {
            if (balance.empty()) {
                std::size_t end = 0;
                if (variable) {
                    if (src_.compare(i, 3, "-}}") == 0) end = skipSpaces(src_, i + 3);
                    else if (src_.compare(i, 2, "}}") == 0) end = i + 2;
                } else {
                    if (src_.compare(i, 3, "+%}") == 0) {
                        end = i + 3;
                    } else if (src_.compare(i, 3, "-%}") == 0) {
                        end = skipSpaces(src_, i + 3);
                    } else if (src_.compare(i, 2, "%}") == 0) {
                        end = i + 2;
                        if (end < src_.size() && src_[end] == '\n') ++end;
                    }
                }
                if (end) {
                    emit(variable ? TokenType::VariableEnd : TokenType::BlockEnd, "", i);
                    lineStarting = src_[end - 1] == '\n';
                    return end;
                }
            }
            if (i >= src_.size())
                fail(std::string("unexpected end of template, expected '") + (variable ? "}}" : "%}") + "'", tag);
            if (const std::size_t ws = skipSpaces(src_, i); ws != i) {
                i = ws;
                continue;
            }
            if (std::size_t n = matchFloat(i)) {
                Token t;
                t.type = TokenType::Float;
                std::string digits;
                for (std::size_t k = i; k < i + n; ++k)
                    if (src_[k] != '_') digits.push_back(src_[k]);
                t.number = py::parseFloat(digits).value_or(0.0);
                t.text = src_.substr(i, n);
                t.pos = position(i);
                tokens_.push_back(std::move(t));
                i += n;
                continue;
            }
            if (std::size_t n = matchInteger(i)) {
                Token t;
                t.type = TokenType::Integer;
                t.text = src_.substr(i, n);
                t.integer = parseInteger(t.text, i);
                t.pos = position(i);
                tokens_.push_back(std::move(t));
                i += n;
                continue;
            }
            if (isNameStart(src_[i])) {
                std::size_t j = i;
                while (j < src_.size() && isNameChar(src_[j])) ++j;
                emit(TokenType::Name, src_.substr(i, j - i), i);
                i = j;
                continue;
            }
            if (src_[i] == '\'' || src_[i] == '"') {
                const char quote = src_[i];
                std::size_t j = i + 1;
                while (j < src_.size() && src_[j] != quote) j += src_[j] == '\\' ? 2 : 1;
                if (j < src_.size()) {
                    Token t;
                    t.type = TokenType::String;
                    t.pos = position(i);
                    t.text = decodeStringLiteral(std::string_view(src_).substr(i + 1, j - i - 1), t.pos);
                    tokens_.push_back(std::move(t));
                    i = j + 1;
                    continue;
                }
            }
            i = lexOperator(i, balance);
        }
    }

    std::size_t lexOperator(std::size_t i, std::vector<char>& balance) {
        static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
        static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
        std::string op;
        for (const auto two : kTwo)
            if (src_.compare(i, 2, two) == 0) op = two;
        if (op.empty() && kOne.find(src_[i]) != std::string_view::npos) op = src_.substr(i, 1);
        if (op.empty()) {
            std::string ch;
            unicode::append(ch, unicode::decode(std::string_view(src_).substr(i, 4)).at(0));
            fail("unexpected char " + std::string(ch == "'" ? "\"'\"" : "'" + ch + "'"), i);
        }
        if (op == "{") balance.push_back('}');
        else if (op == "(") balance.push_back(')');
        else if (op == "[") balance.push_back(']');
        else if (op == "}" || op == ")" || op == "]") {
            if (balance.empty()) fail("unexpected '" + op + "'", i);
            const char expected = balance.back();
            balance.pop_back();
            if (expected != op[0]) fail("unexpected '" + op + "', expected '" + std::string(1, expected) + "'", i);
        }
        emit(TokenType::Operator, op, i);
        return i + op.size();
    }

    // Digits with single underscores between them: (\d+_)*\d+
    std::size_t matchDigits(std::size_t i) const {
        std::size_t j = i;
        if (j >= src_.size() || !isAsciiDigit(src_[j])) return 0;
        while (j < src_.size()) {
            if (isAsciiDigit(src_[j])) {
                ++j;
            } else if (src_[j] == '_' && j + 1 < src_.size() && isAsciiDigit(src_[j + 1])) {
                j += 2;
            } else {
                break;
            }
        }
        return j - i;
    }

    // jinja2's float_re: digits, then a fraction and/or an exponent; never right after a '.'.
    std::size_t matchFloat(std::size_t i) const {
        if (i > 0 && src_[i - 1] == '.') return 0;
        std::size_t j = i + matchDigits(i);
        if (j == i) return 0;
        bool fraction = false;
        if (j < src_.size() && src_[j] == '.') {
            if (const std::size_t n = matchDigits(j + 1)) {
                j += 1 + n;
                fraction = true;
            }
        }
        if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
            std::size_t k = j + 1;
            if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
            if (const std::size_t n = matchDigits(k)) return k + n - i;
        }
        return fraction ? j - i : 0;
    }

    std::size_t matchInteger(std::size_t i) const {
        if (i >= src_.size() || !isAsciiDigit(src_[i])) return 0;
        if (src_[i] == '0' && i + 1 < src_.size()) {
            const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[i + 1])));
            auto radixDigit = [p](char c) {
                if (p == 'b') return c == '0' || c == '1';
                if (p == 'o') return c >= '0' && c <= '7';
                return hexValue(c) >= 0;
            };
            if (p == 'b' || p == 'o' || p == 'x') {
                std::size_t j = i + 2;
                while (j < src_.size() && (radixDigit(src_[j]) || (src_[j] == '_' && j + 1 < src_.size() && radixDigit(src_[j + 1])))) ++j;
                if (j > i + 2) return j - i;
            }
        }
        if (src_[i] == '0') {  // 0(_?0)*
            std::size_t j = i + 1;
            while (j < src_.size() && (src_[j] == '0' || (src_[j] == '_' && j + 1 < src_.size() && src_[j + 1] == '0'))) ++j;
            return j - i;
        }
        return matchDigits(i);
    }

    std::int64_t parseInteger(const std::string& text, std::size_t offset) const {
        std::string digits;
        for (const char c : text)
            if (c != '_') digits.push_back(c);
        int base = 10;
        std::size_t skip = 0;
        if (digits.size() > 2 && digits[0] == '0') {
            const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(digits[1])));
            base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
            if (base != 10) skip = 2;
        }
        errno = 0;
        const long long v = std::strtoll(digits.c_str() + skip, nullptr, base);
        if (errno == ERANGE) fail("integer literal " + text + " does not fit in 64 bits", offset);
        return v;
    }

    std::string src_;
    std::vector<std::size_t> lineStarts_;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

std::string describe(const Token& token) {
    switch (token.type) {
    case TokenType::Data: return "template data";
    case TokenType::VariableBegin: return "begin of print statement";
    case TokenType::VariableEnd: return "end of print statement";
    case TokenType::BlockBegin: return "begin of statement block";
    case TokenType::BlockEnd: return "end of statement block";
    case TokenType::Name:
    case TokenType::Operator:
    case TokenType::Integer:
    case TokenType::Float: return token.text;
    case TokenType::String: return "string";
    case TokenType::Eof: return "end of template";
    }
    return "token";
}

}  // namespace tandem::text::jinja
