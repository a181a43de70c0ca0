// Python's str methods, counted in code points and with Python's Unicode whitespace.
#include <algorithm>

#include "text/jinja/attributes.h"
#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/objects.h"
#include "text/jinja/python_format.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/string_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja {
namespace {

using std::u32string;

std::string requireString(const Value& v, const std::string& what) {
    v.defined();
    if (!v.isString()) throw TemplateError(what + " must be str, not " + py::typeName(v));
    return v.str();
}

std::optional<std::string> optionalString(const Value& v, const std::string& what) {
    if (v.isNone()) return std::nullopt;
    return requireString(v, what);
}

// Python's slice-style start/end arguments of find(), count(), startswith(), ...
std::pair<std::size_t, std::size_t> range(const Value& start, const Value& end, std::size_t n) {
    auto clamp = [n](const Value& v, std::int64_t fallback) -> std::size_t {
        if (!v.isNone() && !v.defined().isIntegral())
            throw TemplateError("slice indices must be integers or None, not " + py::typeName(v));
        std::int64_t i = v.isNone() ? fallback : v.defined().asInt();
        const auto size = static_cast<std::int64_t>(n);
        if (i < 0) i = std::max<std::int64_t>(0, i + size);
        return static_cast<std::size_t>(std::min(i, size));
    };
    return {clamp(start, 0), clamp(end, static_cast<std::int64_t>(n))};
}

bool matchesAffix(const u32string& text, const Arguments& a, bool suffix, const char* method) {
    const auto args = bindArguments(a, std::string("str.") + method, {{"prefix", std::nullopt}, {"start", Value::none()}, {"end", Value::none()}});
    const auto [lo, hi] = range(args[1], args[2], text.size());
    auto test = [&, lo = lo, hi = hi](const Value& v) {
        const u32string s = unicode::decode(v.str());
        if (hi < lo || s.size() > hi - lo) return false;
        return suffix ? text.compare(hi - s.size(), s.size(), s) == 0 : text.compare(lo, s.size(), s) == 0;
    };
    const Value& p = args[0];
    if (p.isString()) return test(p);
    if (p.isSequence(SequenceKind::Tuple)) {
        for (const Value& item : p.seq().items) {
            if (!item.isString())
                throw TemplateError(std::string("tuple for ") + method + " must only contain str, not " + py::typeName(item));
            if (test(item)) return true;
        }
        return false;
    }
    throw TemplateError(std::string(method) + " first arg must be str or a tuple of str, not " + py::typeName(p));
}

Value findMethod(const u32string& text, const Arguments& a, bool reverse, bool raise, const char* method) {
    const auto args = bindArguments(a, std::string("str.") + method, {{"sub", std::nullopt}, {"start", Value::none()}, {"end", Value::none()}});
    const u32string sub = unicode::decode(requireString(args[0], std::string(method) + "() argument 1"));
    const auto [lo, hi] = range(args[1], args[2], text.size());
    std::int64_t found = -1;
    if (hi >= lo && sub.size() <= hi - lo) {
        const u32string window = text.substr(lo, hi - lo);
        const std::size_t p = reverse ? window.rfind(sub) : window.find(sub);
        if (p != u32string::npos) found = static_cast<std::int64_t>(lo + p);
    }
    if (found < 0 && raise) throw TemplateError("substring not found");
    return Value::integer(found);
}

Value pad(const u32string& text, const Arguments& a, const char* method, char align) {
    const auto args = bindArguments(a, std::string("str.") + method, {{"width", std::nullopt}, {"fillchar", Value::string(" ")}});
    const std::int64_t width = args[0].defined().asInt();
    const u32string fill = unicode::decode(requireString(args[1], std::string(method) + "() argument 2"));
    if (fill.size() != 1) throw TemplateError("The fill character must be exactly one character long");
    if (width <= static_cast<std::int64_t>(text.size())) return Value::string(unicode::encode(text));
    budget::checkString(static_cast<std::size_t>(width));
    const std::size_t total = static_cast<std::size_t>(width) - text.size();
    std::size_t left = 0;
    if (align == '>') left = total;
    if (align == '^') left = total / 2 + (total & static_cast<std::size_t>(width) & 1);  // CPython's centring
    return Value::string(unicode::encode(u32string(left, fill[0]) + text + u32string(total - left, fill[0])));
}

Value splitMethod(const std::string& self, const Arguments& a, bool fromRight) {
    const auto args = bindArguments(a, fromRight ? "str.rsplit" : "str.split", {{"sep", Value::none()}, {"maxsplit", Value::integer(-1)}});
    const std::optional<std::string> sep = optionalString(args[0], "sep");
    const std::int64_t maxsplit = args[1].defined().asInt();
    std::vector<std::string> parts = fromRight ? strings::rsplit(self, sep, maxsplit) : strings::split(self, sep, maxsplit);
    std::vector<Value> out;
    for (auto& p : parts) out.push_back(Value::string(std::move(p)));
    return Value::list(std::move(out));
}

Value stripMethod(const std::string& self, const Arguments& a, bool left, bool right, const char* method) {
    const auto args = bindArguments(a, std::string("str.") + method, {{"chars", Value::none()}});
    return Value::string(strings::strip(self, optionalString(args[0], std::string(method) + " arg"), left, right));
}

Value predicate(const std::string& self, bool (*test)(char32_t), bool emptyResult = false) {
    const u32string text = unicode::decode(self);
    if (text.empty()) return Value::boolean(emptyResult);
    return Value::boolean(std::all_of(text.begin(), text.end(), test));
}

Value casedPredicate(const std::string& self, bool wantUpper) {
    bool anyCased = false;
    for (const char32_t c : unicode::decode(self)) {
        if (unicode::isUpper(c)) {
            if (!wantUpper) return Value::boolean(false);
            anyCased = true;
        } else if (unicode::isLower(c)) {
            if (wantUpper) return Value::boolean(false);
            anyCased = true;
        }
    }
    return Value::boolean(anyCased);
}

Value noArgs(const Arguments& a, const char* method, Value result) {
    bindArguments(a, std::string("str.") + method, {});
    return result;
}

}  // namespace

std::optional<Value> stringAttribute(const Value& self, std::string_view name) {
    const std::string s = self.str();
    const std::string n(name);
    auto method = [&](auto body) { return makeMethod(self, n, body); };

    if (name == "upper") return method([s](const Arguments& a) { return noArgs(a, "upper", Value::string(unicode::upper(s))); });
    if (name == "lower" || name == "casefold")
        return method([s, n](const Arguments& a) { return noArgs(a, n.c_str(), Value::string(unicode::lower(s))); });
    if (name == "title") return method([s](const Arguments& a) { return noArgs(a, "title", Value::string(strings::title(s))); });
    if (name == "capitalize")
        return method([s](const Arguments& a) { return noArgs(a, "capitalize", Value::string(strings::capitalize(s))); });
    if (name == "swapcase")
        return method([s](const Arguments& a) {
            std::string out;
            for (const char32_t c : unicode::decode(s))
                unicode::append(out, unicode::isUpper(c) ? unicode::toLower(c) : unicode::isLower(c) ? unicode::toUpper(c) : c);
            return noArgs(a, "swapcase", Value::string(out));
        });
    if (name == "strip") return method([s](const Arguments& a) { return stripMethod(s, a, true, true, "strip"); });
    if (name == "lstrip") return method([s](const Arguments& a) { return stripMethod(s, a, true, false, "lstrip"); });
    if (name == "rstrip") return method([s](const Arguments& a) { return stripMethod(s, a, false, true, "rstrip"); });
    if (name == "split") return method([s](const Arguments& a) { return splitMethod(s, a, false); });
    if (name == "rsplit") return method([s](const Arguments& a) { return splitMethod(s, a, true); });
    if (name == "splitlines")
        return method([s](const Arguments& a) {
            const auto args = bindArguments(a, "str.splitlines", {{"keepends", Value::boolean(false)}});
            std::vector<Value> out;
            for (auto& line : strings::splitlines(s, py::truthy(args[0]))) out.push_back(Value::string(std::move(line)));
            return Value::list(std::move(out));
        });
    if (name == "startswith")
        return method([s](const Arguments& a) { return Value::boolean(matchesAffix(unicode::decode(s), a, false, "startswith")); });
    if (name == "endswith")
        return method([s](const Arguments& a) { return Value::boolean(matchesAffix(unicode::decode(s), a, true, "endswith")); });
    if (name == "find") return method([s](const Arguments& a) { return findMethod(unicode::decode(s), a, false, false, "find"); });
    if (name == "rfind") return method([s](const Arguments& a) { return findMethod(unicode::decode(s), a, true, false, "rfind"); });
    if (name == "index") return method([s](const Arguments& a) { return findMethod(unicode::decode(s), a, false, true, "index"); });
    if (name == "rindex") return method([s](const Arguments& a) { return findMethod(unicode::decode(s), a, true, true, "rindex"); });
    if (name == "count")
        return method([s](const Arguments& a) {
            const auto args = bindArguments(a, "str.count", {{"sub", std::nullopt}, {"start", Value::none()}, {"end", Value::none()}});
            const u32string text = unicode::decode(s);
            const u32string sub = unicode::decode(requireString(args[0], "count() argument 1"));
            const auto [lo, hi] = range(args[1], args[2], text.size());
            if (hi < lo) return Value::integer(0);
            if (sub.empty()) return Value::integer(static_cast<std::int64_t>(hi - lo + 1));
            std::int64_t count = 0;
            for (std::size_t p = text.find(sub, lo); p != u32string::npos && p + sub.size() <= hi; p = text.find(sub, p + sub.size())) ++count;
            return Value::integer(count);
        });
    if (name == "replace")
        return method([s](const Arguments& a) {
            const auto args = bindArguments(a, "str.replace", {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::integer(-1)}});
            return Value::string(strings::replace(s, requireString(args[0], "replace() argument 1"),
                                                  requireString(args[1], "replace() argument 2"), args[2].defined().asInt()));
        });
    if (name == "join")
        return method([s](const Arguments& a) {
            const auto args = bindArguments(a, "str.join", {{"iterable", std::nullopt}});
            std::string out;
            std::size_t i = 0;
            for (const Value& item : py::iterate(args[0].defined())) {
                if (!item.isString())
                    throw TemplateError("sequence item " + std::to_string(i) + ": expected str instance, " + py::typeName(item) + " found");
                if (i++) out += s;
                out += item.str();
                budget::checkString(out.size());
            }
            return Value::string(std::move(out));
        });
    if (name == "center") return method([s](const Arguments& a) { return pad(unicode::decode(s), a, "center", '^'); });
    if (name == "ljust") return method([s](const Arguments& a) { return pad(unicode::decode(s), a, "ljust", '<'); });
    if (name == "rjust") return method([s](const Arguments& a) { return pad(unicode::decode(s), a, "rjust", '>'); });
    if (name == "zfill")
        return method([s](const Arguments& a) {
            const auto args = bindArguments(a, "str.zfill", {{"width", std::nullopt}});
            u32string text = unicode::decode(s);
            const std::int64_t width = args[0].defined().asInt();
            if (width <= static_cast<std::int64_t>(text.size())) return Value::string(s);
            budget::checkString(static_cast<std::size_t>(width));
            const std::size_t fill = static_cast<std::size_t>(width) - text.size();
            const std::size_t at = !text.empty() && (text[0] == U'+' || text[0] == U'-') ? 1 : 0;
            text.insert(at, fill, U'0');
            return Value::string(unicode::encode(text));
        });
    if (name == "partition" || name == "rpartition")
        return method([s, n](const Arguments& a) {
            const auto args = bindArguments(a, "str." + n, {{"sep", std::nullopt}});
            const std::string sep = requireString(args[0], n + "() argument");
            if (sep.empty()) throw TemplateError("empty separator");
            const std::size_t p = n == "partition" ? s.find(sep) : s.rfind(sep);
            if (p == std::string::npos)
                return n == "partition" ? Value::tuple({Value::string(s), Value::string(""), Value::string("")})
                                        : Value::tuple({Value::string(""), Value::string(""), Value::string(s)});
            return Value::tuple({Value::string(s.substr(0, p)), Value::string(sep), Value::string(s.substr(p + sep.size()))});
        });
    if (name == "removeprefix" || name == "removesuffix")
        return method([s, n](const Arguments& a) {
            const auto args = bindArguments(a, "str." + n, {{"affix", std::nullopt}});
            const std::string affix = requireString(args[0], n + "() argument");
            if (n == "removeprefix") return Value::string(s.compare(0, affix.size(), affix) == 0 ? s.substr(affix.size()) : s);
            const bool ends = s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
            return Value::string(ends ? s.substr(0, s.size() - affix.size()) : s);
        });
    if (name == "format") return method([s](const Arguments& a) { return Value::string(py::braceFormat(s, a)); });
    if (name == "isalpha") return method([s](const Arguments& a) { return noArgs(a, "isalpha", predicate(s, unicode::isAlpha)); });
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric")
        return method([s, n](const Arguments& a) { return noArgs(a, n.c_str(), predicate(s, unicode::isDigit)); });
    if (name == "isalnum")
        return method([s](const Arguments& a) {
            return noArgs(a, "isalnum", predicate(s, [](char32_t c) { return unicode::isAlpha(c) || unicode::isDigit(c); }));
        });
    if (name == "isspace") return method([s](const Arguments& a) { return noArgs(a, "isspace", predicate(s, unicode::isSpace)); });
    if (name == "isascii")
        return method([s](const Arguments& a) { return noArgs(a, "isascii", predicate(s, [](char32_t c) { return c < 0x80; }, true)); });
    if (name == "isupper") return method([s](const Arguments& a) { return noArgs(a, "isupper", casedPredicate(s, true)); });
    if (name == "islower") return method([s](const Arguments& a) { return noArgs(a, "islower", casedPredicate(s, false)); });
    for (const char* unsupported : {"encode", "expandtabs", "format_map", "isidentifier", "isprintable", "istitle", "maketrans", "translate"})
        if (name == unsupported)
            return method([n](const Arguments&) -> Value { throw TemplateError("str." + n + "() is not supported in chat templates"); });
    return std::nullopt;
}

}  // namespace tandem::text::jinja
