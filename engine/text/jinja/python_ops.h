#pragma once
// Python's semantics for the values of value.h: truth, equality, ordering, len(), iteration, `in`,
// str()/repr() and the arithmetic operators, with the TypeError messages Python gives.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/value.h"

namespace tandem::text::jinja::py {

// type(x).__name__: "str", "dict", "NoneType", "Undefined", ...
std::string typeName(const Value& v);
// jinja2's object_type_repr, as in "'dict object' has no attribute 'x'".
std::string typeRepr(const Value& v);

bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// a OP b for OP in "<", "<=", ">", ">=".
bool compare(const Value& a, const Value& b, std::string_view op);
inline bool less(const Value& a, const Value& b) { return compare(a, b, "<"); }
std::size_t len(const Value& v);
// The items `for x in v` visits; consumes iterators.
std::vector<Value> iterate(const Value& v);
// `item in container`.
bool contains(const Value& container, const Value& item);
// Python's hash() would refuse these as dict keys or set members.
bool hashable(const Value& v);

std::string str(const Value& v);
std::string repr(const Value& v);
// repr() of a dict, by reference: namespaces print their attribute dict, and a namespace inside itself
// prints as {...}, as in Python.
std::string dictRepr(const Dict& d);
std::string floatRepr(double d);
std::string stringRepr(std::string_view s);
std::string intStr(std::int64_t i);
// A decimal float ("1.5", "2e-3", "inf"; no '+' sign, no underscores) as Python reads it: out-of-range
// values become inf or 0.0. nullopt unless all of `text` is the number. Independent of the C locale.
std::optional<double> parseFloat(std::string_view text);

// Python's ints are unbounded, ours have 64 bits: a result that does not fit fails with this.
[[noreturn]] void integerOverflow();
// int(d) for a float, truncating toward zero as Python does; fails where the result does not fit.
std::int64_t floatToInt(double d);

Value add(const Value& a, const Value& b);
Value sub(const Value& a, const Value& b);
Value mul(const Value& a, const Value& b);
Value truediv(const Value& a, const Value& b);
Value floordiv(const Value& a, const Value& b);
Value mod(const Value& a, const Value& b);
Value pow(const Value& a, const Value& b);
Value neg(const Value& a);
Value pos(const Value& a);

// obj[start:stop:step] for str, list and tuple.
Value slice(const Value& obj, const std::optional<Value>& start, const std::optional<Value>& stop,
            const std::optional<Value>& step);
// Python's normalisation of a (possibly negative) index; nullopt when out of range.
std::optional<std::size_t> normalizeIndex(std::int64_t index, std::size_t size);

}  // namespace tandem::text::jinja::py
