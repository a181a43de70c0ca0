// Expressions. Every error gets the position of the innermost expression that raised it.
#include "text/jinja/attributes.h"
#include "text/jinja/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/python_ops.h"

namespace tandem::text::jinja {

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
    try {
        budget_->step();
        return evalExpr(e, scope);
    } catch (TemplateError& err) {
        err.locate(e.pos);
        throw;
    }
}

Value Interpreter::evalExpr(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
    case Expr::Kind::Literal: return static_cast<const LiteralExpr&>(e).value;
    case Expr::Kind::Name: {
        const auto& name = static_cast<const NameExpr&>(e).name;
        if (const Value* v = scope->find(name)) return *v;
        return Value::undefined(py::stringRepr(name) + " is undefined");
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
        std::vector<Value> items;
        for (const auto& item : static_cast<const ItemsExpr&>(e).items) items.push_back(eval(*item, scope));
        return e.kind == Expr::Kind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case Expr::Kind::Dict: {
        Dict d;
        for (const auto& [k, v] : static_cast<const DictExpr&>(e).pairs) {
            Value key = eval(*k, scope);
            d.set(std::move(key), eval(*v, scope));
        }
        return Value::dict(std::move(d));
    }
    case Expr::Kind::GetAttr: {
        const auto& g = static_cast<const GetAttrExpr&>(e);
        return getAttr(eval(*g.object, scope), g.attribute);
    }
    case Expr::Kind::GetItem: {
        const auto& g = static_cast<const GetItemExpr&>(e);
        const Value object = eval(*g.object, scope);
        if (g.key->kind == Expr::Kind::Slice) {
            const auto& s = static_cast<const SliceExpr&>(*g.key);
            auto part = [&](const ExprPtr& p) { return p ? std::optional<Value>(eval(*p, scope)) : std::nullopt; };
            const auto start = part(s.start), stop = part(s.stop), step = part(s.step);
            return getSlice(object, start, stop, step);
        }
        return getItem(object, eval(*g.key, scope));
    }
    case Expr::Kind::Call: {
        const auto& c = static_cast<const CallExpr&>(e);
        const Value callee = eval(*c.callee, scope);
        return call(callee, evalArgs(c.args, scope));
    }
    case Expr::Kind::Filter:
    case Expr::Kind::Test: return evalFilterOrTest(static_cast<const FilterExpr&>(e), scope);
    case Expr::Kind::Neg: return py::neg(eval(*static_cast<const UnaryExpr&>(e).operand, scope));
    case Expr::Kind::Pos: return py::pos(eval(*static_cast<const UnaryExpr&>(e).operand, scope));
    case Expr::Kind::Not: return Value::boolean(!py::truthy(eval(*static_cast<const UnaryExpr&>(e).operand, scope)));
    case Expr::Kind::And:
    case Expr::Kind::Or: {
        const auto& b = static_cast<const BinaryExpr&>(e);
        Value left = eval(*b.left, scope);
        if (py::truthy(left) == (e.kind == Expr::Kind::Or)) return left;
        return eval(*b.right, scope);
    }
    case Expr::Kind::Concat: {
        std::string out;
        for (const auto& item : static_cast<const ItemsExpr&>(e).items) {
            out += py::str(eval(*item, scope));
            budget_->checkString(out.size());
        }
        return Value::string(std::move(out));
    }
    case Expr::Kind::Compare: return evalCompare(static_cast<const CompareExpr&>(e), scope);
    case Expr::Kind::CondExpr: {
        const auto& c = static_cast<const CondExpr&>(e);
        if (py::truthy(eval(*c.condition, scope))) return eval(*c.then, scope);
        if (c.otherwise) return eval(*c.otherwise, scope);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.pos.line) +
                                " evaluated to false and no else section was defined.");
    }
    case Expr::Kind::Slice: throw TemplateError("a slice is only valid inside [...]");
    default: break;
    }
    const auto& b = static_cast<const BinaryExpr&>(e);
    const Value left = eval(*b.left, scope);
    const Value right = eval(*b.right, scope);
    switch (e.kind) {
    case Expr::Kind::Add: return py::add(left, right);
    case Expr::Kind::Sub: return py::sub(left, right);
    case Expr::Kind::Mul: return py::mul(left, right);
    case Expr::Kind::Div: return py::truediv(left, right);
    case Expr::Kind::FloorDiv: return py::floordiv(left, right);
    case Expr::Kind::Mod: return py::mod(left, right);
    default: return py::pow(left, right);
    }
}

Value Interpreter::evalCompare(const CompareExpr& e, const ScopePtr& scope) {
    Value left = eval(*e.first, scope);
    for (const auto& [op, operand] : e.rest) {
        Value right = eval(*operand, scope);
        bool result = false;
        switch (op) {
        case CompareExpr::Op::Eq: result = py::equals(left, right); break;
        case CompareExpr::Op::Ne: result = !py::equals(left, right); break;
        case CompareExpr::Op::Lt: result = py::compare(left, right, "<"); break;
        case CompareExpr::Op::Le: result = py::compare(left, right, "<="); break;
        case CompareExpr::Op::Gt: result = py::compare(left, right, ">"); break;
        case CompareExpr::Op::Ge: result = py::compare(left, right, ">="); break;
        case CompareExpr::Op::In: result = py::contains(right, left); break;
        case CompareExpr::Op::NotIn: result = !py::contains(right, left); break;
        }
        if (!result) return Value::boolean(false);
        left = std::move(right);
    }
    return Value::boolean(true);
}

Value Interpreter::evalFilterOrTest(const FilterExpr& e, const ScopePtr& scope) {
    const Value operand = eval(*e.operand, scope);
    const Arguments args = evalArgs(e.args, scope);
    if (e.kind == Expr::Kind::Filter) return applyFilter(e.name, operand, args);
    return Value::boolean(applyTest(e.name, operand, args));
}

Arguments Interpreter::evalArgs(const CallArgs& callArgs, const ScopePtr& scope) {
    Arguments args;
    for (const auto& p : callArgs.positional) args.positional.push_back(eval(*p, scope));
    for (const auto& [name, value] : callArgs.keyword) args.keyword.emplace_back(name, eval(*value, scope));
    if (callArgs.splatArgs)
        for (Value& v : py::iterate(eval(*callArgs.splatArgs, scope).defined())) args.positional.push_back(std::move(v));
    if (callArgs.splatKwargs) {
        const Value kw = eval(*callArgs.splatKwargs, scope);
        if (!kw.isDict()) throw TemplateError("argument after ** must be a mapping, not " + py::typeName(kw));
        for (const auto& [k, v] : kw.dict().entries()) {
            if (!k.isString()) throw TemplateError("keywords must be strings");
            args.keyword.emplace_back(k.str(), v);
        }
    }
    return args;
}

}  // namespace tandem::text::jinja
