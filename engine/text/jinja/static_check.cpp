// Unknown filter and test names are template errors before rendering starts, as in jinja2's compiler.
#include "text/jinja/filters.h"
#include "text/jinja/parser.h"
#include "text/jinja/tests.h"

namespace tandem::text::jinja {
namespace {

void checkBody(const Body& body, bool soft);

void checkArgs(const CallArgs& args, bool soft);

// `soft`: inside an if statement or inline if-expression, where jinja2 defers the error to run time.
void checkExpr(const Expr* e, bool soft) {
    if (!e) return;
    switch (e->kind) {
    case Expr::Kind::Literal:
    case Expr::Kind::Name: return;
    case Expr::Kind::List:
    case Expr::Kind::Tuple:
    case Expr::Kind::Concat:
        for (const auto& item : static_cast<const ItemsExpr*>(e)->items) checkExpr(item.get(), soft);
        return;
    case Expr::Kind::Dict:
        for (const auto& [k, v] : static_cast<const DictExpr*>(e)->pairs) {
            checkExpr(k.get(), soft);
            checkExpr(v.get(), soft);
        }
        return;
    case Expr::Kind::GetAttr: checkExpr(static_cast<const GetAttrExpr*>(e)->object.get(), soft); return;
    case Expr::Kind::GetItem: {
        const auto* g = static_cast<const GetItemExpr*>(e);
        checkExpr(g->object.get(), soft);
        checkExpr(g->key.get(), soft);
        return;
    }
    case Expr::Kind::Slice: {
        const auto* s = static_cast<const SliceExpr*>(e);
        checkExpr(s->start.get(), soft);
        checkExpr(s->stop.get(), soft);
        checkExpr(s->step.get(), soft);
        return;
    }
    case Expr::Kind::Call: {
        const auto* c = static_cast<const CallExpr*>(e);
        checkExpr(c->callee.get(), soft);
        checkArgs(c->args, soft);
        return;
    }
    case Expr::Kind::Filter:
    case Expr::Kind::Test: {
        const auto* f = static_cast<const FilterExpr*>(e);
        const bool isFilter = e->kind == Expr::Kind::Filter;
        if (!soft && !(isFilter ? findFilter(f->name) != nullptr : findTest(f->name) != nullptr))
            throw TemplateSyntaxError("No " + std::string(isFilter ? "filter" : "test") + " named '" + f->name + "'.", e->pos);
        checkExpr(f->operand.get(), soft);
        checkArgs(f->args, soft);
        return;
    }
    case Expr::Kind::Neg:
    case Expr::Kind::Pos:
    case Expr::Kind::Not: checkExpr(static_cast<const UnaryExpr*>(e)->operand.get(), soft); return;
    case Expr::Kind::Compare: {
        const auto* c = static_cast<const CompareExpr*>(e);
        checkExpr(c->first.get(), soft);
        for (const auto& [op, operand] : c->rest) checkExpr(operand.get(), soft);
        return;
    }
    case Expr::Kind::CondExpr: {
        const auto* c = static_cast<const CondExpr*>(e);
        checkExpr(c->condition.get(), true);
        checkExpr(c->then.get(), true);
        checkExpr(c->otherwise.get(), true);
        return;
    }
    default: {
        const auto* b = static_cast<const BinaryExpr*>(e);
        checkExpr(b->left.get(), soft);
        checkExpr(b->right.get(), soft);
    }
    }
}

void checkArgs(const CallArgs& args, bool soft) {
    for (const auto& a : args.positional) checkExpr(a.get(), soft);
    for (const auto& [name, a] : args.keyword) checkExpr(a.get(), soft);
    checkExpr(args.splatArgs.get(), soft);
    checkExpr(args.splatKwargs.get(), soft);
}

void checkMacro(const MacroDef& m) {
    for (const auto& d : m.defaults) checkExpr(d.get(), false);
    checkBody(m.body, false);
}

void checkBody(const Body& body, bool soft) {
    for (const auto& s : body) {
        switch (s->kind) {
        case Stmt::Kind::Print: checkExpr(static_cast<const PrintStmt*>(s.get())->expr.get(), soft); break;
        case Stmt::Kind::If: {
            const auto* i = static_cast<const IfStmt*>(s.get());
            for (const auto& [test, branch] : i->branches) {
                checkExpr(test.get(), true);
                checkBody(branch, true);
            }
            checkBody(i->otherwise, true);
            break;
        }
        case Stmt::Kind::For: {
            const auto* f = static_cast<const ForStmt*>(s.get());
            checkExpr(f->iterable.get(), soft);
            checkExpr(f->filter.get(), false);
            checkBody(f->body, false);
            checkBody(f->otherwise, soft);
            break;
        }
        case Stmt::Kind::Set: checkExpr(static_cast<const SetStmt*>(s.get())->value.get(), soft); break;
        case Stmt::Kind::SetBlock: {
            const auto* b = static_cast<const SetBlockStmt*>(s.get());
            checkExpr(b->filter.get(), soft);
            checkBody(b->body, false);
            break;
        }
        case Stmt::Kind::Macro: checkMacro(static_cast<const MacroStmt*>(s.get())->macro); break;
        case Stmt::Kind::CallBlock: {
            const auto* c = static_cast<const CallBlockStmt*>(s.get());
            checkMacro(c->caller);
            checkExpr(c->call.get(), soft);
            break;
        }
        case Stmt::Kind::FilterBlock: {
            const auto* f = static_cast<const FilterBlockStmt*>(s.get());
            checkExpr(f->filter.get(), soft);
            checkBody(f->body, false);
            break;
        }
        case Stmt::Kind::With: {
            const auto* w = static_cast<const WithStmt*>(s.get());
            for (const auto& [target, value] : w->assignments) checkExpr(value.get(), soft);
            checkBody(w->body, false);
            break;
        }
        default: break;
        }
    }
}

}  // namespace

void checkFiltersAndTests(const Body& body) { checkBody(body, false); }

}  // namespace tandem::text::jinja
