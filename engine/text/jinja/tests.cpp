#include "text/jinja/tests.h"

#include <map>

#include "text/jinja/error.h"
#include "text/jinja/filters.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja {
namespace {

Value argument(const Arguments& a, const char* test) { return bindArguments(a, std::string("test '") + test + "'", {{"other", std::nullopt}})[0]; }

void noArguments(const Arguments& a, const char* test) { bindArguments(a, std::string("test '") + test + "'", {}); }

bool tDefined(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "defined"), !v.isUndefined(); }
bool tUndefined(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "undefined"), v.isUndefined(); }
bool tNone(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "none"), v.isNone(); }
bool tBoolean(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "boolean"), v.isBool(); }
bool tTrue(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "true"), v.isBool() && v.asBool(); }
bool tFalse(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "false"), v.isBool() && !v.asBool(); }
bool tInteger(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "integer"), v.isInt(); }
bool tFloat(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "float"), v.isFloat(); }
bool tNumber(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "number"), v.isNumber(); }
bool tString(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "string"), v.isString(); }
bool tMapping(Interpreter&, const Value& v, const Arguments& a) { return noArguments(a, "mapping"), v.isDict(); }
// Undefined counts: it has __call__ (which raises).
bool tCallable(Interpreter&, const Value& v, const Arguments& a) {
    return noArguments(a, "callable"), v.isUndefined() || (v.isObject() && v.obj().callable());
}
bool tEscaped(Interpreter&, const Value&, const Arguments& a) { return noArguments(a, "escaped"), false; }

// Python's try: iter(value).
bool tIterable(Interpreter&, const Value& v, const Arguments& a) {
    noArguments(a, "iterable");
    return v.isUndefined() || v.isString() || v.isSequence() || v.isDict();
}

// jinja2 asks for len() and __getitem__.
bool tSequence(Interpreter&, const Value& v, const Arguments& a) {
    noArguments(a, "sequence");
    if (v.isSequence()) return v.seq().kind == SequenceKind::List || v.seq().kind == SequenceKind::Tuple;
    return v.isUndefined() || v.isString() || v.isDict();
}

bool tOdd(Interpreter&, const Value& v, const Arguments& a) {
    noArguments(a, "odd");
    return py::equals(py::mod(v, Value::integer(2)), Value::integer(1));
}

bool tEven(Interpreter&, const Value& v, const Arguments& a) {
    noArguments(a, "even");
    return py::equals(py::mod(v, Value::integer(2)), Value::integer(0));
}

bool tDivisibleBy(Interpreter&, const Value& v, const Arguments& a) {
    const Value num = bindArguments(a, "test 'divisibleby'", {{"num", std::nullopt}})[0];
    return py::equals(py::mod(v, num), Value::integer(0));
}

bool tLower(Interpreter&, const Value& v, const Arguments& a) {
    noArguments(a, "lower");
    const std::string s = py::str(v);
    return unicode::upper(s) != s && unicode::lower(s) == s;
}

bool tUpper(Interpreter&, const Value& v, const Arguments& a) {
    noArguments(a, "upper");
    const std::string s = py::str(v);
    return unicode::lower(s) != s && unicode::upper(s) == s;
}

bool tIn(Interpreter&, const Value& v, const Arguments& a) {
    return py::contains(bindArguments(a, "test 'in'", {{"seq", std::nullopt}})[0], v);
}

bool tEq(Interpreter&, const Value& v, const Arguments& a) { return py::equals(v, argument(a, "eq")); }
bool tNe(Interpreter&, const Value& v, const Arguments& a) { return !py::equals(v, argument(a, "ne")); }
bool tLt(Interpreter&, const Value& v, const Arguments& a) { return py::compare(v, argument(a, "lt"), "<"); }
bool tLe(Interpreter&, const Value& v, const Arguments& a) { return py::compare(v, argument(a, "le"), "<="); }
bool tGt(Interpreter&, const Value& v, const Arguments& a) { return py::compare(v, argument(a, "gt"), ">"); }
bool tGe(Interpreter&, const Value& v, const Arguments& a) { return py::compare(v, argument(a, "ge"), ">="); }

// Python's `is`: identity for containers and objects; for immutable scalars the same value of the
// same type (CPython shares those that templates compare this way).
bool tSameAs(Interpreter&, const Value& v, const Arguments& a) {
    const Value other = argument(a, "sameas");
    if (v.type() != other.type()) return false;
    if (v.isSequence() || v.isDict() || v.isObject()) return v.identity() == other.identity();
    return py::equals(v, other);
}

bool tFilter(Interpreter&, const Value& v, const Arguments& a) {
    noArguments(a, "filter");
    return v.isString() && findFilter(v.str()) != nullptr;
}

bool tTest(Interpreter&, const Value& v, const Arguments& a) {
    noArguments(a, "test");
    return v.isString() && findTest(v.str()) != nullptr;
}

const std::map<std::string_view, TestFn>& table() {
    static const std::map<std::string_view, TestFn> tests = {
        {"boolean", tBoolean}, {"callable", tCallable}, {"defined", tDefined},   {"divisibleby", tDivisibleBy},
        {"eq", tEq},           {"equalto", tEq},        {"==", tEq},             {"escaped", tEscaped},
        {"even", tEven},       {"false", tFalse},       {"filter", tFilter},     {"float", tFloat},
        {"ge", tGe},           {">=", tGe},             {"gt", tGt},             {">", tGt},
        {"greaterthan", tGt},  {"in", tIn},             {"integer", tInteger},   {"iterable", tIterable},
        {"le", tLe},           {"<=", tLe},             {"lower", tLower},       {"lt", tLt},
        {"<", tLt},            {"lessthan", tLt},       {"mapping", tMapping},   {"ne", tNe},
        {"!=", tNe},           {"none", tNone},         {"number", tNumber},     {"odd", tOdd},
        {"sameas", tSameAs},   {"sequence", tSequence}, {"string", tString},     {"test", tTest},
        {"true", tTrue},       {"undefined", tUndefined}, {"upper", tUpper},
    };
    return tests;
}

}  // namespace

TestFn findTest(std::string_view name) {
    const auto it = table().find(name);
    return it != table().end() ? it->second : nullptr;
}

}  // namespace tandem::text::jinja
