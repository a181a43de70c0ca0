#include "text/jinja/value.h"

#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/python_ops.h"

namespace tandem::text::jinja {
namespace {

// Nested holders destroyed directly, one inside the other, before the rest is set aside: a few
// hundred bytes of stack each.
constexpr int kDirectReleaseDepth = 100;
thread_local int releaseDepth = 0;
thread_local std::vector<Value> setAside;

}  // namespace

ValueRelease::ValueRelease() : deep_(++releaseDepth > kDirectReleaseDepth) {}

ValueRelease::~ValueRelease() {
    // The outermost release destroys what was set aside, one level deep; that may set more aside.
    if (releaseDepth == 1)
        while (!setAside.empty()) {
            const std::vector<Value> batch = std::move(setAside);
            setAside.clear();
        }
    --releaseDepth;
}

void ValueRelease::operator()(Value& v) {
    if (deep_)
        setAside.push_back(std::move(v));
    v = Value();
}

Sequence::~Sequence() {
    ValueRelease release;
    for (Value& v : items) release(v);
}

Dict::~Dict() {
    ValueRelease release;
    for (auto& [k, v] : entries_) {
        release(k);
        release(v);
    }
}

Value Value::undefined(std::string message) { return Value(Undefined{std::make_shared<const std::string>(std::move(message))}); }
Value Value::boolean(bool b) { return Value(Storage(b)); }
Value Value::integer(std::int64_t i) { return Value(Storage(i)); }
Value Value::number(double d) { return Value(Storage(d)); }
Value Value::string(std::string s) {
    budget::builtString(s.size());
    return Value(Storage(std::make_shared<const std::string>(std::move(s))));
}
Value Value::sequence(std::vector<Value> items, SequenceKind kind) {
    budget::builtList(items.size(), sizeof(Value));
    auto s = std::make_shared<Sequence>();
    s->kind = kind;
    s->items = std::move(items);
    return Value(Storage(std::move(s)));
}
Value Value::dict(Dict d) {
    budget::builtList(d.size(), 2 * sizeof(Value));
    return Value(Storage(std::make_shared<const Dict>(std::move(d))));
}
Value Value::object(std::shared_ptr<Object> o) { return Value(Storage(std::move(o))); }

// Callers check the type first; one that did not gets a template error, never std::bad_variant_access.
std::int64_t Value::asInt() const {
    if (isBool()) return asBool() ? 1 : 0;
    if (!isInt()) throw TemplateError("'" + py::typeName(*this) + "' object cannot be interpreted as an integer");
    return std::get<std::int64_t>(v_);
}

double Value::asDouble() const {
    if (isFloat()) return std::get<double>(v_);
    if (!isIntegral()) throw TemplateError("must be real number, not " + py::typeName(*this));
    return static_cast<double>(asInt());
}

const void* Value::identity() const {
    switch (type()) {
    case Type::String: return std::get<std::shared_ptr<const std::string>>(v_).get();
    case Type::Sequence: return std::get<std::shared_ptr<Sequence>>(v_).get();
    case Type::Dict: return std::get<std::shared_ptr<const Dict>>(v_).get();
    case Type::Object: return std::get<std::shared_ptr<Object>>(v_).get();
    default: return nullptr;
    }
}

void Value::wrongType(const char* expected) const {
    throw TemplateError("expected " + std::string(expected) + ", not " + py::typeName(*this));
}

void Value::failUndefined() const { throw TemplateError(*undefinedInfo().message); }

std::size_t Dict::size() const { return entries_.size(); }

// Dicts are searched item by item: fine for the handful of keys of a message, but a template can
// build big ones, so long searches count as steps.
const Value* Dict::find(const Value& key) const {
    if (key.isString()) return find(std::string_view(key.str()));
    if (entries_.size() >= 16) budget::chargeSteps(entries_.size() / 16);
    for (const auto& [k, v] : entries_)
        if (py::equals(k, key)) return &v;
    return nullptr;
}

const Value* Dict::find(std::string_view key) const {
    if (entries_.size() >= 16) budget::chargeSteps(entries_.size() / 16);
    for (const auto& [k, v] : entries_)
        if (k.isString() && budget::sameText(k.str(), key)) return &v;
    return nullptr;
}

void Dict::set(Value key, Value value) {
    if (!py::hashable(key)) throw TemplateError("unhashable type: '" + py::typeName(key) + "'");
    if (entries_.size() >= 16) budget::chargeSteps(entries_.size() / 16);
    for (auto& [k, v] : entries_)
        if (py::equals(k, key)) {
            v = std::move(value);
            return;
        }
    entries_.emplace_back(std::move(key), std::move(value));
}

std::optional<Value> Object::attribute(std::string_view) const { return std::nullopt; }

Value Object::call(Interpreter&, const Arguments&) { throw TemplateError("'" + typeName() + "' object is not callable"); }

std::vector<Value> bindArguments(const Arguments& args, std::string_view callee, std::initializer_list<Param> params) {
    std::vector<std::optional<Value>> bound(params.size());
    if (args.positional.size() > params.size())
        throw TemplateError(std::string(callee) + " takes at most " + std::to_string(params.size()) + " argument(s) (" +
                            std::to_string(args.positional.size()) + " given)");
    for (std::size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
    for (const auto& [name, value] : args.keyword) {
        std::size_t i = 0;
        for (const Param& p : params) {
            if (p.name == name) break;
            ++i;
        }
        if (i == params.size()) throw TemplateError(std::string(callee) + " got an unexpected keyword argument '" + name + "'");
        if (bound[i]) throw TemplateError(std::string(callee) + " got multiple values for argument '" + name + "'");
        bound[i] = value;
    }
    std::vector<Value> out;
    out.reserve(params.size());
    std::size_t i = 0;
    for (const Param& p : params) {
        if (bound[i]) {
            out.push_back(std::move(*bound[i]));
        } else if (p.fallback) {
            out.push_back(*p.fallback);
        } else {
            throw TemplateError(std::string(callee) + " missing required argument '" + std::string(p.name) + "'");
        }
        ++i;
    }
    return out;
}

}  // namespace tandem::text::jinja
