#pragma once
// A Jinja template that renders exactly as Python's jinja2 does in the environment Hugging Face
// transformers uses for chat templates: ImmutableSandboxedEnvironment(trim_blocks=True,
// lstrip_blocks=True) with the loopcontrols extension, HF's tojson, raise_exception and strftime_now.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "text/jinja/render_options.h"

namespace tandem::text::jinja {

struct ParsedTemplate;

class Template {
public:
    // Parses `source`. A syntax error throws tandem::Error naming `origin` (where the template came
    // from), the line and the column.
    explicit Template(std::string_view source, std::string origin = "template");

    // Renders with `variables` (a JSON object) as the template's context. A runtime error, including
    // one the template raises itself, throws tandem::Error with the line and column.
    std::string render(const nlohmann::ordered_json& variables, const RenderOptions& options = {}) const;

    const std::string& origin() const { return origin_; }

private:
    std::shared_ptr<const ParsedTemplate> parsed_;
    std::string origin_;
};

}  // namespace tandem::text::jinja
