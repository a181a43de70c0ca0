// The non-mutating methods of dict, list and tuple, and the attributes of numbers.
#include <cmath>

#include "text/jinja/attributes.h"
#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/objects.h"
#include "text/jinja/python_ops.h"

namespace tandem::text::jinja {
namespace {

std::optional<Value> dictAttribute(const Value& self, std::string_view name) {
    const std::string n(name);
    auto method = [&](auto body) { return makeMethod(self, n, body); };
    if (name == "get")
        return method([self](const Arguments& a) {
            const auto args = bindArguments(a, "dict.get", {{"key", std::nullopt}, {"default", Value::none()}});
            if (!py::hashable(args[0])) throw TemplateError("unhashable type: '" + py::typeName(args[0]) + "'");
            const Value* v = self.dict().find(args[0]);
            return v ? *v : args[1];
        });
    if (name == "items" || name == "keys" || name == "values")
        return method([self, n](const Arguments& a) {
            bindArguments(a, "dict." + n, {});
            std::vector<Value> out;
            for (const auto& [k, v] : self.dict().entries())
                out.push_back(n == "items" ? Value::tuple({k, v}) : n == "keys" ? k : v);
            return Value::sequence(std::move(out), n == "items" ? SequenceKind::DictItems
                                                   : n == "keys" ? SequenceKind::DictKeys : SequenceKind::DictValues);
        });
    if (name == "copy")
        return method([self](const Arguments& a) {
            bindArguments(a, "dict.copy", {});
            return Value::dict(self.dict());
        });
    return std::nullopt;
}

std::optional<Value> sequenceAttribute(const Value& self, std::string_view name) {
    const SequenceKind kind = self.seq().kind;
    if (kind != SequenceKind::List && kind != SequenceKind::Tuple) return std::nullopt;
    const std::string n(name);
    const std::string type = py::typeName(self);
    auto method = [&](auto body) { return makeMethod(self, n, body); };
    if (name == "count")
        return method([self, type](const Arguments& a) {
            const auto args = bindArguments(a, type + ".count", {{"value", std::nullopt}});
            std::int64_t count = 0;
            budget::chargeSteps(self.seq().items.size());
            for (const Value& v : self.seq().items) count += py::equals(v, args[0]) ? 1 : 0;
            return Value::integer(count);
        });
    if (name == "index")
        return method([self, type](const Arguments& a) {
            const auto args = bindArguments(a, type + ".index", {{"value", std::nullopt}});
            const auto& items = self.seq().items;
            budget::chargeSteps(items.size());
            for (std::size_t i = 0; i < items.size(); ++i)
                if (py::equals(items[i], args[0])) return Value::integer(static_cast<std::int64_t>(i));
            throw TemplateError(type == "list" ? py::repr(args[0]) + " is not in list" : "tuple.index(x): x not in tuple");
        });
    if (name == "copy" && kind == SequenceKind::List)
        return method([self](const Arguments& a) {
            bindArguments(a, "list.copy", {});
            return Value::list(self.seq().items);
        });
    return std::nullopt;
}

}  // namespace

std::optional<Value> containerAttribute(const Value& self, std::string_view name) {
    return self.isDict() ? dictAttribute(self, name) : sequenceAttribute(self, name);
}

std::optional<Value> numberAttribute(const Value& self, std::string_view name) {
    if (name == "real") return self.isFloat() ? self : Value::integer(self.asInt());
    if (name == "imag") return self.isFloat() ? Value::number(0.0) : Value::integer(0);
    if (self.isIntegral()) {
        if (name == "numerator") return Value::integer(self.asInt());
        if (name == "denominator") return Value::integer(1);
    }
    if (name == "is_integer" && self.isFloat())
        return makeMethod(self, "is_integer", [d = self.asDouble()](const Arguments& a) {
            bindArguments(a, "float.is_integer", {});
            return Value::boolean(std::isfinite(d) && std::floor(d) == d);
        });
    return std::nullopt;
}

}  // namespace tandem::text::jinja
