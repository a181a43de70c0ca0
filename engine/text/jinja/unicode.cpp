#include "text/jinja/unicode.h"

#include <clocale>
#include <cwctype>
#include <locale.h>

#include "text/jinja/budget.h"

namespace tandem::text::jinja::unicode {
namespace {

// The C library's case tables for a UTF-8 locale; null when the system has none.
locale_t utf8Locale() {
    static const locale_t locale = [] {
        for (const char* name : {"C.UTF-8", "C.utf8", "en_US.UTF-8"})
            if (locale_t l = newlocale(LC_CTYPE_MASK, name, static_cast<locale_t>(nullptr))) return l;
        return static_cast<locale_t>(nullptr);
    }();
    return locale;
}

}  // namespace

std::u32string decode(std::string_view s) {
    budget::chargeText(s.size());
    std::u32string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        int extra = 0;
        char32_t cp = 0;
        if (b < 0x80) {
            out.push_back(b);
            ++i;
            continue;
        } else if ((b & 0xE0) == 0xC0) {
            extra = 1;
            cp = b & 0x1F;
        } else if ((b & 0xF0) == 0xE0) {
            extra = 2;
            cp = b & 0x0F;
        } else if ((b & 0xF8) == 0xF0) {
            extra = 3;
            cp = b & 0x07;
        } else {
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        if (i + static_cast<std::size_t>(extra) >= s.size()) {  // truncated sequence
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        bool ok = true;
        for (int k = 1; k <= extra; ++k) {
            const auto c = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
            if ((c & 0xC0) != 0x80) {
                ok = false;
                break;
            }
            cp = (cp << 6) | (c & 0x3F);
        }
        if (!ok) {
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        out.push_back(cp);
        i += static_cast<std::size_t>(extra) + 1;
    }
    return out;
}

void append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string encode(std::u32string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char32_t cp : text) append(out, cp);
    return out;
}

std::size_t length(std::string_view s) {
    budget::chargeText(s.size());
    std::size_t n = 0;
    for (const char c : s)
        if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
    return n;
}

bool isSpace(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool isLineBreak(char32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 ||
           cp == 0x2029;
}

bool isPrintable(char32_t cp) {
    if (cp < 0x20 || cp == 0x7F) return false;
    if (cp < 0x7F) return true;
    if (cp <= 0xA0 || cp == 0xAD) return false;  // C1 controls, no-break space, soft hyphen
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) ||
        (cp >= 0x2066 && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE ||
        cp == 0xFFFF)
        return false;
    if ((cp >= 0x0600 && cp <= 0x0605) || cp == 0x061C || cp == 0x06DD || cp == 0x070F || cp == 0x180E) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;                                        // surrogates
    if ((cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000) return false;                     // private use
    if (cp == 0xE0001 || (cp >= 0xE0020 && cp <= 0xE007F)) return false;                   // tags
    return true;
}

char32_t toUpper(char32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    const locale_t l = utf8Locale();
    return l ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(cp), l)) : cp;
}

char32_t toLower(char32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    const locale_t l = utf8Locale();
    return l ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(cp), l)) : cp;
}

char32_t toTitle(char32_t cp) {
    if (cp < 0x80) return toUpper(cp);
    const locale_t l = utf8Locale();
    if (!l) return cp;
    static const wctrans_t title = wctrans_l("totitle", l);
    return title ? static_cast<char32_t>(towctrans_l(static_cast<wint_t>(cp), title, l)) : toUpper(cp);
}

bool isAlpha(char32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    const locale_t l = utf8Locale();
    return l && iswalpha_l(static_cast<wint_t>(cp), l);
}

bool isDigit(char32_t cp) { return cp >= '0' && cp <= '9'; }

bool isUpper(char32_t cp) { return toLower(cp) != cp; }
bool isLower(char32_t cp) { return toUpper(cp) != cp; }

bool isWordChar(char32_t cp) { return cp == '_' || isDigit(cp) || isAlpha(cp); }

std::string upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char32_t cp : decode(s)) {
        if (cp == 0xDF) {
            out += "SS";
        } else {
            append(out, toUpper(cp));
        }
    }
    return out;
}

std::string lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char32_t cp : decode(s)) append(out, toLower(cp));
    return out;
}

}  // namespace tandem::text::jinja::unicode
