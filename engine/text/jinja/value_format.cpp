// str(), repr() and type names of values, byte for byte as Python prints them: templates print lists,
// dicts and floats directly, and the output is part of the prompt.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "text/jinja/budget.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja::py {
namespace {

// The containers being printed on this thread, outermost first: Python's Py_ReprEnter, which prints a
// container met again inside itself (a namespace holding itself) as [...] or {...}.
thread_local std::vector<const void*> printing;

class PrintingContainer {
public:
    explicit PrintingContainer(const void* container) : nesting_("printed") {
        again_ = std::find(printing.begin(), printing.end(), container) != printing.end();
        if (!again_) printing.push_back(container);
    }
    ~PrintingContainer() {
        if (!again_) printing.pop_back();
    }
    PrintingContainer(const PrintingContainer&) = delete;
    PrintingContainer& operator=(const PrintingContainer&) = delete;
    // Whether the container is already being printed further out.
    bool again() const { return again_; }

private:
    NestingGuard nesting_;
    bool again_;
};

std::string sequenceRepr(const Sequence& s) {
    const char* open = s.kind == SequenceKind::Tuple ? "(" : "[";
    const char* close = s.kind == SequenceKind::Tuple ? ")" : "]";
    if (s.kind == SequenceKind::Iterator) return "<generator object>";
    const PrintingContainer entered(&s);
    if (entered.again()) return std::string(open) + "..." + close;
    std::string items;
    for (std::size_t i = 0; i < s.items.size(); ++i) {
        if (i > 0) items += ", ";
        items += repr(s.items[i]);
        budget::checkString(items.size());
    }
    switch (s.kind) {
    case SequenceKind::List: return "[" + items + "]";
    case SequenceKind::Tuple: return "(" + items + (s.items.size() == 1 ? ",)" : ")");
    case SequenceKind::Iterator: return "<generator object>";
    case SequenceKind::DictKeys: return "dict_keys([" + items + "])";
    case SequenceKind::DictValues: return "dict_values([" + items + "])";
    case SequenceKind::DictItems: return "dict_items([" + items + "])";
    }
    return items;
}

}  // namespace

std::string dictRepr(const Dict& d) {
    const PrintingContainer entered(&d);
    if (entered.again()) return "{...}";
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : d.entries()) {
        if (!first) out += ", ";
        first = false;
        out += repr(k);
        out += ": ";
        out += repr(v);
        budget::checkString(out.size());
    }
    return out + "}";
}

std::string typeName(const Value& v) {
    switch (v.type()) {
    case Value::Type::Undefined: return "Undefined";
    case Value::Type::None: return "NoneType";
    case Value::Type::Bool: return "bool";
    case Value::Type::Int: return "int";
    case Value::Type::Float: return "float";
    case Value::Type::String: return "str";
    case Value::Type::Sequence:
        switch (v.seq().kind) {
        case SequenceKind::List: return "list";
        case SequenceKind::Tuple: return "tuple";
        case SequenceKind::Iterator: return "generator";
        case SequenceKind::DictKeys: return "dict_keys";
        case SequenceKind::DictValues: return "dict_values";
        case SequenceKind::DictItems: return "dict_items";
        }
        break;
    case Value::Type::Dict: return "dict";
    case Value::Type::Object: return v.obj().typeName();
    }
    return "object";
}

std::string typeRepr(const Value& v) {
    if (v.isNone()) return "None";
    if (v.isUndefined()) return "jinja2.runtime.Undefined object";
    if (v.isObject()) return v.obj().typeRepr();
    return typeName(v) + " object";
}

std::string intStr(std::int64_t i) { return std::to_string(i); }

std::optional<double> parseFloat(std::string_view text) {
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (end != text.data() + text.size()) return std::nullopt;
    if (ec == std::errc::result_out_of_range) {
        // Too large or too small for a double: Python gives inf or 0.0 with the sign of the text.
        const bool negative = !text.empty() && text[0] == '-';
        const std::size_t e = text.find_first_of("eE");
        const bool tiny = e != std::string_view::npos && e + 1 < text.size() && text[e + 1] == '-';
        return tiny ? (negative ? -0.0 : 0.0) : (negative ? -HUGE_VAL : HUGE_VAL);
    }
    if (ec != std::errc()) return std::nullopt;
    return v;
}

std::string floatRepr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    // Shortest round-trip digits, then Python's layout rule for repr(float): positional notation
    // while the decimal point sits within 16 digits of the first digit, scientific otherwise.
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    std::string out;
    std::size_t pos = 0;
    if (sci[0] == '-') {
        out = "-";
        pos = 1;
    }
    const std::size_t e = sci.find('e');
    std::string digits;
    for (std::size_t i = pos; i < e; ++i)
        if (sci[i] != '.') digits += sci[i];
    const int exponent = std::stoi(sci.substr(e + 1));
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    const int decpt = exponent + 1;
    const int n = static_cast<int>(digits.size());
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
        } else if (decpt >= n) {
            out += digits + std::string(static_cast<std::size_t>(decpt - n), '0') + ".0";
        } else {
            out += digits.substr(0, static_cast<std::size_t>(decpt)) + "." + digits.substr(static_cast<std::size_t>(decpt));
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
}

std::string stringRepr(std::string_view s) {
    const std::u32string text = unicode::decode(s);
    const bool hasSingle = text.find(U'\'') != std::u32string::npos;
    const bool hasDouble = text.find(U'"') != std::u32string::npos;
    const char32_t quote = hasSingle && !hasDouble ? U'"' : U'\'';
    std::string out;
    out.push_back(static_cast<char>(quote));
    for (const char32_t c : text) {
        char esc[16];
        if (c == quote || c == U'\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c == U'\t') {
            out += "\\t";
        } else if (c == U'\n') {
            out += "\\n";
        } else if (c == U'\r') {
            out += "\\r";
        } else if (unicode::isPrintable(c)) {
            unicode::append(out, c);
        } else {
            if (c <= 0xFF)
                std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned>(c));
            else if (c <= 0xFFFF)
                std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
            else
                std::snprintf(esc, sizeof esc, "\\U%08x", static_cast<unsigned>(c));
            out += esc;
        }
    }
    out.push_back(static_cast<char>(quote));
    return out;
}

std::string str(const Value& v) {
    switch (v.type()) {
    case Value::Type::Undefined: return "";
    case Value::Type::None: return "None";
    case Value::Type::Bool: return v.asBool() ? "True" : "False";
    case Value::Type::Int: return intStr(v.asInt());
    case Value::Type::Float: return floatRepr(v.asDouble());
    case Value::Type::String: return v.str();
    case Value::Type::Sequence: return sequenceRepr(v.seq());
    case Value::Type::Dict: return dictRepr(v.dict());
    case Value::Type::Object: return v.obj().repr();
    }
    return "";
}

std::string repr(const Value& v) {
    if (v.isString()) return stringRepr(v.str());
    if (v.isUndefined()) return "Undefined";
    return str(v);
}

}  // namespace tandem::text::jinja::py
