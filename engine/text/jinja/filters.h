#pragma once
// jinja2's builtin filters, with Hugging Face's tojson in place of jinja2's.
#include <string_view>

#include "text/jinja/value.h"

namespace tandem::text::jinja {

using FilterFn = Value (*)(Interpreter&, const Value& input, const Arguments& args);

// nullptr for an unknown name.
FilterFn findFilter(std::string_view name);

// The filters that work on sequences live in filters_sequence.cpp; they register through this.
FilterFn findSequenceFilter(std::string_view name);

// What jinja2's attribute= arguments (map, sort, selectattr, ...) look up: "a.b.0" is item a, then
// item b of that, then index 0.
Value lookupAttributePath(const Value& item, const Value& path);

}  // namespace tandem::text::jinja
