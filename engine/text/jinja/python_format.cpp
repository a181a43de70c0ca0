#include "text/jinja/python_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <locale.h>
#include <optional>

#include "text/jinja/attributes.h"
#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja::py {
namespace {

// Widths and precisions are read saturating here, so that no digit string overflows; anything near
// this is past the string limit anyway.
constexpr std::size_t kMaxCount = std::size_t(1) << 40;

std::size_t readCount(const std::u32string& f, std::size_t& i) {
    std::size_t n = 0;
    while (i < f.size() && f[i] >= U'0' && f[i] <= U'9') n = std::min(kMaxCount, n * 10 + (f[i++] - U'0'));
    return n;
}

// A width or precision given as an argument ('*').
std::size_t countArgument(const Value& v) {
    v.defined();
    if (!v.isIntegral()) throw TemplateError("* wants int");
    const std::int64_t n = v.asInt();
    if (n < 0) return 0;
    return std::min(kMaxCount, static_cast<std::size_t>(n));
}

std::string pad(std::string body, std::size_t width, char32_t fill, char align) {
    const std::size_t n = unicode::length(body);
    if (n >= width) return body;
    std::string fillStr;
    unicode::append(fillStr, fill);
    const std::size_t total = width - n;
    budget::checkString(body.size() + total * fillStr.size());
    auto repeat = [&](std::size_t k) {
        std::string s;
        for (std::size_t i = 0; i < k; ++i) s += fillStr;
        return s;
    };
    if (align == '<') return body + repeat(total);
    if (align == '^') return repeat(total / 2) + body + repeat(total - total / 2);
    return repeat(total) + body;
}

// A number laid out as printf does: sign, radix prefix, then digits zero-padded to `zeroWidth`.
std::string signedNumber(const std::string& digits, bool negative, char sign, std::size_t zeroWidth, const std::string& prefix = {}) {
    const std::string signStr = negative ? "-" : (sign == '+' ? "+" : (sign == ' ' ? " " : ""));
    std::string body = digits;
    const std::size_t used = signStr.size() + prefix.size() + body.size();
    if (used < zeroWidth) {
        budget::checkString(zeroWidth);
        body.insert(0, zeroWidth - used, '0');
    }
    return signStr + prefix + body;
}

// A code point for %c and format(n, 'c').
char32_t codePoint(std::int64_t n) {
    if (n < 0 || n > 0x10FFFF) throw TemplateError("%c arg not in range(0x110000)");
    return static_cast<char32_t>(n);
}

// printf's float conversions are what Python's % and format() produce, but they follow the C locale's
// decimal point, which a Qt application sets from the user's locale; format in the "C" locale.
class CNumericLocale {
public:
    CNumericLocale() : previous_(uselocale(cLocale())) {}
    ~CNumericLocale() { uselocale(previous_); }
    CNumericLocale(const CNumericLocale&) = delete;
    CNumericLocale& operator=(const CNumericLocale&) = delete;

private:
    static locale_t cLocale() {
        static const locale_t c = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
        return c;
    }
    locale_t previous_;
};

std::string cFormatDouble(double v, char type, std::size_t precision, bool alternate) {
    // Beyond what a double holds, the digits are zeros; the text is the precision plus the integer
    // part (at most 309 digits) and a few signs.
    budget::checkString(precision + 320);
    const CNumericLocale cLocale;
    char spec[32];
    std::snprintf(spec, sizeof spec, "%%%s.%zu%c", alternate ? "#" : "", precision, type);
    std::string out(precision + 320, '\0');
    const int n = std::snprintf(out.data(), out.size(), spec, v);
    out.resize(n > 0 ? std::min(static_cast<std::size_t>(n), out.size() - 1) : 0);
    return out;
}

std::string intDigits(std::int64_t v, char type) {
    const unsigned long long mag = v < 0 ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
    char buf[80];
    switch (type) {
    case 'x': std::snprintf(buf, sizeof buf, "%llx", mag); break;
    case 'X': std::snprintf(buf, sizeof buf, "%llX", mag); break;
    case 'o': std::snprintf(buf, sizeof buf, "%llo", mag); break;
    case 'b': {
        std::string s;
        unsigned long long m = mag;
        do {
            s.insert(s.begin(), static_cast<char>('0' + (m & 1)));
            m >>= 1;
        } while (m);
        return s;
    }
    default: std::snprintf(buf, sizeof buf, "%llu", mag); break;
    }
    return buf;
}

std::int64_t toIntForFormat(const Value& v, char conv) {
    v.defined();
    if (v.isIntegral()) return v.asInt();
    if (v.isFloat() && (conv == 'd' || conv == 'i' || conv == 'u')) return floatToInt(v.asDouble());
    throw TemplateError(std::string("%") + conv + " format: " + (conv == 'd' || conv == 'i' || conv == 'u' ? "a real number" : "an integer") +
                        " is required, not " + typeName(v));
}

}  // namespace

std::string percentFormat(std::string_view fmt, const Value& args) {
    std::vector<Value> positional;
    const bool tupleArgs = args.isSequence(SequenceKind::Tuple);
    if (tupleArgs)
        positional = args.seq().items;
    else
        positional.push_back(args);
    std::size_t next = 0;
    bool usedMapping = false;
    std::string out;
    const std::u32string f = unicode::decode(fmt);
    std::size_t i = 0;
    auto takeArg = [&]() -> Value {
        if (next >= positional.size()) throw TemplateError("not enough arguments for format string");
        return positional[next++];
    };
    while (i < f.size()) {
        if (f[i] != U'%') {
            unicode::append(out, f[i++]);
            continue;
        }
        if (++i >= f.size()) throw TemplateError("incomplete format");
        std::optional<Value> mapped;
        if (f[i] == U'(') {
            const std::size_t close = f.find(U')', i);
            if (close == std::u32string::npos) throw TemplateError("incomplete format key");
            const std::string key = unicode::encode(f.substr(i + 1, close - i - 1));
            if (!args.isDict()) throw TemplateError("format requires a mapping");
            const Value* v = args.dict().find(std::string_view(key));
            if (!v) throw TemplateError(stringRepr(key));
            mapped = *v;
            usedMapping = true;
            i = close + 1;
        }
        bool left = false, zero = false, alternate = false;
        char sign = 0;
        for (; i < f.size(); ++i) {
            if (f[i] == U'-') left = true;
            else if (f[i] == U'0') zero = true;
            else if (f[i] == U'#') alternate = true;
            else if (f[i] == U'+') sign = '+';
            else if (f[i] == U' ') { if (sign != '+') sign = ' '; }
            else break;
        }
        std::size_t width = 0;
        if (i < f.size() && f[i] == U'*') {
            const Value w = takeArg();
            // A negative width from the arguments left-aligns, as in C.
            if (w.isIntegral() && w.asInt() < 0) {
                left = true;
                width = w.asInt() == INT64_MIN ? kMaxCount : countArgument(Value::integer(-w.asInt()));
            } else {
                width = countArgument(w);
            }
            ++i;
        } else {
            width = readCount(f, i);
        }
        std::optional<std::size_t> precision;
        if (i < f.size() && f[i] == U'.') {
            ++i;
            if (i < f.size() && f[i] == U'*') {
                precision = countArgument(takeArg());
                ++i;
            } else {
                precision = readCount(f, i);
            }
        }
        while (i < f.size() && (f[i] == U'h' || f[i] == U'l' || f[i] == U'L')) ++i;
        if (i >= f.size()) throw TemplateError("incomplete format");
        const char32_t conv = f[i++];
        if (conv == U'%') {
            out += '%';
            continue;
        }
        const Value v = mapped ? *mapped : takeArg();
        std::string body;
        bool numeric = false;
        switch (conv) {
        case U's': body = str(v); break;
        case U'r':
        case U'a': body = repr(v); break;
        case U'c':
            if (v.isString()) body = v.str();
            else unicode::append(body, codePoint(toIntForFormat(v, 'c')));
            break;
        case U'd':
        case U'i':
        case U'u':
        case U'x':
        case U'X':
        case U'o': {
            const char c = static_cast<char>(conv);
            const std::int64_t n = toIntForFormat(v, c);
            std::string digits = intDigits(n, c == 'i' || c == 'u' ? 'd' : c);
            if (precision && digits.size() < *precision) {
                budget::checkString(*precision);
                digits.insert(0, *precision - digits.size(), '0');
            }
            std::string prefix = alternate && c == 'x' ? "0x" : alternate && c == 'X' ? "0X" : alternate && c == 'o' ? "0o" : "";
            body = signedNumber(digits, n < 0, sign, zero && !left ? width : 0, prefix);
            numeric = true;
            break;
        }
        case U'e':
        case U'E':
        case U'f':
        case U'F':
        case U'g':
        case U'G': {
            v.defined();
            if (!v.isNumber()) throw TemplateError("must be real number, not " + typeName(v));
            const double d = v.asDouble();
            std::string digits = cFormatDouble(std::fabs(d), static_cast<char>(conv), precision.value_or(6), alternate);
            body = signedNumber(digits, std::signbit(d) && !std::isnan(d), sign, zero && !left && std::isfinite(d) ? width : 0);
            numeric = true;
            break;
        }
        default: throw TemplateError("unsupported format character '" + unicode::encode(std::u32string(1, conv)) + "'");
        }
        if (!numeric && precision && (conv == U's' || conv == U'r' || conv == U'a'))
            body = unicode::encode(unicode::decode(body).substr(0, static_cast<std::size_t>(*precision)));
        out += pad(body, width, U' ', left ? '<' : '>');
        budget::checkString(out.size());
    }
    // Python skips this check when the argument is subscriptable like a mapping (a dict, a list, Undefined).
    const bool mappingLike = !tupleArgs && (args.isDict() || args.isSequence(SequenceKind::List) || args.isUndefined());
    if (!usedMapping && !mappingLike && next < positional.size())
        throw TemplateError("not all arguments converted during string formatting");
    return out;
}

namespace {

// format(value, spec): the format-spec mini-language for str, int, float and bool.
std::string formatSpec(const Value& value, std::string_view specText) {
    value.defined();
    const std::u32string spec = unicode::decode(specText);
    if (spec.empty()) return str(value);
    std::size_t i = 0;
    char32_t fill = U' ';
    char align = 0;
    auto isAlign = [](char32_t c) { return c == U'<' || c == U'>' || c == U'^' || c == U'='; };
    if (spec.size() >= 2 && isAlign(spec[1])) {
        fill = spec[0];
        align = static_cast<char>(spec[1]);
        i = 2;
    } else if (isAlign(spec[0])) {
        align = static_cast<char>(spec[0]);
        i = 1;
    }
    char sign = 0;
    if (i < spec.size() && (spec[i] == U'+' || spec[i] == U'-' || spec[i] == U' ')) sign = static_cast<char>(spec[i++]);
    bool alternate = false;
    if (i < spec.size() && spec[i] == U'#') {
        alternate = true;
        ++i;
    }
    bool zero = false;
    if (i < spec.size() && spec[i] == U'0') {
        zero = true;
        ++i;
    }
    const std::size_t width = readCount(spec, i);
    char grouping = 0;
    if (i < spec.size() && (spec[i] == U',' || spec[i] == U'_')) grouping = static_cast<char>(spec[i++]);
    std::optional<std::size_t> precision;
    if (i < spec.size() && spec[i] == U'.') {
        ++i;
        precision = readCount(spec, i);
    }
    char type = 0;
    if (i < spec.size()) type = static_cast<char>(spec[i++]);
    if (i != spec.size()) throw TemplateError("Invalid format specifier '" + std::string(specText) + "'");

    if (value.isString()) {
        if (type != 0 && type != 's') throw TemplateError(std::string("Unknown format code '") + type + "' for object of type 'str'");
        std::string body = value.str();
        if (precision) body = unicode::encode(unicode::decode(body).substr(0, *precision));
        return pad(body, width, fill, align ? align : '<');
    }
    if (!value.isNumber())
        throw TemplateError("unsupported format string passed to " + typeName(value) + ".__format__");

    if (zero && !align) {
        fill = U'0';
        align = '=';
    }
    std::string digits;
    bool negative = false;
    std::string prefix;
    const bool floatType = type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' || type == 'G' || type == '%';
    if (value.isFloat() && !floatType && type != 0 && type != 'n')
        throw TemplateError(std::string("Unknown format code '") + type + "' for object of type 'float'");
    if (value.isIntegral() && !floatType) {
        const std::int64_t n = value.asInt();
        negative = n < 0;
        const char t = type == 0 || type == 'n' ? 'd' : type;
        if (t == 'c') {
            unicode::append(digits, codePoint(n));
            negative = false;
        } else {
            if (t != 'd' && t != 'x' && t != 'X' && t != 'o' && t != 'b')
                throw TemplateError(std::string("Unknown format code '") + type + "' for object of type 'int'");
            digits = intDigits(n, t);
            if (alternate && t != 'd') prefix = std::string("0") + (t == 'X' ? 'X' : t);
        }
    } else {
        const double d = value.asDouble();
        negative = std::signbit(d) && !std::isnan(d);
        const double mag = std::fabs(d);
        if (type == '%') {
            digits = cFormatDouble(mag * 100, 'f', precision.value_or(6), alternate) + "%";
        } else if (type == 0) {
            if (!precision) {
                digits = floatRepr(mag);
            } else {
                digits = cFormatDouble(mag, 'g', *precision == 0 ? 1 : *precision, alternate);
                if (digits.find_first_of(".einf") == std::string::npos) digits += ".0";
            }
        } else {
            const char t = type == 'n' ? 'g' : type;
            digits = cFormatDouble(mag, t, precision.value_or(6), alternate);
        }
    }
    if (grouping) {
        const std::size_t end = digits.find_first_not_of("0123456789");
        const std::size_t intLen = end == std::string::npos ? digits.size() : end;
        std::string grouped;
        for (std::size_t k = 0; k < intLen; ++k) {
            if (k > 0 && (intLen - k) % 3 == 0) grouped += grouping;
            grouped += digits[k];
        }
        digits = grouped + digits.substr(intLen);
    }
    const std::string signStr = negative ? "-" : (sign == '+' ? "+" : (sign == ' ' ? " " : ""));
    if (align == '=') {
        const std::string head = signStr + prefix;
        const std::size_t bodyWidth = width > head.size() ? width - head.size() : 0;
        return head + pad(digits, bodyWidth, fill, '>');
    }
    return pad(signStr + prefix + digits, width, fill, align ? align : '>');
}

}  // namespace

namespace {

// Python allows a replacement field in a format spec, but no deeper: `recursionLeft` counts down.
std::string braceFormat(std::string_view fmt, const Arguments& args, int recursionLeft) {
    if (recursionLeft <= 0) throw TemplateError("Max string recursion exceeded");
    std::string out;
    std::size_t autoIndex = 0;
    bool usedAuto = false, usedManual = false;
    std::size_t i = 0;
    while (i < fmt.size()) {
        const char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
                out += '}';
                i += 2;
                continue;
            }
            throw TemplateError("Single '}' encountered in format string");
        }
        if (c != '{') {
            out += c;
            ++i;
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out += '{';
            i += 2;
            continue;
        }
        // Find the matching '}' (format specs may nest one level of braces).
        std::size_t depth = 1, j = i + 1;
        for (; j < fmt.size() && depth; ++j) {
            if (fmt[j] == '{') ++depth;
            else if (fmt[j] == '}') --depth;
        }
        if (depth) throw TemplateError("expected '}' before end of string");
        const std::string field(fmt.substr(i + 1, j - i - 2));
        i = j;
        std::string name = field, conversion, spec;
        const std::size_t colon = field.find(':');
        const std::size_t bang = field.find('!');
        if (bang != std::string::npos && (colon == std::string::npos || bang < colon)) {
            name = field.substr(0, bang);
            conversion = field.substr(bang + 1, colon == std::string::npos ? std::string::npos : colon - bang - 1);
        } else if (colon != std::string::npos) {
            name = field.substr(0, colon);
        }
        if (colon != std::string::npos) spec = field.substr(colon + 1);
        if (spec.find('{') != std::string::npos) spec = braceFormat(spec, args, recursionLeft - 1);

        std::size_t k = 0;
        while (k < name.size() && name[k] != '.' && name[k] != '[') ++k;
        const std::string first = name.substr(0, k);
        Value v;
        if (first.empty() || std::isdigit(static_cast<unsigned char>(first[0]))) {
            std::size_t index;
            if (first.empty()) {
                if (usedManual) throw TemplateError("cannot switch from manual field specification to automatic field numbering");
                usedAuto = true;
                index = autoIndex++;
            } else {
                if (usedAuto) throw TemplateError("cannot switch from automatic field numbering to manual field specification");
                usedManual = true;
                if (first.size() > 9 || first.find_first_not_of("0123456789") != std::string::npos)
                    throw TemplateError("invalid format field " + stringRepr(first));
                index = static_cast<std::size_t>(std::stoul(first));
            }
            if (index >= args.positional.size())
                throw TemplateError("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
            v = args.positional[index];
        } else {
            bool found = false;
            for (const auto& [key, val] : args.keyword)
                if (key == first) {
                    v = val;
                    found = true;
                }
            if (!found) throw TemplateError(stringRepr(first));
        }
        while (k < name.size()) {
            if (name[k] == '.') {
                std::size_t e = k + 1;
                while (e < name.size() && name[e] != '.' && name[e] != '[') ++e;
                v = getAttr(v, name.substr(k + 1, e - k - 1));
                k = e;
            } else {
                const std::size_t e = name.find(']', k);
                if (e == std::string::npos) throw TemplateError("Missing ']' in format string");
                const std::string key = name.substr(k + 1, e - k - 1);
                const bool numeric = !key.empty() && key.size() < 18 && key.find_first_not_of("0123456789") == std::string::npos;
                v = getItem(v, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
                k = e + 1;
            }
        }
        if (conversion == "r" || conversion == "a") v = Value::string(repr(v));
        else if (conversion == "s") v = Value::string(str(v));
        else if (!conversion.empty()) throw TemplateError("Unknown conversion specifier " + conversion);
        out += formatSpec(v, spec);
        budget::checkString(out.size());
    }
    return out;
}

}  // namespace

std::string braceFormat(std::string_view fmt, const Arguments& args) { return braceFormat(fmt, args, 2); }

}  // namespace tandem::text::jinja::py
