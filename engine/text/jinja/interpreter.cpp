// Statements: output, if, for (with loop.*, else, filtering, recursion, break/continue), set,
// macros and {% call %}, filter blocks and with.
#include "text/jinja/interpreter.h"

#include "text/jinja/error.h"
#include "text/jinja/filters.h"
#include "text/jinja/objects.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/tests.h"

namespace tandem::text::jinja {
namespace {

class Macro : public Object {
public:
    Macro(const MacroDef& def, ScopePtr closure) : def_(def), closure_(std::move(closure)) {}
    std::string typeName() const override { return "Macro"; }
    std::string typeRepr() const override { return "jinja2.runtime.Macro object"; }
    std::string repr() const override { return "<Macro " + py::stringRepr(def_.name) + ">"; }
    bool callable() const override { return true; }
    Value call(Interpreter& interpreter, const Arguments& args) override { return interpreter.callMacro(def_, closure_, args); }
    void releaseReferences() override { closure_.reset(); }
    std::optional<Value> attribute(std::string_view name) const override {
        if (name == "name") return Value::string(def_.name);
        if (name == "arguments") {
            std::vector<Value> params;
            for (const auto& p : def_.params) params.push_back(Value::string(p));
            return Value::tuple(std::move(params));
        }
        if (name == "catch_kwargs") return Value::boolean(def_.usesKwargs);
        if (name == "catch_varargs") return Value::boolean(def_.usesVarargs);
        if (name == "caller") return Value::boolean(def_.usesCaller);
        return std::nullopt;
    }

private:
    const MacroDef& def_;
    ScopePtr closure_;
};

class LoopContext : public Object {
public:
    using Recurse = std::function<std::string(const Value&)>;
    LoopContext(std::vector<Value> items, int depth, Recurse recurse)
        : items_(std::move(items)), depth_(depth), recurse_(std::move(recurse)) {}
    ~LoopContext() override {
        ValueRelease release;
        for (Value& v : items_) release(v);
        if (lastChanged_) release(*lastChanged_);
    }

    void moveTo(std::size_t index0) { index0_ = index0; }

    std::string typeName() const override { return "LoopContext"; }
    std::string typeRepr() const override { return "jinja2.runtime.LoopContext object"; }
    std::string repr() const override {
        return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(items_.size()) + ">";
    }
    bool callable() const override { return static_cast<bool>(recurse_); }
    Value call(Interpreter&, const Arguments& args) override {
        if (!recurse_) throw TemplateError("Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
        const auto bound = bindArguments(args, "loop", {{"iterable", std::nullopt}});
        return Value::string(recurse_(bound[0]));
    }

    std::optional<Value> attribute(std::string_view name) const override {
        const auto n = static_cast<std::int64_t>(items_.size());
        const auto i = static_cast<std::int64_t>(index0_);
        if (name == "index") return Value::integer(i + 1);
        if (name == "index0") return Value::integer(i);
        if (name == "revindex") return Value::integer(n - i);
        if (name == "revindex0") return Value::integer(n - i - 1);
        if (name == "first") return Value::boolean(i == 0);
        if (name == "last") return Value::boolean(i == n - 1);
        if (name == "length") return Value::integer(n);
        if (name == "depth") return Value::integer(depth_ + 1);
        if (name == "depth0") return Value::integer(depth_);
        if (name == "previtem") return i > 0 ? items_[index0_ - 1] : Value::undefined("there is no previous item");
        if (name == "nextitem") return i + 1 < n ? items_[index0_ + 1] : Value::undefined("there is no next item");
        if (name == "cycle")
            return makeFunction("cycle", [i](Interpreter&, const Arguments& args) {
                if (args.positional.empty()) throw TemplateError("no items for cycling given");
                return args.positional[static_cast<std::size_t>(i) % args.positional.size()];
            });
        if (name == "changed") {
            const LoopContext* self = this;
            return makeFunction("changed", [self](Interpreter&, const Arguments& args) {
                const Value current = Value::list(args.positional);
                if (self->lastChanged_ && py::equals(*self->lastChanged_, current)) return Value::boolean(false);
                self->lastChanged_ = current;
                return Value::boolean(true);
            });
        }
        return std::nullopt;
    }

private:
    std::vector<Value> items_;
    std::size_t index0_ = 0;
    int depth_;
    Recurse recurse_;
    mutable std::optional<Value> lastChanged_;  // what loop.changed() saw last
};

Namespace* asNamespace(const Value* v) { return v && v->isObject() ? dynamic_cast<Namespace*>(&v->obj()) : nullptr; }

// A macro call or loop() recursion in progress.
class CallDepth {
public:
    CallDepth(RenderBudget& budget, const std::string& who) : budget_(budget) { budget_.enterCall(who); }
    ~CallDepth() { budget_.leaveCall(); }
    CallDepth(const CallDepth&) = delete;
    CallDepth& operator=(const CallDepth&) = delete;

private:
    RenderBudget& budget_;
};

}  // namespace

Scope::~Scope() {
    ValueRelease release;
    for (auto& [name, value] : vars_) release(value);
}

const Value* Scope::find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent_.get()) {
        const auto it = s->vars_.find(std::string(name));
        if (it != s->vars_.end()) return &it->second;
    }
    return nullptr;
}

void Scope::declareUndefined(const ScopeNames& names) {
    for (const auto& name : names) vars_[name] = Value::undefined(py::stringRepr(name) + " is undefined");
}

ScopePtr Interpreter::enter(const ScopePtr& parent, const ScopeNames& undefinedNames) {
    auto scope = std::make_shared<Scope>(parent);
    scope->declareUndefined(undefinedNames);
    return scope;
}

Interpreter::Interpreter(RenderOptions options) : options_(std::move(options)), globals_(std::make_shared<Scope>()) {
    addGlobals(*globals_);
}

std::string Interpreter::render(const TemplateAst& ast, const std::vector<std::pair<std::string, Value>>& variables) {
    RenderBudget budget(options_.limits, options_.cancel);
    const ActiveRenderBudget active(budget);
    // Whichever way the render ends (after `root` and `context` are let go): free what cycles hold,
    // and report what the render used.
    struct Finish {
        Interpreter& self;
        RenderBudget& budget;
        ~Finish() {
            self.out_ = nullptr;
            for (const auto& weak : self.cyclic_)
                if (const auto object = weak.lock()) object->releaseReferences();
            self.cyclic_.clear();
            if (self.options_.usage) *self.options_.usage = budget.usage();
            self.budget_ = nullptr;
        }
    } finish{*this, budget};
    budget_ = &budget;
    auto context = std::make_shared<Scope>(globals_);
    for (const auto& [name, value] : variables) context->set(name, value);
    const ScopePtr root = enter(context, ast.undefinedOnEntry);
    std::string out;
    out_ = &out;
    execute(ast.body, root);
    return out;
}

void Interpreter::emit(std::string_view text) {
    out_->append(text);
    budget_->checkString(out_->size(), "its output");
    budget_->built(text.size());
}

Interpreter::Flow Interpreter::execute(const Body& body, const ScopePtr& scope) {
    for (const auto& stmt : body) {
        const Flow flow = executeStatement(*stmt, scope);
        if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
}

Interpreter::Flow Interpreter::executeStatement(const Stmt& stmt, const ScopePtr& scope) {
    try {
        budget_->step();
        switch (stmt.kind) {
        case Stmt::Kind::Text: emit(static_cast<const TextStmt&>(stmt).text); break;
        case Stmt::Kind::Print: emit(py::str(eval(*static_cast<const PrintStmt&>(stmt).expr, scope))); break;
        case Stmt::Kind::If: {
            const auto& s = static_cast<const IfStmt&>(stmt);
            for (const auto& [test, body] : s.branches)
                if (py::truthy(eval(*test, scope))) return execute(body, scope);
            return execute(s.otherwise, scope);
        }
        case Stmt::Kind::For: {
            const auto& s = static_cast<const ForStmt&>(stmt);
            runLoop(s, scope, eval(*s.iterable, scope), 0);
            break;
        }
        case Stmt::Kind::Set: {
            const auto& s = static_cast<const SetStmt&>(stmt);
            assign(s.target, eval(*s.value, scope), scope);
            break;
        }
        case Stmt::Kind::SetBlock: {
            const auto& s = static_cast<const SetBlockStmt&>(stmt);
            Value value = Value::string(capture(s.body, enter(scope, s.bodyUndefined)));
            if (s.filter) value = applyFilterChain(s.filter.get(), value, scope);
            assign(s.target, value, scope);
            break;
        }
        case Stmt::Kind::Macro: {
            const auto& s = static_cast<const MacroStmt&>(stmt);
            auto macro = std::make_shared<Macro>(s.macro, scope);
            track(macro);
            scope->set(s.macro.name, Value::object(std::move(macro)));
            break;
        }
        case Stmt::Kind::CallBlock: {
            const auto& s = static_cast<const CallBlockStmt&>(stmt);
            const auto& call = static_cast<const CallExpr&>(*s.call);
            const Value callee = eval(*call.callee, scope);
            Arguments args = evalArgs(call.args, scope);
            auto caller = std::make_shared<Macro>(s.caller, scope);
            track(caller);
            args.keyword.emplace_back("caller", Value::object(std::move(caller)));
            emit(py::str(this->call(callee, args)));
            break;
        }
        case Stmt::Kind::FilterBlock: {
            const auto& s = static_cast<const FilterBlockStmt&>(stmt);
            const Value body = Value::string(capture(s.body, enter(scope, s.bodyUndefined)));
            emit(py::str(applyFilterChain(s.filter.get(), body, scope)));
            break;
        }
        case Stmt::Kind::With: {
            const auto& s = static_cast<const WithStmt&>(stmt);
            const ScopePtr inner = enter(scope, s.bodyUndefined);
            for (const auto& [target, value] : s.assignments) assign(target, eval(*value, scope), inner);
            return execute(s.body, inner);
        }
        case Stmt::Kind::Break: return Flow::Break;
        case Stmt::Kind::Continue: return Flow::Continue;
        }
    } catch (TemplateError& e) {
        e.locate(stmt.pos);
        throw;
    }
    return Flow::Normal;
}

void Interpreter::runLoop(const ForStmt& loop, const ScopePtr& scope, const Value& iterable, int depth) {
    std::vector<Value> items = py::iterate(iterable);
    if (loop.filter) {
        std::vector<Value> kept;
        for (Value& item : items) {
            auto itemScope = std::make_shared<Scope>(scope);
            assign(loop.target, item, itemScope);
            if (py::truthy(eval(*loop.filter, itemScope))) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        execute(loop.otherwise, enter(scope, loop.otherwiseUndefined));
        return;
    }
    LoopContext::Recurse recurse;
    if (loop.recursive)
        recurse = [this, &loop, scope, depth](const Value& children) { return renderLoop(loop, scope, children, depth + 1); };
    auto context = std::make_shared<LoopContext>(items, depth, std::move(recurse));
    const Value loopValue = Value::object(context);
    for (std::size_t i = 0; i < items.size(); ++i) {
        budget_->step();  // the iteration's own scope, even when its body is empty
        context->moveTo(i);
        const ScopePtr iterationScope = enter(scope, loop.bodyUndefined);
        assign(loop.target, items[i], iterationScope);
        iterationScope->set("loop", loopValue);
        if (execute(loop.body, iterationScope) == Flow::Break) break;
    }
}

std::string Interpreter::renderLoop(const ForStmt& loop, const ScopePtr& scope, const Value& iterable, int depth) {
    const CallDepth call(*budget_, "loop()");
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    try {
        runLoop(loop, scope, iterable, depth);
    } catch (...) {
        out_ = saved;
        throw;
    }
    out_ = saved;
    return buffer;
}

std::string Interpreter::capture(const Body& body, const ScopePtr& scope) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    try {
        execute(body, scope);
    } catch (...) {
        out_ = saved;
        throw;
    }
    out_ = saved;
    return buffer;
}

void Interpreter::assign(const Target& target, const Value& value, const ScopePtr& scope) {
    switch (target.kind) {
    case Target::Kind::Name: scope->set(target.name, value); return;
    case Target::Kind::NamespaceAttr: {
        Namespace* ns = asNamespace(scope->find(target.name));
        if (!ns) throw TemplateError("cannot assign attribute on non-namespace object", target.pos);
        ns->set(target.attribute, value);
        return;
    }
    case Target::Kind::Tuple: {
        const std::vector<Value> items = py::iterate(value.defined());
        const std::size_t want = target.items.size();
        if (items.size() < want)
            throw TemplateError("not enough values to unpack (expected " + std::to_string(want) + ", got " + std::to_string(items.size()) + ")",
                                target.pos);
        if (items.size() > want) throw TemplateError("too many values to unpack (expected " + std::to_string(want) + ")", target.pos);
        for (std::size_t i = 0; i < want; ++i) assign(target.items[i], items[i], scope);
        return;
    }
    }
}

Value Interpreter::call(const Value& callee, const Arguments& args) {
    callee.defined();
    if (!callee.isObject() || !callee.obj().callable()) throw TemplateError("'" + py::typeName(callee) + "' object is not callable");
    return callee.obj().call(*this, args);
}

Value Interpreter::callMacro(const MacroDef& macro, const ScopePtr& closure, const Arguments& args) {
    const CallDepth call(*budget_, "macro '" + macro.name + "'");
    const ScopePtr scope = enter(closure, macro.bodyUndefined);
    const std::size_t n = macro.params.size();
    const std::string who = "macro '" + macro.name + "'";
    if (args.positional.size() > n && !macro.usesVarargs)
        throw TemplateError(who + " takes not more than " + std::to_string(n) + " argument(s)");
    std::vector<bool> bound(n, false);
    for (std::size_t i = 0; i < n && i < args.positional.size(); ++i) {
        scope->set(macro.params[i], args.positional[i]);
        bound[i] = true;
    }
    Dict extraKwargs;
    std::optional<Value> caller;
    for (const auto& [key, value] : args.keyword) {
        std::size_t i = 0;
        while (i < n && macro.params[i] != key) ++i;
        if (i < n) {
            if (bound[i]) throw TemplateError(who + " got multiple values for argument '" + key + "'");
            scope->set(key, value);
            bound[i] = true;
        } else if (key == "caller" && macro.usesCaller) {
            caller = value;
        } else if (macro.usesKwargs) {
            extraKwargs.set(Value::string(key), value);
        } else {
            throw TemplateError(who + " takes no keyword argument '" + key + "'");
        }
    }
    const std::size_t firstDefault = n - macro.defaults.size();
    for (std::size_t i = 0; i < n; ++i) {
        if (bound[i]) continue;
        scope->set(macro.params[i], i >= firstDefault ? eval(*macro.defaults[i - firstDefault], scope)
                                                      : Value::undefined("parameter '" + macro.params[i] + "' was not provided"));
    }
    if (macro.usesVarargs) {
        std::vector<Value> rest;
        for (std::size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
        scope->set("varargs", Value::tuple(std::move(rest)));
    }
    if (macro.usesKwargs) scope->set("kwargs", Value::dict(std::move(extraKwargs)));
    if (macro.usesCaller) scope->set("caller", caller ? *caller : Value::undefined("No caller defined"));
    return Value::string(capture(macro.body, scope));
}

Value Interpreter::applyFilter(std::string_view name, const Value& value, const Arguments& args) {
    const FilterFn filter = findFilter(name);
    if (!filter) throw TemplateError("No filter named '" + std::string(name) + "'.");
    return filter(*this, value, args);
}

bool Interpreter::applyTest(std::string_view name, const Value& value, const Arguments& args) {
    const TestFn test = findTest(name);
    if (!test) throw TemplateError("No test named '" + std::string(name) + "'.");
    return test(*this, value, args);
}

Value Interpreter::applyFilterChain(const Expr* filter, Value input, const ScopePtr& scope) {
    const auto& f = static_cast<const FilterExpr&>(*filter);
    Value operand = f.operand ? applyFilterChain(f.operand.get(), std::move(input), scope) : std::move(input);
    try {
        return applyFilter(f.name, operand, evalArgs(f.args, scope));
    } catch (TemplateError& e) {
        e.locate(f.pos);
        throw;
    }
}

}  // namespace tandem::text::jinja
