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

// Builds jinja2's attribute getter: "a.b.0" looks up item a, then b, then index 0.
Value lookupAttributePath(const Value& item, const Value& path);

}  // namespace tandem::text::jinja
