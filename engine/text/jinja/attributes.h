#pragma once
// Attribute and item lookup with the rules of jinja2's sandbox: `obj.name` prefers the Python attribute
// (so `message.items` is the dict method) and falls back to the item; `obj[key]` prefers the item and
// falls back to the attribute; a miss is Undefined, and methods that would mutate a list or dict, or
// names like `__class__`, are refused.
#include <optional>
#include <string_view>

#include "text/jinja/value.h"

namespace tandem::text::jinja {

Value getAttr(const Value& obj, std::string_view name);
Value getItem(const Value& obj, const Value& key);
Value getSlice(const Value& obj, const std::optional<Value>& start, const std::optional<Value>& stop,
               const std::optional<Value>& step);

// The Python attribute itself (bound methods and properties of str, dict, list, tuple, numbers and
// objects), or nullopt where Python raises AttributeError.
std::optional<Value> pythonAttribute(const Value& obj, std::string_view name);

std::optional<Value> stringAttribute(const Value& self, std::string_view name);
std::optional<Value> containerAttribute(const Value& self, std::string_view name);
std::optional<Value> numberAttribute(const Value& self, std::string_view name);

}  // namespace tandem::text::jinja
