#pragma once
// The values a template computes with, modelled on the Python objects jinja2 sees: None, bool, int,
// float, str, list, tuple, dict, jinja2's Undefined, and objects (namespaces, macros, functions, the
// loop variable). Lists and dicts are shared, never copied, like Python references; the sandbox jinja2
// runs in forbids mutating them, so only namespaces change after creation.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tandem::text::jinja {

class Value;
class Interpreter;
struct Arguments;

// Sequences other than lists that templates meet: tuples, the one-shot iterators that jinja2's select,
// map, items, unique and reverse filters return (always true, no len(), consumed by iterating), and the
// views of dict.keys(), .values() and .items().
enum class SequenceKind { List, Tuple, Iterator, DictKeys, DictValues, DictItems };

struct Sequence {
    Sequence() = default;
    Sequence(const Sequence&) = delete;
    Sequence& operator=(const Sequence&) = delete;
    ~Sequence();

    SequenceKind kind = SequenceKind::List;
    std::vector<Value> items;
    std::size_t consumed = 0;  // iterators: how many items were already taken
};

class Dict {
public:
    Dict() = default;
    Dict(const Dict&) = default;
    Dict(Dict&&) = default;
    Dict& operator=(const Dict&) = default;
    Dict& operator=(Dict&&) = default;
    ~Dict();

    // nullptr when absent. Keys compare like Python dict keys (1 == 1.0 == True).
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    void set(Value key, Value value);
    const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
    std::size_t size() const;

private:
    std::vector<std::pair<Value, Value>> entries_;  // insertion order, as Python keeps it
};

// Anything that is not plain data.
class Object {
public:
    virtual ~Object() = default;
    // Python's type(x).__name__, used in error messages.
    virtual std::string typeName() const = 0;
    // jinja2's object_type_repr: "<module>.<type> object" for non-builtin types.
    virtual std::string typeRepr() const { return typeName() + " object"; }
    virtual std::string repr() const = 0;
    // The Python attribute `name`, or nullopt where Python would raise AttributeError.
    virtual std::optional<Value> attribute(std::string_view name) const;
    virtual bool callable() const { return false; }
    virtual Value call(Interpreter& interpreter, const Arguments& args);
    // Lets go of the values it holds. The interpreter calls it at the end of a render on the objects
    // that can be part of a cycle (a namespace holding itself, a macro kept in the scope it closes
    // over), which would otherwise never be freed.
    virtual void releaseReferences() {}
};

// jinja2's Undefined: prints as '', is false and empty; any other use fails with `message`.
struct Undefined {
    std::shared_ptr<const std::string> message;
};

class Value {
public:
    enum class Type { Undefined, None, Bool, Int, Float, String, Sequence, Dict, Object };

    Value() : v_(nullptr) {}  // None
    static Value undefined(std::string message);
    static Value none() { return Value(); }
    static Value boolean(bool b);
    static Value integer(std::int64_t i);
    static Value number(double d);
    static Value string(std::string s);
    static Value sequence(std::vector<Value> items, SequenceKind kind = SequenceKind::List);
    static Value list(std::vector<Value> items) { return sequence(std::move(items), SequenceKind::List); }
    static Value tuple(std::vector<Value> items) { return sequence(std::move(items), SequenceKind::Tuple); }
    static Value dict(Dict d);
    static Value object(std::shared_ptr<Object> o);

    Type type() const { return static_cast<Type>(v_.index()); }
    bool isUndefined() const { return type() == Type::Undefined; }
    bool isNone() const { return type() == Type::None; }
    bool isBool() const { return type() == Type::Bool; }
    bool isInt() const { return type() == Type::Int; }  // not bool
    bool isFloat() const { return type() == Type::Float; }
    bool isNumber() const { return isBool() || isInt() || isFloat(); }
    bool isIntegral() const { return isBool() || isInt(); }  // Python's isinstance(x, int)
    bool isString() const { return type() == Type::String; }
    bool isSequence() const { return type() == Type::Sequence; }
    bool isSequence(SequenceKind kind) const { return isSequence() && seq().kind == kind; }
    bool isDict() const { return type() == Type::Dict; }
    bool isObject() const { return type() == Type::Object; }

    // The accessors expect the caller to have checked the type; a caller that did not gets a template
    // error naming both types (never std::bad_variant_access, which would end the process).
    bool asBool() const { return as<bool>("bool"); }
    std::int64_t asInt() const;   // bool or int
    double asDouble() const;      // any number
    const std::string& str() const { return *as<std::shared_ptr<const std::string>>("str"); }
    Sequence& seq() const { return *as<std::shared_ptr<Sequence>>("list"); }
    const Dict& dict() const { return *as<std::shared_ptr<const Dict>>("dict"); }
    Object& obj() const { return *as<std::shared_ptr<Object>>("object"); }
    const Undefined& undefinedInfo() const { return as<Undefined>("undefined"); }
    // Identity, for `is sameas` and object equality.
    const void* identity() const;

    // Throws the error this Undefined stands for.
    [[noreturn]] void failUndefined() const;
    // Throws when this is Undefined; every operation but printing, testing, iterating and len() does this.
    const Value& defined() const {
        if (isUndefined()) failUndefined();
        return *this;
    }

private:
    using Storage = std::variant<Undefined, std::nullptr_t, bool, std::int64_t, double, std::shared_ptr<const std::string>,
                                 std::shared_ptr<Sequence>, std::shared_ptr<const Dict>, std::shared_ptr<Object>>;
    explicit Value(Storage v) : v_(std::move(v)) {}
    template <class T>
    const T& as(const char* expected) const {
        if (const T* p = std::get_if<T>(&v_)) return *p;
        wrongType(expected);
    }
    [[noreturn]] void wrongType(const char* expected) const;
    Storage v_;
};

// Destroying a list destroys the lists inside it, and so on down: a list nested 100,000 deep, or a long
// chain of namespaces, would recurse that deep and overflow the stack. What holds values (lists, dicts,
// scopes, loop and cycler objects) lets go of them through one of these in its destructor: past a
// modest depth the values are set aside, and the outermost release destroys them one after another.
class ValueRelease {
public:
    ValueRelease();
    ~ValueRelease();
    ValueRelease(const ValueRelease&) = delete;
    ValueRelease& operator=(const ValueRelease&) = delete;
    // Leaves `v` None: what it held is destroyed now, or set aside when this release is deep.
    void operator()(Value& v);

private:
    bool deep_;
};

// Call arguments as Python sees them: positional, then keyword.
struct Arguments {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};

// One parameter of a builtin (filter, test, method, global function).
struct Param {
    std::string_view name;
    std::optional<Value> fallback;  // nullopt: required
};

// Binds `args` to `params` the way Python binds a call, naming `callee` in errors.
std::vector<Value> bindArguments(const Arguments& args, std::string_view callee, std::initializer_list<Param> params);

}  // namespace tandem::text::jinja
