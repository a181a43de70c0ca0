#pragma once
// Builds the syntax tree from tokens with jinja2's grammar: its statement tags (plus the loopcontrols
// `break`/`continue` and Hugging Face's `generation` tag) and its operator precedence, where tests
// (`is`) and filters (`|`) bind tighter than arithmetic.
#include <string_view>

#include "text/jinja/ast.h"

namespace tandem::text::jinja {

// Throws TemplateSyntaxError.
TemplateAst parseTemplate(std::string_view source);

// jinja2 refuses unknown filters and tests when it compiles the template, except inside `if`
// statements and inline if-expressions, where the error waits until the filter is used.
void checkFiltersAndTests(const Body& body);

// Fills in the ScopeNames of every scope in `root` and returns those of the template's top level.
ScopeNames analyzeScopes(Body& root);

}  // namespace tandem::text::jinja
