// Truth, equality, ordering, len(), iteration, `in` and arithmetic with Python's rules and messages.
#include <cmath>
#include <limits>

#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/python_format.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja::py {
namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
    throw TemplateError("unsupported operand type(s) for " + std::string(op) + ": '" + typeName(a) + "' and '" + typeName(b) +
                        "'");
}

// Python raises when a or b is Undefined before looking at the other operand.
void requireDefined(const Value& a, const Value& b) {
    a.defined();
    b.defined();
}

std::int64_t checkedAdd(std::int64_t a, std::int64_t b) {
    std::int64_t r;
    if (__builtin_add_overflow(a, b, &r)) integerOverflow();
    return r;
}
std::int64_t checkedSub(std::int64_t a, std::int64_t b) {
    std::int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) integerOverflow();
    return r;
}
std::int64_t checkedMul(std::int64_t a, std::int64_t b) {
    std::int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) integerOverflow();
    return r;
}

bool bothIntegral(const Value& a, const Value& b) { return a.isIntegral() && b.isIntegral(); }

// Python's float modulo: the result takes the sign of the divisor.
double floatMod(double a, double b) {
    double m = std::fmod(a, b);
    if (m != 0 && ((b < 0) != (m < 0))) m += b;
    return m;
}

// The size of `times` copies of something of `size`, as long as it fits in the limit `limit`; more
// than `limit` otherwise.
std::size_t repeatedSize(std::size_t size, std::int64_t times, std::size_t limit) {
    if (times <= 0 || size == 0) return 0;
    if (static_cast<std::uint64_t>(times) > limit / size) return limit + 1;
    return size * static_cast<std::size_t>(times);
}

Value repeat(const Value& seqOrStr, std::int64_t times) {
    const RenderBudget* b = RenderBudget::current();
    const RenderLimits limits = b ? b->limits() : RenderLimits{};
    if (seqOrStr.isString()) {
        const std::size_t size = repeatedSize(seqOrStr.str().size(), times, limits.stringBytes);
        budget::checkString(size);
        std::string out;
        out.reserve(size);
        for (std::int64_t i = 0; i < times && size; ++i) out += seqOrStr.str();
        return Value::string(std::move(out));
    }
    budget::checkList(repeatedSize(seqOrStr.seq().items.size(), times, limits.listItems));
    std::vector<Value> items;
    for (std::int64_t i = 0; i < times && !seqOrStr.seq().items.empty(); ++i)
        items.insert(items.end(), seqOrStr.seq().items.begin(), seqOrStr.seq().items.end());
    return Value::sequence(std::move(items), seqOrStr.seq().kind);
}

bool isRepeatable(const Value& v) {
    return v.isString() || v.isSequence(SequenceKind::List) || v.isSequence(SequenceKind::Tuple);
}

}  // namespace

void integerOverflow() { throw TemplateError("integer result does not fit in 64 bits (Python would use a big integer here)"); }

std::int64_t floatToInt(double d) {
    if (std::isnan(d)) throw TemplateError("cannot convert float NaN to integer");
    if (std::isinf(d)) throw TemplateError("cannot convert float infinity to integer");
    // -2^63 is a double exactly; 2^63 is the first double past the largest int64.
    if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) integerOverflow();
    return static_cast<std::int64_t>(d);
}

bool truthy(const Value& v) {
    switch (v.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return false;
    case Value::Type::Bool: return v.asBool();
    case Value::Type::Int: return v.asInt() != 0;
    case Value::Type::Float: return v.asDouble() != 0.0;
    case Value::Type::String: return !v.str().empty();
    case Value::Type::Sequence: return v.seq().kind == SequenceKind::Iterator || !v.seq().items.empty();
    case Value::Type::Dict: return v.dict().size() != 0;
    case Value::Type::Object: return true;
    }
    return false;
}

bool equals(const Value& a, const Value& b) {
    if (a.isUndefined() || b.isUndefined()) return a.isUndefined() && b.isUndefined();
    if (a.isNumber() && b.isNumber()) {
        if (bothIntegral(a, b)) return a.asInt() == b.asInt();
        return a.asDouble() == b.asDouble();
    }
    if (a.type() != b.type()) return false;
    switch (a.type()) {
    case Value::Type::None: return true;
    case Value::Type::String: return budget::sameText(a.str(), b.str());
    case Value::Type::Sequence: {
        const Sequence& x = a.seq();
        const Sequence& y = b.seq();
        if (x.kind == SequenceKind::Iterator || y.kind == SequenceKind::Iterator) return &x == &y;
        if (x.kind != y.kind || x.items.size() != y.items.size()) return false;
        if (&x == &y) return true;
        const NestingGuard nesting("compared");
        for (std::size_t i = 0; i < x.items.size(); ++i)
            if (!equals(x.items[i], y.items[i])) return false;
        return true;
    }
    case Value::Type::Dict: {
        const Dict& x = a.dict();
        const Dict& y = b.dict();
        if (x.size() != y.size()) return false;
        if (&x == &y) return true;
        const NestingGuard nesting("compared");
        for (const auto& [k, v] : x.entries()) {
            const Value* other = y.find(k);
            if (!other || !equals(v, *other)) return false;
        }
        return true;
    }
    case Value::Type::Object: return a.identity() == b.identity();
    default: return false;
    }
}

bool compare(const Value& a, const Value& b, std::string_view op) {
    requireDefined(a, b);
    auto apply = [op](auto x, auto y) {
        if (op == "<") return x < y;
        if (op == "<=") return x <= y;
        if (op == ">") return x > y;
        return x >= y;
    };
    if (a.isNumber() && b.isNumber()) {
        if (bothIntegral(a, b)) return apply(a.asInt(), b.asInt());
        return apply(a.asDouble(), b.asDouble());
    }
    if (a.isString() && b.isString()) {  // UTF-8 byte order is code point order
        budget::chargeText(std::min(a.str().size(), b.str().size()));
        return apply(a.str(), b.str());
    }
    const bool lists = a.isSequence(SequenceKind::List) && b.isSequence(SequenceKind::List);
    const bool tuples = a.isSequence(SequenceKind::Tuple) && b.isSequence(SequenceKind::Tuple);
    if (lists || tuples) {
        // Python compares the first differing items, or else the lengths.
        const NestingGuard nesting("compared");
        const auto& x = a.seq().items;
        const auto& y = b.seq().items;
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
            if (!equals(x[i], y[i])) return compare(x[i], y[i], op);
        return apply(x.size(), y.size());
    }
    throw TemplateError("'" + std::string(op) + "' not supported between instances of '" + typeName(a) + "' and '" +
                        typeName(b) + "'");
}

std::size_t len(const Value& v) {
    switch (v.type()) {
    case Value::Type::Undefined: return 0;
    case Value::Type::String: return unicode::length(v.str());
    case Value::Type::Sequence:
        if (v.seq().kind != SequenceKind::Iterator) return v.seq().items.size();
        break;
    case Value::Type::Dict: return v.dict().size();
    default: break;
    }
    throw TemplateError("object of type '" + typeName(v) + "' has no len()");
}

std::vector<Value> iterate(const Value& v) {
    switch (v.type()) {
    case Value::Type::Undefined: return {};
    case Value::Type::String: {
        const std::u32string text = unicode::decode(v.str());
        budget::checkList(text.size());
        std::vector<Value> out;
        out.reserve(text.size());
        for (const char32_t c : text) {
            std::string s;
            unicode::append(s, c);
            out.push_back(Value::string(std::move(s)));
        }
        return out;
    }
    case Value::Type::Sequence: {
        Sequence& s = v.seq();
        budget::chargeSteps(s.items.size() - s.consumed);
        if (s.kind != SequenceKind::Iterator) return s.items;
        std::vector<Value> rest(s.items.begin() + static_cast<std::ptrdiff_t>(s.consumed), s.items.end());
        s.consumed = s.items.size();
        return rest;
    }
    case Value::Type::Dict: {
        budget::chargeSteps(v.dict().size());
        std::vector<Value> keys;
        for (const auto& [k, val] : v.dict().entries()) keys.push_back(k);
        return keys;
    }
    default: break;
    }
    throw TemplateError("'" + typeName(v) + "' object is not iterable");
}

bool contains(const Value& container, const Value& item) {
    if (container.isString()) {
        if (!item.isString())
            throw TemplateError("'in <string>' requires string as left operand, not " + typeName(item));
        budget::chargeText(container.str().size());
        return container.str().find(item.str()) != std::string::npos;
    }
    if (container.isDict()) {
        if (!hashable(item)) throw TemplateError("unhashable type: '" + typeName(item) + "'");
        return container.dict().find(item) != nullptr;
    }
    if (container.isSequence() || container.isUndefined()) {
        for (const Value& v : iterate(container))
            if (equals(v, item)) return true;
        return false;
    }
    throw TemplateError("argument of type '" + typeName(container) + "' is not iterable");
}

bool hashable(const Value& v) {
    if (v.isDict()) return false;
    if (v.isSequence()) {
        const Sequence& s = v.seq();
        if (s.kind == SequenceKind::Tuple) {
            const NestingGuard nesting("hashed");
            for (const Value& item : s.items)
                if (!hashable(item)) return false;
            return true;
        }
        return s.kind == SequenceKind::Iterator || s.kind == SequenceKind::DictValues;
    }
    return true;
}

Value add(const Value& a, const Value& b) {
    requireDefined(a, b);
    if (a.isNumber() && b.isNumber()) {
        if (bothIntegral(a, b)) return Value::integer(checkedAdd(a.asInt(), b.asInt()));
        return Value::number(a.asDouble() + b.asDouble());
    }
    if (a.isString()) {
        if (!b.isString()) throw TemplateError("can only concatenate str (not \"" + typeName(b) + "\") to str");
        budget::checkString(a.str().size() + b.str().size());
        return Value::string(a.str() + b.str());
    }
    for (const SequenceKind kind : {SequenceKind::List, SequenceKind::Tuple}) {
        if (!a.isSequence(kind)) continue;
        if (!b.isSequence(kind))
            throw TemplateError("can only concatenate " + typeName(a) + " (not \"" + typeName(b) + "\") to " + typeName(a));
        budget::checkList(a.seq().items.size() + b.seq().items.size());
        std::vector<Value> items = a.seq().items;
        items.insert(items.end(), b.seq().items.begin(), b.seq().items.end());
        return Value::sequence(std::move(items), kind);
    }
    unsupported("+", a, b);
}

Value sub(const Value& a, const Value& b) {
    requireDefined(a, b);
    if (!a.isNumber() || !b.isNumber()) unsupported("-", a, b);
    if (bothIntegral(a, b)) return Value::integer(checkedSub(a.asInt(), b.asInt()));
    return Value::number(a.asDouble() - b.asDouble());
}

Value mul(const Value& a, const Value& b) {
    requireDefined(a, b);
    if (a.isNumber() && b.isNumber()) {
        if (bothIntegral(a, b)) return Value::integer(checkedMul(a.asInt(), b.asInt()));
        return Value::number(a.asDouble() * b.asDouble());
    }
    if (isRepeatable(a) || isRepeatable(b)) {
        const Value& seq = isRepeatable(a) ? a : b;
        const Value& times = isRepeatable(a) ? b : a;
        if (!times.isIntegral())
            throw TemplateError("can't multiply sequence by non-int of type '" + typeName(times) + "'");
        return repeat(seq, times.asInt());
    }
    unsupported("*", a, b);
}

Value truediv(const Value& a, const Value& b) {
    requireDefined(a, b);
    if (!a.isNumber() || !b.isNumber()) unsupported("/", a, b);
    if (b.asDouble() == 0.0) throw TemplateError(bothIntegral(a, b) ? "division by zero" : "float division by zero");
    return Value::number(a.asDouble() / b.asDouble());
}

Value floordiv(const Value& a, const Value& b) {
    requireDefined(a, b);
    if (!a.isNumber() || !b.isNumber()) unsupported("//", a, b);
    if (bothIntegral(a, b)) {
        const std::int64_t x = a.asInt(), y = b.asInt();
        if (y == 0) throw TemplateError("integer division or modulo by zero");
        if (y == -1) return Value::integer(checkedSub(0, x));  // INT64_MIN / -1 traps in C++
        std::int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value::integer(q);
    }
    if (b.asDouble() == 0.0) throw TemplateError("float floor division by zero");
    // CPython's float_floor_div: exact for the remainder, then rounded to the nearest whole quotient.
    const double x = a.asDouble(), y = b.asDouble();
    const double div = (x - floatMod(x, y)) / y;
    if (div == 0.0) return Value::number(std::copysign(0.0, x / y));
    double q = std::floor(div);
    if (div - q > 0.5) q += 1.0;
    return Value::number(q);
}

Value mod(const Value& a, const Value& b) {
    a.defined();
    if (a.isString()) return Value::string(percentFormat(a.str(), b));
    b.defined();
    if (!a.isNumber() || !b.isNumber()) unsupported("%", a, b);
    if (bothIntegral(a, b)) {
        const std::int64_t x = a.asInt(), y = b.asInt();
        if (y == 0) throw TemplateError("integer modulo by zero");
        if (y == -1) return Value::integer(0);  // INT64_MIN % -1 traps in C++
        std::int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::integer(m);
    }
    if (b.asDouble() == 0.0) throw TemplateError("float modulo");
    return Value::number(floatMod(a.asDouble(), b.asDouble()));
}

Value pow(const Value& a, const Value& b) {
    requireDefined(a, b);
    if (!a.isNumber() || !b.isNumber()) unsupported("** or pow()", a, b);
    if (bothIntegral(a, b) && b.asInt() >= 0) {
        // Square and multiply. Squaring overflows only where the result would too: what is squared
        // is still to be multiplied in.
        std::int64_t result = 1, base = a.asInt();
        for (std::int64_t e = b.asInt(); e > 0;) {
            if (e & 1) result = checkedMul(result, base);
            e >>= 1;
            if (e) base = checkedMul(base, base);
        }
        return Value::integer(result);
    }
    if (a.asDouble() == 0.0 && b.asDouble() < 0) throw TemplateError("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(a.asDouble(), b.asDouble()));
}

Value neg(const Value& a) {
    a.defined();
    if (a.isIntegral()) return Value::integer(checkedSub(0, a.asInt()));
    if (a.isFloat()) return Value::number(-a.asDouble());
    throw TemplateError("bad operand type for unary -: '" + typeName(a) + "'");
}

Value pos(const Value& a) {
    a.defined();
    if (a.isIntegral()) return Value::integer(a.asInt());
    if (a.isFloat()) return a;
    throw TemplateError("bad operand type for unary +: '" + typeName(a) + "'");
}

std::optional<std::size_t> normalizeIndex(std::int64_t index, std::size_t size) {
    const auto n = static_cast<std::int64_t>(size);
    if (index < 0) index += n;
    if (index < 0 || index >= n) return std::nullopt;
    return static_cast<std::size_t>(index);
}

Value slice(const Value& obj, const std::optional<Value>& startArg, const std::optional<Value>& stopArg,
            const std::optional<Value>& stepArg) {
    auto bound = [](const std::optional<Value>& v) -> std::optional<std::int64_t> {
        if (!v || v->isNone()) return std::nullopt;
        if (!v->isIntegral()) throw TemplateError("slice indices must be integers or None or have an __index__ method");
        return v->asInt();
    };
    const std::int64_t step = bound(stepArg).value_or(1);
    if (step == 0) throw TemplateError("slice step cannot be zero");

    std::u32string text;
    const bool isString = obj.isString();
    if (isString) text = unicode::decode(obj.str());
    const auto n = static_cast<std::int64_t>(isString ? text.size() : obj.seq().items.size());

    // CPython's PySlice_AdjustIndices.
    const std::int64_t lower = step < 0 ? -1 : 0;
    const std::int64_t upper = step < 0 ? n - 1 : n;
    auto clamp = [&](std::optional<std::int64_t> v, std::int64_t fallback) {
        if (!v) return fallback;
        std::int64_t i = *v;
        if (i < 0) {
            i += n;
            if (i < lower) i = lower;
        } else if (i > upper) {
            i = upper;
        }
        return i;
    };
    const std::int64_t start = clamp(bound(startArg), step < 0 ? upper : lower);
    const std::int64_t stop = clamp(bound(stopArg), step < 0 ? lower : upper);

    // CPython's slice length; the indexes in unsigned arithmetic, where i * step may overflow but
    // start + i * step lies within the sequence.
    const std::int64_t span = step > 0 ? stop - start : start - stop;  // both within [-1, n]
    const std::uint64_t stride = step > 0 ? std::uint64_t(step) : 0 - std::uint64_t(step);
    const std::size_t count = span > 0 ? static_cast<std::size_t>((std::uint64_t(span) - 1) / stride + 1) : 0;
    auto index = [&](std::size_t k) { return static_cast<std::size_t>(std::uint64_t(start) + k * std::uint64_t(step)); };
    if (isString) {
        std::u32string out;
        for (std::size_t k = 0; k < count; ++k) out.push_back(text[index(k)]);
        return Value::string(unicode::encode(out));
    }
    std::vector<Value> out;
    for (std::size_t k = 0; k < count; ++k) out.push_back(obj.seq().items[index(k)]);
    return Value::sequence(std::move(out), obj.seq().kind == SequenceKind::Tuple ? SequenceKind::Tuple : SequenceKind::List);
}

}  // namespace tandem::text::jinja::py
