#include "text/jinja/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja {
namespace {

void appendEscaped(std::string& out, std::string_view s, bool ensureAscii) {
    out.push_back('"');
    char buf[16];
    for (const char32_t c : unicode::decode(s)) {
        switch (c) {
        case U'"': out += "\\\""; break;
        case U'\\': out += "\\\\"; break;
        case U'\n': out += "\\n"; break;
        case U'\r': out += "\\r"; break;
        case U'\t': out += "\\t"; break;
        case U'\b': out += "\\b"; break;
        case U'\f': out += "\\f"; break;
        default:
            if (c < 0x20 || (ensureAscii && c > 0x7F)) {
                if (c > 0xFFFF) {  // UTF-16 surrogate pair, as json.dumps writes it
                    const char32_t v = c - 0x10000;
                    std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                                  static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
                } else {
                    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
                }
                out += buf;
            } else {
                unicode::append(out, c);
            }
        }
    }
    out.push_back('"');
}

std::string floatJson(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return py::floatRepr(d);
}

class Encoder {
public:
    explicit Encoder(const JsonOptions& o) : o_(o) {
        itemSep_ = o.separators ? o.separators->first : (o.indent ? "," : ", ");
        keySep_ = o.separators ? o.separators->second : ": ";
    }

    void encode(const Value& v, int level) {
        switch (v.type()) {
        case Value::Type::None: out += "null"; return;
        case Value::Type::Bool: out += v.asBool() ? "true" : "false"; return;
        case Value::Type::Int: out += py::intStr(v.asInt()); return;
        case Value::Type::Float: out += floatJson(v.asDouble()); return;
        case Value::Type::String: appendEscaped(out, v.str(), o_.ensureAscii); return;
        case Value::Type::Sequence:
            if (v.seq().kind == SequenceKind::List || v.seq().kind == SequenceKind::Tuple) {
                const NestingGuard nesting("converted to JSON");
                encodeList(v.seq().items, level);
                return;
            }
            break;
        case Value::Type::Dict: {
            const NestingGuard nesting("converted to JSON");
            encodeDict(v.dict(), level);
            return;
        }
        default: break;
        }
        throw TemplateError("Object of type " + py::typeName(v) + " is not JSON serializable");
    }

    std::string out;

private:
    void newline(int level) {
        budget::checkString(out.size());
        if (!o_.indent) return;
        out.push_back('\n');
        for (int i = 0; i < level; ++i) out += *o_.indent;
    }

    void encodeList(const std::vector<Value>& items, int level) {
        if (items.empty()) {
            out += "[]";
            return;
        }
        out.push_back('[');
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i) out += itemSep_;
            newline(level + 1);
            encode(items[i], level + 1);
        }
        newline(level);
        out.push_back(']');
    }

    static std::string keyString(const Value& k) {
        switch (k.type()) {
        case Value::Type::String: return k.str();
        case Value::Type::Bool: return k.asBool() ? "true" : "false";
        case Value::Type::None: return "null";
        case Value::Type::Int: return py::intStr(k.asInt());
        case Value::Type::Float: return floatJson(k.asDouble());
        default: throw TemplateError("keys must be str, int, float, bool or None, not " + py::typeName(k));
        }
    }

    void encodeDict(const Dict& d, int level) {
        if (d.size() == 0) {
            out += "{}";
            return;
        }
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& e : d.entries()) entries.push_back(&e);
        if (o_.sortKeys)
            std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) { return py::less(a->first, b->first); });
        out.push_back('{');
        bool first = true;
        for (const auto* e : entries) {
            if (!first) out += itemSep_;
            first = false;
            newline(level + 1);
            appendEscaped(out, keyString(e->first), o_.ensureAscii);
            out += keySep_;
            encode(e->second, level + 1);
        }
        newline(level);
        out.push_back('}');
    }

    const JsonOptions& o_;
    std::string itemSep_, keySep_;
};

}  // namespace

namespace {

// The input is no template's doing, but a list nested thousands deep would still exhaust the stack here.
constexpr int kMaxJsonDepth = 500;

Value fromJson(const nlohmann::ordered_json& j, int depth) {
    if (depth > kMaxJsonDepth)
        throw TemplateError("a template variable is nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
    switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
        const auto u = j.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
        return Value::integer(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
        std::vector<Value> items;
        items.reserve(j.size());
        for (const auto& item : j) items.push_back(fromJson(item, depth + 1));
        return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
        Dict d;
        for (const auto& [k, v] : j.items()) d.set(Value::string(k), fromJson(v, depth + 1));
        return Value::dict(std::move(d));
    }
    default: throw TemplateError("binary JSON values cannot be passed to a template");
    }
}

}  // namespace

Value fromJson(const nlohmann::ordered_json& j) { return fromJson(j, 0); }

std::string toJson(const Value& value, const JsonOptions& options) {
    Encoder encoder(options);
    encoder.encode(value, 0);
    return std::move(encoder.out);
}

}  // namespace tandem::text::jinja
