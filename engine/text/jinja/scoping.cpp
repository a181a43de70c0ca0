// Which names start out undefined in each scope, following jinja2's compile-time symbol analysis
// (its idtracking module): a scope owns every name it assigns; the first mention of a name decides
// its starting value — a read takes the outer value, an assignment starts it as undefined unless an
// enclosing scope owns the name; assignments inside `if` branches never start undefined. Enclosing
// scopes are analysed completely before the scopes nested in them, so a loop body or macro that reads
// a name its enclosing scope assigns only later sees it undefined, as in jinja2.
#include <functional>
#include <map>
#include <set>

#include "text/jinja/parser.h"

namespace tandem::text::jinja {
namespace {

class FrameSymbols {
public:
    explicit FrameSymbols(const FrameSymbols* parent) : parent_(parent) {}

    void param(const std::string& name) {
        stores_.insert(name);
        refs_[name] = false;
    }

    // The names that begin undefined, for the interpreter to set when it enters the scope.
    ScopeNames undefinedNames() const {
        ScopeNames names;
        for (const auto& [name, undefined] : refs_)
            if (undefined) names.push_back(name);
        return names;
    }

    // Analyses the statements of this scope, then the scopes nested in them.
    void analyze(Body& body) {
        visitBody(body);
        for (const auto& nested : nested_) nested(*this);
    }

    void analyzeExpr(const Expr* e) { visitExpr(e); }

private:
    bool owned(const std::string& name) const { return refs_.count(name) || (parent_ && parent_->owned(name)); }

    void load(const std::string& name) {
        if (!owned(name)) refs_[name] = false;
    }

    void store(const std::string& name) {
        stores_.insert(name);
        if (refs_.count(name)) return;
        refs_[name] = !(parent_ && parent_->owned(name));
    }

    void storeTarget(const Target& t) {
        switch (t.kind) {
        case Target::Kind::Name: store(t.name); break;
        case Target::Kind::NamespaceAttr: load(t.name); break;
        case Target::Kind::Tuple:
            for (const auto& item : t.items) storeTarget(item);
            break;
        }
    }

    void visitArgs(const CallArgs& args) {
        for (const auto& a : args.positional) visitExpr(a.get());
        for (const auto& [name, a] : args.keyword) visitExpr(a.get());
        visitExpr(args.splatArgs.get());
        visitExpr(args.splatKwargs.get());
    }

    void visitExpr(const Expr* e) {
        if (!e) return;
        switch (e->kind) {
        case Expr::Kind::Literal: return;
        case Expr::Kind::Name: load(static_cast<const NameExpr*>(e)->name); return;
        case Expr::Kind::List:
        case Expr::Kind::Tuple:
        case Expr::Kind::Concat:
            for (const auto& item : static_cast<const ItemsExpr*>(e)->items) visitExpr(item.get());
            return;
        case Expr::Kind::Dict:
            for (const auto& [k, v] : static_cast<const DictExpr*>(e)->pairs) {
                visitExpr(k.get());
                visitExpr(v.get());
            }
            return;
        case Expr::Kind::GetAttr: visitExpr(static_cast<const GetAttrExpr*>(e)->object.get()); return;
        case Expr::Kind::GetItem:
            visitExpr(static_cast<const GetItemExpr*>(e)->object.get());
            visitExpr(static_cast<const GetItemExpr*>(e)->key.get());
            return;
        case Expr::Kind::Slice: {
            const auto* s = static_cast<const SliceExpr*>(e);
            visitExpr(s->start.get());
            visitExpr(s->stop.get());
            visitExpr(s->step.get());
            return;
        }
        case Expr::Kind::Call:
            visitExpr(static_cast<const CallExpr*>(e)->callee.get());
            visitArgs(static_cast<const CallExpr*>(e)->args);
            return;
        case Expr::Kind::Filter:
        case Expr::Kind::Test:
            visitExpr(static_cast<const FilterExpr*>(e)->operand.get());
            visitArgs(static_cast<const FilterExpr*>(e)->args);
            return;
        case Expr::Kind::Neg:
        case Expr::Kind::Pos:
        case Expr::Kind::Not: visitExpr(static_cast<const UnaryExpr*>(e)->operand.get()); return;
        case Expr::Kind::Compare:
            visitExpr(static_cast<const CompareExpr*>(e)->first.get());
            for (const auto& [op, operand] : static_cast<const CompareExpr*>(e)->rest) visitExpr(operand.get());
            return;
        case Expr::Kind::CondExpr: {
            const auto* c = static_cast<const CondExpr*>(e);
            visitExpr(c->then.get());
            visitExpr(c->condition.get());
            visitExpr(c->otherwise.get());
            return;
        }
        default:
            visitExpr(static_cast<const BinaryExpr*>(e)->left.get());
            visitExpr(static_cast<const BinaryExpr*>(e)->right.get());
        }
    }

    void visitBody(Body& body) {
        for (const auto& s : body) visitStmt(*s);
    }

    // jinja2 visits an if statement's test, then its body, its elifs and its else as separate branches
    // and merges them; a name a branch assigns first is then read from outside until assigned.
    void visitIf(IfStmt& s, std::size_t branch) {
        visitExpr(s.branches[branch].first.get());
        FrameSymbols body = *this, elifs = *this, otherwise = *this;
        body.visitBody(s.branches[branch].second);
        if (branch == 0) {
            for (std::size_t i = 1; i < s.branches.size(); ++i) elifs.visitIf(s, i);
            otherwise.visitBody(s.otherwise);
        }
        std::set<std::string> assigned;
        const auto known = static_cast<std::ptrdiff_t>(nested_.size());
        for (const FrameSymbols* b : {&body, &elifs, &otherwise}) {
            for (const auto& name : b->stores_)
                if (!stores_.count(name)) assigned.insert(name);
            for (const auto& [name, undefined] : b->refs_) refs_[name] = undefined;
            nested_.insert(nested_.end(), b->nested_.begin() + known, b->nested_.end());
        }
        for (const FrameSymbols* b : {&body, &elifs, &otherwise}) stores_.insert(b->stores_.begin(), b->stores_.end());
        for (const auto& name : assigned) refs_[name] = false;
    }

    void visitStmt(Stmt& stmt) {
        switch (stmt.kind) {
        case Stmt::Kind::Print: visitExpr(static_cast<PrintStmt&>(stmt).expr.get()); break;
        case Stmt::Kind::If: visitIf(static_cast<IfStmt&>(stmt), 0); break;
        case Stmt::Kind::For: {
            auto& s = static_cast<ForStmt&>(stmt);
            visitExpr(s.iterable.get());
            nested_.push_back([&s](const FrameSymbols& parent) {
                FrameSymbols body(&parent);
                body.param("loop");
                body.declareTarget(s.target);
                body.analyze(s.body);
                s.bodyUndefined = body.undefinedNames();
                FrameSymbols otherwise(&parent);
                otherwise.analyze(s.otherwise);
                s.otherwiseUndefined = otherwise.undefinedNames();
            });
            break;
        }
        case Stmt::Kind::Set: {
            const auto& s = static_cast<const SetStmt&>(stmt);
            visitExpr(s.value.get());
            storeTarget(s.target);
            break;
        }
        case Stmt::Kind::SetBlock: {
            auto& s = static_cast<SetBlockStmt&>(stmt);
            storeTarget(s.target);
            nested_.push_back([&s](const FrameSymbols& parent) {
                FrameSymbols body(&parent);
                body.analyze(s.body);
                s.bodyUndefined = body.undefinedNames();
            });
            break;
        }
        case Stmt::Kind::Macro: {
            auto& s = static_cast<MacroStmt&>(stmt);
            store(s.macro.name);
            nested_.push_back([&s](const FrameSymbols& parent) { analyzeMacro(s.macro, parent); });
            break;
        }
        case Stmt::Kind::CallBlock: {
            auto& s = static_cast<CallBlockStmt&>(stmt);
            visitExpr(s.call.get());
            nested_.push_back([&s](const FrameSymbols& parent) { analyzeMacro(s.caller, parent); });
            break;
        }
        case Stmt::Kind::FilterBlock: {
            auto& s = static_cast<FilterBlockStmt&>(stmt);
            visitExpr(s.filter.get());
            nested_.push_back([&s](const FrameSymbols& parent) {
                FrameSymbols body(&parent);
                body.analyze(s.body);
                s.bodyUndefined = body.undefinedNames();
            });
            break;
        }
        case Stmt::Kind::With: {
            auto& s = static_cast<WithStmt&>(stmt);
            for (const auto& [target, value] : s.assignments) visitExpr(value.get());
            nested_.push_back([&s](const FrameSymbols& parent) {
                FrameSymbols body(&parent);
                for (const auto& [target, value] : s.assignments) body.declareTarget(target);
                body.analyze(s.body);
                s.bodyUndefined = body.undefinedNames();
            });
            break;
        }
        default: break;
        }
    }

    void declareTarget(const Target& t) {
        if (t.kind == Target::Kind::Name) param(t.name);
        for (const auto& item : t.items) declareTarget(item);
    }

    static void analyzeMacro(MacroDef& m, const FrameSymbols& parent) {
        FrameSymbols body(&parent);
        for (const auto& p : m.params) body.param(p);
        for (const auto& d : m.defaults) body.visitExpr(d.get());
        for (const char* special : {"caller", "varargs", "kwargs"}) body.param(special);
        body.analyze(m.body);
        m.bodyUndefined = body.undefinedNames();
    }

    const FrameSymbols* parent_;
    std::map<std::string, bool> refs_;  // name -> starts undefined
    std::set<std::string> stores_;
    std::vector<std::function<void(const FrameSymbols&)>> nested_;
};

}  // namespace

ScopeNames analyzeScopes(Body& root) {
    FrameSymbols symbols(nullptr);
    symbols.analyze(root);
    return symbols.undefinedNames();
}

}  // namespace tandem::text::jinja
