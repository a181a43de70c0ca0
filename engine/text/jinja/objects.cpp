#include "text/jinja/objects.h"

#include "text/jinja/python_ops.h"

namespace tandem::text::jinja {

Value makeFunction(std::string name, Function::Body body) {
    return Value::object(std::make_shared<Function>(std::move(name), std::move(body)));
}

Value makeMethod(const Value& self, std::string name, std::function<Value(const Arguments&)> body) {
    std::string repr = "<built-in method " + name + " of " + py::typeName(self) + " object>";
    return Value::object(std::make_shared<Function>(
        std::move(name), [body = std::move(body)](Interpreter&, const Arguments& args) { return body(args); }, std::move(repr)));
}

std::string Namespace::repr() const { return "<Namespace " + py::dictRepr(attrs_) + ">"; }

std::optional<Value> Namespace::attribute(std::string_view name) const {
    if (const Value* v = attrs_.find(name)) return *v;
    return std::nullopt;
}

}  // namespace tandem::text::jinja
