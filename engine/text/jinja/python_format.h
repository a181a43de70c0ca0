#pragma once
// Python's two string formatting languages as templates use them: `"%s: %d" % (a, b)` (and jinja2's
// `format` filter) and `"{}: {:>4}".format(a, b)`.
#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace tandem::text::jinja::py {

// format % args: a tuple supplies the positional values, a dict the %(name)s values, anything else is
// the single value.
std::string percentFormat(std::string_view format, const Value& args);
// format.format(*args, **kwargs), with field lookups going through the sandbox like jinja2's formatter.
std::string braceFormat(std::string_view format, const Arguments& args);

}  // namespace tandem::text::jinja::py
