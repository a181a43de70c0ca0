// The string and number filters, and the table of all filters.
#include "text/jinja/filters.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "text/jinja/attributes.h"
#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/json.h"
#include "text/jinja/python_format.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/string_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja {
namespace {

const Value kNone = Value::none();

std::string trimmed(std::string_view s) { return strings::strip(s, std::nullopt, true, true); }

// Python's int(text, base): whitespace around, a sign, a radix prefix matching the base, underscores
// between digits. nullopt where Python raises ValueError (and where the number needs more than 64 bits).
std::optional<std::int64_t> parsePythonInt(const std::string& text, std::int64_t base) {
    if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
    std::string s = trimmed(text);
    bool negative = false;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
        negative = s[0] == '-';
        s.erase(0, 1);
    }
    if (s.size() > 1 && s[0] == '0') {
        const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
        const int prefixBase = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
        if (prefixBase && (base == prefixBase || base == 0)) {
            base = prefixBase;
            s.erase(0, 2);
            if (!s.empty() && s[0] == '_') s.erase(0, 1);
        }
    }
    if (base == 0) base = 10;
    if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
    std::string digits;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '_') {
            if (s[i - 1] == '_') return std::nullopt;
            continue;
        }
        const int d = std::isdigit(static_cast<unsigned char>(s[i])) ? s[i] - '0'
                      : std::isalpha(static_cast<unsigned char>(s[i])) ? std::tolower(static_cast<unsigned char>(s[i])) - 'a' + 10 : 99;
        if (d >= base) return std::nullopt;
        digits.push_back(s[i]);
    }
    errno = 0;
    const unsigned long long magnitude = std::strtoull(digits.c_str(), nullptr, static_cast<int>(base));
    if (errno == ERANGE || magnitude > (negative ? 9223372036854775808ULL : 9223372036854775807ULL)) return std::nullopt;
    return negative ? static_cast<std::int64_t>(0ULL - magnitude) : static_cast<std::int64_t>(magnitude);
}

// A count or width argument that fits the string limit, else an error (Python would try, and fail for
// lack of memory).
std::size_t widthArgument(const Value& v) {
    const std::int64_t width = v.defined().asInt();
    if (width <= 0) return 0;
    budget::checkString(static_cast<std::size_t>(width));
    return static_cast<std::size_t>(width);
}

// Python's float(text).
std::optional<double> parsePythonFloat(const std::string& text) {
    std::string s = trimmed(text);
    std::string lower = unicode::lower(s);
    std::string body = lower;
    double sign = 1;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
        sign = body[0] == '-' ? -1 : 1;
        body.erase(0, 1);
    }
    if (body == "inf" || body == "infinity") return sign * INFINITY;
    if (body == "nan") return NAN;
    std::string digits;
    bool sawDigit = false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '_') {
            const bool between = i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                                 std::isdigit(static_cast<unsigned char>(s[i + 1]));
            if (!between) return std::nullopt;
            continue;
        }
        if (std::isdigit(static_cast<unsigned char>(c))) sawDigit = true;
        else if (!(c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) return std::nullopt;
        digits.push_back(c);
    }
    if (!sawDigit) return std::nullopt;
    return py::parseFloat(std::string_view(digits).substr(!digits.empty() && digits[0] == '+' ? 1 : 0));
}

// Python's round(x, ndigits) for floats: correctly rounded through the decimal representation.
double roundHalfEven(double x, std::int64_t ndigits) {
    if (!std::isfinite(x)) return x;
    if (ndigits >= 0) {
        char buf[1024];
        const auto printed = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed, static_cast<int>(std::min<std::int64_t>(ndigits, 300)));
        double rounded = x;
        std::from_chars(buf, printed.ptr, rounded);
        return rounded;
    }
    const double scale = std::pow(10.0, -static_cast<double>(ndigits));
    return std::nearbyint(x / scale) * scale;
}

Value fAbs(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "abs", {});
    v.defined();
    if (v.isIntegral()) return v.asInt() < 0 ? py::neg(v) : Value::integer(v.asInt());
    if (v.isFloat()) return Value::number(std::fabs(v.asDouble()));
    throw TemplateError("bad operand type for abs(): '" + py::typeName(v) + "'");
}

Value fAttr(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "attr", {{"name", std::nullopt}});
    const std::string name = py::str(args[0]);
    if (std::optional<Value> attr = pythonAttribute(v.defined(), name)) {
        if (!name.empty() && name[0] == '_') return Value::undefined("access to attribute " + py::stringRepr(name) + " is unsafe.");
        return *attr;
    }
    return Value::undefined(py::stringRepr(py::typeRepr(v)) + " has no attribute " + py::stringRepr(name));
}

Value fCapitalize(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "capitalize", {});
    return Value::string(strings::capitalize(py::str(v)));
}

Value fCenter(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "center", {{"width", Value::integer(80)}});
    const std::u32string text = unicode::decode(py::str(v));
    const std::size_t width = widthArgument(args[0]);
    if (width <= text.size()) return Value::string(unicode::encode(text));
    const std::size_t total = width - text.size();
    const std::size_t left = total / 2 + (total & static_cast<std::size_t>(width) & 1);
    return Value::string(std::string(left, ' ') + unicode::encode(text) + std::string(total - left, ' '));
}

Value fDefault(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "default", {{"default_value", Value::string("")}, {"boolean", Value::boolean(false)}});
    if (v.isUndefined() || (py::truthy(args[1]) && !py::truthy(v))) return args[0];
    return v;
}

Value fEscape(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "escape", {});
    std::string out;
    for (const char c : py::str(v)) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out.push_back(c);
        }
    }
    return Value::string(std::move(out));
}

Value fFloat(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "float", {{"default", Value::number(0.0)}});
    v.defined();
    if (v.isNumber()) return Value::number(v.asDouble());
    if (v.isString())
        if (const auto d = parsePythonFloat(v.str())) return Value::number(*d);
    return args[0];
}

Value fFormat(Interpreter&, const Value& v, const Arguments& a) {
    if (!a.positional.empty() && !a.keyword.empty())
        throw TemplateError("can't handle positional and keyword arguments at the same time");
    if (!a.keyword.empty()) {
        Dict d;
        for (const auto& [k, val] : a.keyword) d.set(Value::string(k), val);
        return Value::string(py::percentFormat(py::str(v), Value::dict(std::move(d))));
    }
    return Value::string(py::percentFormat(py::str(v), Value::tuple(a.positional)));
}

Value fIndent(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "indent", {{"width", Value::integer(4)}, {"first", Value::boolean(false)}, {"blank", Value::boolean(false)}});
    // jinja2 appends "\n" to the value itself, so anything but a string fails.
    v.defined();
    if (!v.isString()) throw TemplateError("unsupported operand type(s) for +=: '" + py::typeName(v) + "' and 'str'");
    const std::string indention = args[0].isString() ? args[0].str() : std::string(widthArgument(args[0]), ' ');
    const std::vector<std::string> lines = strings::splitlines(v.str() + "\n", false);
    std::string out;
    if (py::truthy(args[2])) {
        for (std::size_t i = 0; i < lines.size(); ++i) {
            out += (i ? "\n" + indention : "") + lines[i];
            budget::checkString(out.size());
        }
    } else {
        out = lines.empty() ? "" : lines[0];
        for (std::size_t i = 1; i < lines.size(); ++i) {
            out += "\n" + (lines[i].empty() ? "" : indention) + lines[i];
            budget::checkString(out.size());
        }
    }
    if (py::truthy(args[1])) out = indention + out;
    return Value::string(std::move(out));
}

Value fInt(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "int", {{"default", Value::integer(0)}, {"base", Value::integer(10)}});
    v.defined();
    if (v.isIntegral()) return Value::integer(v.asInt());
    if (v.isFloat()) {
        const double d = v.asDouble();
        if (std::isnan(d)) return args[0];
        return Value::integer(py::floatToInt(d));
    }
    if (v.isString()) {
        if (const auto i = parsePythonInt(v.str(), args[1].defined().asInt())) return Value::integer(*i);
        // jinja2's quirk: "42.23"|int is 42.
        if (const auto d = parsePythonFloat(v.str()))
            if (!std::isnan(*d)) return Value::integer(py::floatToInt(*d));
    }
    return args[0];
}

Value fLower(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "lower", {});
    return Value::string(unicode::lower(py::str(v)));
}

Value fUpper(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "upper", {});
    return Value::string(unicode::upper(py::str(v)));
}

Value fReplace(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "replace", {{"old", std::nullopt}, {"new", std::nullopt}, {"count", kNone}});
    const std::int64_t count = args[2].isNone() ? -1 : args[2].defined().asInt();
    return Value::string(strings::replace(py::str(v), py::str(args[0]), py::str(args[1]), count));
}

Value fRound(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "round", {{"precision", Value::integer(0)}, {"method", Value::string("common")}});
    const std::string method = py::str(args[1]);
    if (method != "common" && method != "ceil" && method != "floor") throw TemplateError("method must be common, ceil or floor");
    if (!v.isNumber()) throw TemplateError("type " + py::typeName(v) + " doesn't define __round__ method");
    const std::int64_t precision = args[0].defined().asInt();
    if (method == "common") {
        if (v.isIntegral()) {
            if (precision >= 0) return Value::integer(v.asInt());
            // Python rounds integers exactly, halves to even.
            const std::int64_t x = v.asInt();
            if (precision < -18) {
                // 10^19 is past int64: |x| < 2^63 rounds to 0, or to +-10^19 past half of it.
                if (precision == -19 && (x > 5'000'000'000'000'000'000 || x < -5'000'000'000'000'000'000)) py::integerOverflow();
                return Value::integer(0);
            }
            std::int64_t unit = 1;
            for (std::int64_t i = precision; i < 0; ++i) unit *= 10;
            std::int64_t q = x / unit, r = x % unit;
            if (r < 0) {
                r += unit;
                --q;
            }
            if (2 * r > unit || (2 * r == unit && (q % 2 != 0))) ++q;
            return py::mul(Value::integer(q), Value::integer(unit));
        }
        return Value::number(roundHalfEven(v.asDouble(), precision));
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.asDouble() * scale;
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value fString(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "string", {});
    return Value::string(py::str(v));
}

// Without autoescaping (Hugging Face renders with it off), a safe string is just a string.
Value fSafe(Interpreter& in, const Value& v, const Arguments& a) { return fString(in, v, a); }

Value fTitle(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "title", {});
    return Value::string(strings::titleFilter(py::str(v)));
}

Value fToJson(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "tojson", {{"ensure_ascii", Value::boolean(false)}, {"indent", kNone}, {"separators", kNone},
                                                  {"sort_keys", Value::boolean(false)}});
    JsonOptions o;
    o.ensureAscii = py::truthy(args[0]);
    if (args[1].isString()) {
        o.indent = args[1].str();
    } else if (!args[1].isNone()) {
        o.indent = std::string(widthArgument(args[1]), ' ');
    }
    if (!args[2].isNone()) {
        const std::vector<Value> seps = py::iterate(args[2].defined());
        if (seps.size() != 2 || !seps[0].isString() || !seps[1].isString())
            throw TemplateError("separators must be a pair of strings (item separator, key separator)");
        o.separators = std::make_pair(seps[0].str(), seps[1].str());
    }
    o.sortKeys = py::truthy(args[3]);
    return Value::string(toJson(v, o));
}

Value fTrim(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "trim", {{"chars", kNone}});
    std::optional<std::string> chars;
    if (!args[0].isNone()) chars = py::str(args[0]);
    return Value::string(strings::strip(py::str(v), chars, true, true));
}

Value fTruncate(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "truncate", {{"length", Value::integer(255)}, {"killwords", Value::boolean(false)},
                                                    {"end", Value::string("...")}, {"leeway", kNone}});
    const std::u32string s = unicode::decode(py::str(v));
    const std::int64_t length = args[0].defined().asInt();
    const std::u32string end = unicode::decode(py::str(args[2]));
    const std::int64_t leeway = args[3].isNone() ? 5 : args[3].defined().asInt();
    if (length < static_cast<std::int64_t>(end.size())) throw TemplateError("expected length >= " + std::to_string(end.size()) + ", got " + std::to_string(length));
    if (leeway < 0) throw TemplateError("expected leeway >= 0, got " + std::to_string(leeway));
    if (s.size() <= static_cast<std::uint64_t>(length) + static_cast<std::uint64_t>(leeway)) return Value::string(unicode::encode(s));
    const std::u32string head = s.substr(0, static_cast<std::size_t>(length) - end.size());
    if (py::truthy(args[1])) return Value::string(unicode::encode(head + end));
    const std::size_t space = head.rfind(U' ');
    return Value::string(unicode::encode((space == std::u32string::npos ? head : head.substr(0, space)) + end));
}

Value fWordcount(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "wordcount", {});
    return Value::integer(static_cast<std::int64_t>(strings::wordCount(py::str(v))));
}

const std::map<std::string_view, FilterFn>& scalarFilters() {
    static const std::map<std::string_view, FilterFn> table = {
        {"abs", fAbs},       {"attr", fAttr},         {"capitalize", fCapitalize}, {"center", fCenter},
        {"d", fDefault},     {"default", fDefault},   {"e", fEscape},              {"escape", fEscape},
        {"forceescape", fEscape}, {"float", fFloat},  {"format", fFormat},         {"indent", fIndent},
        {"int", fInt},       {"lower", fLower},       {"replace", fReplace},       {"round", fRound},
        {"safe", fSafe},     {"string", fString},     {"title", fTitle},           {"tojson", fToJson},
        {"trim", fTrim},     {"truncate", fTruncate}, {"upper", fUpper},           {"wordcount", fWordcount},
    };
    return table;
}

}  // namespace

FilterFn findFilter(std::string_view name) {
    const auto& table = scalarFilters();
    const auto it = table.find(name);
    return it != table.end() ? it->second : findSequenceFilter(name);
}

}  // namespace tandem::text::jinja
