#include "text/jinja/template.h"

#include <new>

#include "tandem/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/json.h"
#include "text/jinja/parser.h"

namespace tandem::text::jinja {

struct ParsedTemplate {
    TemplateAst ast;
};

namespace {

std::string located(const std::string& origin, const TemplateError& e) {
    std::string where = origin;
    if (e.pos()) where += ", line " + std::to_string(e.pos()->line) + ", column " + std::to_string(e.pos()->column);
    return where + ": ";
}

}  // namespace

Template::Template(std::string_view source, std::string origin) : origin_(std::move(origin)) {
    try {
        auto parsed = std::make_shared<ParsedTemplate>();
        parsed->ast = parseTemplate(source);
        parsed_ = std::move(parsed);
    } catch (const TemplateError& e) {
        throw Error(located(origin_, e) + "syntax error: " + e.message());
    }
}

std::string Template::render(const nlohmann::ordered_json& variables, const RenderOptions& options) const {
    if (!variables.is_object()) throw Error("the variables of " + origin_ + " must be a JSON object");
    try {
        std::vector<std::pair<std::string, Value>> context;
        for (const auto& [name, value] : variables.items()) context.emplace_back(name, fromJson(value));
        return Interpreter(options).render(parsed_->ast, context);
    } catch (const TemplateRaised& e) {
        throw Error(located(origin_, e) + "the template raised an error: " + e.message());
    } catch (const TemplateError& e) {
        throw Error(located(origin_, e) + e.message());
    } catch (const std::bad_alloc&) {
        // The limits keep what a template builds far below this; the machine was short of memory already.
        throw Error(origin_ + ": the system ran out of memory while rendering");
    }
}

}  // namespace tandem::text::jinja
