#pragma once
// The objects templates create or receive besides plain data: builtin functions and bound methods,
// namespace() objects (the one thing a template may change after creating it), joiner and cycler.
#include <functional>
#include <memory>
#include <string>

#include "text/jinja/value.h"

namespace tandem::text::jinja {

class Function : public Object {
public:
    using Body = std::function<Value(Interpreter&, const Arguments&)>;
    Function(const std::string& name, Body body, std::string repr = {})
        : body_(std::move(body)), repr_(repr.empty() ? "<built-in function " + name + ">" : std::move(repr)) {}
    std::string typeName() const override { return "builtin_function_or_method"; }
    std::string repr() const override { return repr_; }
    bool callable() const override { return true; }
    Value call(Interpreter& interpreter, const Arguments& args) override { return body_(interpreter, args); }

private:
    Body body_;
    std::string repr_;
};

Value makeFunction(std::string name, Function::Body body);
// `self.name` as a bound method; `body` receives the arguments of the call.
Value makeMethod(const Value& self, std::string name, std::function<Value(const Arguments&)> body);

class Namespace : public Object {
public:
    std::string typeName() const override { return "Namespace"; }
    std::string typeRepr() const override { return "jinja2.utils.Namespace object"; }
    std::string repr() const override;
    std::optional<Value> attribute(std::string_view name) const override;
    void set(const std::string& name, Value value) { attrs_.set(Value::string(name), std::move(value)); }
    void releaseReferences() override {
        const Dict released = std::move(attrs_);
        attrs_ = Dict();
    }

private:
    Dict attrs_;
};

}  // namespace tandem::text::jinja
