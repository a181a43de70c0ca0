#include "text/jinja/attributes.h"

#include "text/jinja/error.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja {
namespace {

bool isDunder(std::string_view name) { return name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__"; }

// ImmutableSandboxedEnvironment's modifies_known_mutable().
bool isMutatingMethod(const Value& obj, std::string_view name) {
    if (obj.isSequence(SequenceKind::List)) {
        for (const char* m : {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"})
            if (name == m) return true;
    } else if (obj.isDict()) {
        for (const char* m : {"clear", "pop", "popitem", "setdefault", "update"})
            if (name == m) return true;
    }
    return false;
}

Value unsafe(const Value& obj, std::string_view name) {
    return Value::undefined("access to attribute " + py::stringRepr(name) + " of " + py::stringRepr(py::typeName(obj)) +
                                " object is unsafe.");
}

// The attribute half of both lookups; nullopt when there is no such attribute.
std::optional<Value> safeAttribute(const Value& obj, std::string_view name) {
    if (isDunder(name) || isMutatingMethod(obj, name)) return unsafe(obj, name);
    std::optional<Value> attr = pythonAttribute(obj, name);
    if (attr && !name.empty() && name[0] == '_') return unsafe(obj, name);
    return attr;
}

Value missingAttribute(const Value& obj, std::string_view name) {
    return Value::undefined(py::stringRepr(py::typeRepr(obj)) + " has no attribute " + py::stringRepr(name));
}

}  // namespace

std::optional<Value> pythonAttribute(const Value& obj, std::string_view name) {
    switch (obj.type()) {
    case Value::Type::String: return stringAttribute(obj, name);
    case Value::Type::Dict:
    case Value::Type::Sequence: return containerAttribute(obj, name);
    case Value::Type::Bool:
    case Value::Type::Int:
    case Value::Type::Float: return numberAttribute(obj, name);
    case Value::Type::Object: return obj.obj().attribute(name);
    default: return std::nullopt;
    }
}

Value getAttr(const Value& obj, std::string_view name) {
    obj.defined();
    if (std::optional<Value> attr = safeAttribute(obj, name)) return *attr;
    if (obj.isDict())
        if (const Value* v = obj.dict().find(name)) return *v;
    return missingAttribute(obj, name);
}

Value getItem(const Value& obj, const Value& key) {
    obj.defined();
    if (obj.isDict() && py::hashable(key)) {
        if (const Value* v = obj.dict().find(key)) return *v;
    } else if ((obj.isSequence(SequenceKind::List) || obj.isSequence(SequenceKind::Tuple)) && key.isIntegral()) {
        const auto& items = obj.seq().items;
        if (const auto i = py::normalizeIndex(key.asInt(), items.size())) return items[*i];
    } else if (obj.isString() && key.isIntegral()) {
        const std::u32string text = unicode::decode(obj.str());
        if (const auto i = py::normalizeIndex(key.asInt(), text.size())) {
            std::string c;
            unicode::append(c, text[*i]);
            return Value::string(std::move(c));
        }
    }
    if (key.isString()) {
        if (std::optional<Value> attr = safeAttribute(obj, key.str())) return *attr;
        return missingAttribute(obj, key.str());
    }
    return Value::undefined(py::typeRepr(obj) + " has no element " + py::repr(key));
}

// jinja2 compiles obj[a:b:c] to a plain Python subscript, so here, unlike getItem, errors propagate.
Value getSlice(const Value& obj, const std::optional<Value>& start, const std::optional<Value>& stop,
               const std::optional<Value>& step) {
    obj.defined();
    if (obj.isString() || obj.isSequence(SequenceKind::List) || obj.isSequence(SequenceKind::Tuple))
        return py::slice(obj, start, stop, step);
    if (obj.isDict()) throw TemplateError("unhashable type: 'slice'");
    throw TemplateError("'" + py::typeName(obj) + "' object is not subscriptable");
}

}  // namespace tandem::text::jinja
