#pragma once
// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...).
#include <string_view>

#include "text/jinja/value.h"

namespace tandem::text::jinja {

using TestFn = bool (*)(Interpreter&, const Value& input, const Arguments& args);

// nullptr for an unknown name.
TestFn findTest(std::string_view name);

}  // namespace tandem::text::jinja
