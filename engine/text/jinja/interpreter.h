#pragma once
// Renders a parsed template. Scoping follows jinja2: `if` shares its scope, each loop iteration, macro
// call and `with` block gets a fresh one that reads through to the enclosing scopes, and a macro sees
// the scope it was defined in as it is when the macro is called.
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/budget.h"
#include "text/jinja/render_options.h"
#include "text/jinja/value.h"

namespace tandem::text::jinja {

class Scope {
public:
    explicit Scope(std::shared_ptr<const Scope> parent = nullptr) : parent_(std::move(parent)) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope();
    const Value* find(std::string_view name) const;
    void set(const std::string& name, Value value) { vars_[name] = std::move(value); }
    // Enters the scope's own names that start out undefined (see ScopeNames).
    void declareUndefined(const ScopeNames& names);

private:
    std::shared_ptr<const Scope> parent_;
    std::unordered_map<std::string, Value> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
public:
    explicit Interpreter(RenderOptions options);

    std::string render(const TemplateAst& ast, const std::vector<std::pair<std::string, Value>>& variables);

    // Services for filters, tests, methods and the objects below.
    Value call(const Value& callee, const Arguments& args);
    Value applyFilter(std::string_view name, const Value& value, const Arguments& args);
    bool applyTest(std::string_view name, const Value& value, const Arguments& args);
    const RenderOptions& options() const { return options_; }
    // Keeps `object` in mind until the end of the render, where it releases its references (see
    // Object::releaseReferences); for the objects that can take part in a cycle.
    void track(const std::shared_ptr<Object>& object) { cyclic_.push_back(object); }

    Value callMacro(const MacroDef& macro, const ScopePtr& closure, const Arguments& args);
    std::string renderLoop(const ForStmt& loop, const ScopePtr& scope, const Value& iterable, int depth);

private:
    enum class Flow { Normal, Break, Continue };

    Flow execute(const Body& body, const ScopePtr& scope);
    // Appends to the output (or to the block being captured), within the size limit.
    void emit(std::string_view text);
    Flow executeStatement(const Stmt& stmt, const ScopePtr& scope);
    void runLoop(const ForStmt& loop, const ScopePtr& scope, const Value& iterable, int depth);
    std::string capture(const Body& body, const ScopePtr& scope);
    // A scope nested in `parent`, with its undefined-at-entry names in place.
    static ScopePtr enter(const ScopePtr& parent, const ScopeNames& undefinedNames);
    void assign(const Target& target, const Value& value, const ScopePtr& scope);
    Value applyFilterChain(const Expr* filter, Value input, const ScopePtr& scope);

    Value eval(const Expr& e, const ScopePtr& scope);
    Value evalExpr(const Expr& e, const ScopePtr& scope);
    Value evalCompare(const CompareExpr& e, const ScopePtr& scope);
    Value evalFilterOrTest(const FilterExpr& e, const ScopePtr& scope);
    Arguments evalArgs(const CallArgs& args, const ScopePtr& scope);

    RenderOptions options_;
    RenderBudget* budget_ = nullptr;  // the render's, while one is in progress
    ScopePtr globals_;
    std::string* out_ = nullptr;
    std::vector<std::weak_ptr<Object>> cyclic_;
};

// The global functions every template sees: range, dict, namespace, joiner, cycler, and Hugging Face's
// raise_exception and strftime_now.
void addGlobals(Scope& globals);

}  // namespace tandem::text::jinja
