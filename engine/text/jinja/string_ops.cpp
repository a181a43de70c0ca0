#include "text/jinja/string_ops.h"

#include <algorithm>

#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja::strings {
namespace {

using std::u32string;

bool isCased(char32_t c) { return unicode::isUpper(c) || unicode::isLower(c); }

}  // namespace

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
    std::vector<std::string> out;
    if (sep) {
        if (sep->empty()) throw TemplateError("empty separator");
        budget::chargeText(s.size());
        std::size_t pos = 0;
        for (std::int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
            const std::size_t p = s.find(*sep, pos);
            if (p == std::string_view::npos) break;
            budget::checkList(out.size() + 1);
            out.emplace_back(s.substr(pos, p - pos));
            pos = p + sep->size();
        }
        out.emplace_back(s.substr(pos));
        return out;
    }
    const u32string text = unicode::decode(s);
    std::size_t i = 0;
    for (std::int64_t n = 0;; ++n) {
        while (i < text.size() && unicode::isSpace(text[i])) ++i;
        if (i >= text.size()) break;
        if (maxsplit >= 0 && n == maxsplit) {
            out.push_back(unicode::encode(text.substr(i)));
            break;
        }
        std::size_t j = i;
        while (j < text.size() && !unicode::isSpace(text[j])) ++j;
        budget::checkList(out.size() + 1);
        out.push_back(unicode::encode(text.substr(i, j - i)));
        i = j;
    }
    return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
    std::vector<std::string> out;
    if (sep) {
        if (sep->empty()) throw TemplateError("empty separator");
        budget::chargeText(s.size());
        std::size_t end = s.size();
        for (std::int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
            if (end < sep->size()) break;
            const std::size_t p = s.rfind(*sep, end - sep->size());
            if (p == std::string_view::npos) break;
            budget::checkList(out.size() + 1);
            out.emplace_back(s.substr(p + sep->size(), end - p - sep->size()));
            end = p;
        }
        out.emplace_back(s.substr(0, end));
        std::reverse(out.begin(), out.end());
        return out;
    }
    const u32string text = unicode::decode(s);
    std::size_t i = text.size();
    for (std::int64_t n = 0;; ++n) {
        while (i > 0 && unicode::isSpace(text[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && n == maxsplit) {
            out.push_back(unicode::encode(text.substr(0, i)));
            break;
        }
        std::size_t j = i;
        while (j > 0 && !unicode::isSpace(text[j - 1])) --j;
        budget::checkList(out.size() + 1);
        out.push_back(unicode::encode(text.substr(j, i - j)));
        i = j;
    }
    std::reverse(out.begin(), out.end());
    return out;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
    const u32string text = unicode::decode(s);
    const u32string set = chars ? unicode::decode(*chars) : u32string();
    auto strippable = [&](char32_t c) { return chars ? set.find(c) != u32string::npos : unicode::isSpace(c); };
    std::size_t b = 0, e = text.size();
    if (left)
        while (b < e && strippable(text[b])) ++b;
    if (right)
        while (e > b && strippable(text[e - 1])) --e;
    return unicode::encode(text.substr(b, e - b));
}

std::string replace(std::string_view s, std::string_view old, std::string_view replacement, std::int64_t count) {
    std::string out;
    if (old.empty()) {
        // Python inserts the replacement before every character and at the end.
        const u32string text = unicode::decode(s);
        std::int64_t n = 0;
        for (std::size_t i = 0; i <= text.size(); ++i) {
            if (count < 0 || n < count) {
                out += replacement;
                ++n;
                budget::checkString(out.size());
            }
            if (i < text.size()) unicode::append(out, text[i]);
        }
        return out;
    }
    budget::chargeText(s.size());
    std::size_t pos = 0;
    for (std::int64_t n = 0; count < 0 || n < count; ++n) {
        const std::size_t p = s.find(old, pos);
        if (p == std::string_view::npos) break;
        out += s.substr(pos, p - pos);
        out += replacement;
        budget::checkString(out.size());
        pos = p + old.size();
    }
    out += s.substr(pos);
    return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
    const u32string text = unicode::decode(s);
    std::vector<std::string> out;
    std::size_t start = 0, i = 0;
    while (i < text.size()) {
        if (!unicode::isLineBreak(text[i])) {
            ++i;
            continue;
        }
        std::size_t eol = i + 1;
        if (text[i] == U'\r' && eol < text.size() && text[eol] == U'\n') ++eol;
        budget::checkList(out.size() + 1);
        out.push_back(unicode::encode(text.substr(start, (keepends ? eol : i) - start)));
        start = i = eol;
    }
    if (start < text.size()) out.push_back(unicode::encode(text.substr(start)));
    return out;
}

std::string title(std::string_view s) {
    std::string out;
    bool previousCased = false;
    for (const char32_t c : unicode::decode(s)) {
        unicode::append(out, previousCased ? unicode::toLower(c) : unicode::toTitle(c));
        previousCased = isCased(c);
    }
    return out;
}

std::string capitalize(std::string_view s) {
    std::string out;
    bool first = true;
    for (const char32_t c : unicode::decode(s)) {
        unicode::append(out, first ? unicode::toTitle(c) : unicode::toLower(c));
        first = false;
    }
    return out;
}

std::string titleFilter(std::string_view s) {
    auto isBoundary = [](char32_t c) { return c == U'-' || c == U'(' || c == U'{' || c == U'[' || c == U'<' || unicode::isSpace(c); };
    std::string out;
    bool runStart = true;
    bool inBoundary = false;
    for (const char32_t c : unicode::decode(s)) {
        const bool boundary = isBoundary(c);
        if (boundary != inBoundary) runStart = true;
        inBoundary = boundary;
        unicode::append(out, runStart ? unicode::toUpper(c) : unicode::toLower(c));
        runStart = false;
    }
    return out;
}

std::size_t wordCount(std::string_view s) {
    std::size_t n = 0;
    bool inWord = false;
    for (const char32_t c : unicode::decode(s)) {
        const bool w = unicode::isWordChar(c);
        if (w && !inWord) ++n;
        inWord = w;
    }
    return n;
}

}  // namespace tandem::text::jinja::strings
