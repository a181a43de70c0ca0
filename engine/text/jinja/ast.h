#pragma once
// The syntax tree of a template: expressions and statements, each with the source position errors name.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/error.h"
#include "text/jinja/value.h"

namespace tandem::text::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
    enum class Kind {
        Literal, Name, List, Tuple, Dict, GetAttr, GetItem, Slice, Call, Filter, Test,
        Neg, Pos, Not, Add, Sub, Mul, Div, FloorDiv, Mod, Pow, And, Or, Concat, Compare, CondExpr
    };
    explicit Expr(Kind k, SourcePos p) : kind(k), pos(p) {}
    virtual ~Expr() = default;
    Kind kind;
    SourcePos pos;
};

struct LiteralExpr : Expr {
    LiteralExpr(Value v, SourcePos p) : Expr(Kind::Literal, p), value(std::move(v)) {}
    Value value;
};

struct NameExpr : Expr {
    NameExpr(std::string n, SourcePos p) : Expr(Kind::Name, p), name(std::move(n)) {}
    std::string name;
};

// List, Tuple and Concat: their operands in order.
struct ItemsExpr : Expr {
    using Expr::Expr;
    std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
    explicit DictExpr(SourcePos p) : Expr(Kind::Dict, p) {}
    std::vector<std::pair<ExprPtr, ExprPtr>> pairs;
};

struct GetAttrExpr : Expr {
    GetAttrExpr(ExprPtr o, std::string a, SourcePos p) : Expr(Kind::GetAttr, p), object(std::move(o)), attribute(std::move(a)) {}
    ExprPtr object;
    std::string attribute;
};

struct GetItemExpr : Expr {
    GetItemExpr(ExprPtr o, ExprPtr k, SourcePos p) : Expr(Kind::GetItem, p), object(std::move(o)), key(std::move(k)) {}
    ExprPtr object;
    ExprPtr key;  // a SliceExpr for obj[a:b:c]
};

struct SliceExpr : Expr {
    explicit SliceExpr(SourcePos p) : Expr(Kind::Slice, p) {}
    ExprPtr start, stop, step;  // null where omitted
};

struct CallArgs {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keyword;
    ExprPtr splatArgs;    // *args
    ExprPtr splatKwargs;  // **kwargs
};

struct CallExpr : Expr {
    CallExpr(ExprPtr c, SourcePos p) : Expr(Kind::Call, p), callee(std::move(c)) {}
    ExprPtr callee;
    CallArgs args;
};

// `operand | name(args)` and `operand is name(args)`. A filter block's filter has no operand: it
// filters the block's output.
struct FilterExpr : Expr {
    FilterExpr(Kind k, ExprPtr o, std::string n, SourcePos p) : Expr(k, p), operand(std::move(o)), name(std::move(n)) {}
    ExprPtr operand;
    std::string name;
    CallArgs args;
};

// Neg, Pos, Not.
struct UnaryExpr : Expr {
    UnaryExpr(Kind k, ExprPtr o, SourcePos p) : Expr(k, p), operand(std::move(o)) {}
    ExprPtr operand;
};

// Arithmetic, And, Or.
struct BinaryExpr : Expr {
    BinaryExpr(Kind k, ExprPtr l, ExprPtr r, SourcePos p) : Expr(k, p), left(std::move(l)), right(std::move(r)) {}
    ExprPtr left, right;
};

// a < b <= c ...: Python's chained comparison.
struct CompareExpr : Expr {
    enum class Op { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };
    CompareExpr(ExprPtr f, SourcePos p) : Expr(Kind::Compare, p), first(std::move(f)) {}
    ExprPtr first;
    std::vector<std::pair<Op, ExprPtr>> rest;
};

// `then if condition else otherwise`; without else, a false condition gives Undefined.
struct CondExpr : Expr {
    CondExpr(ExprPtr c, ExprPtr t, ExprPtr o, SourcePos p)
        : Expr(Kind::CondExpr, p), condition(std::move(c)), then(std::move(t)), otherwise(std::move(o)) {}
    ExprPtr condition, then, otherwise;
};

// Where `set`, `for` and `with` store values: a name, a tuple of targets, or `namespace.attribute`.
struct Target {
    enum class Kind { Name, Tuple, NamespaceAttr };
    Kind kind = Kind::Name;
    std::string name;
    std::string attribute;
    std::vector<Target> items;
    SourcePos pos;
};

struct Stmt {
    enum class Kind { Text, Print, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Break, Continue };
    explicit Stmt(Kind k, SourcePos p) : kind(k), pos(p) {}
    virtual ~Stmt() = default;
    Kind kind;
    SourcePos pos;
};

struct TextStmt : Stmt {
    TextStmt(std::string t, SourcePos p) : Stmt(Kind::Text, p), text(std::move(t)) {}
    std::string text;
};

struct PrintStmt : Stmt {
    PrintStmt(ExprPtr e, SourcePos p) : Stmt(Kind::Print, p), expr(std::move(e)) {}
    ExprPtr expr;
};

struct IfStmt : Stmt {
    explicit IfStmt(SourcePos p) : Stmt(Kind::If, p) {}
    std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
    Body otherwise;
};

// Names a scope assigns before anything reads them start out undefined in that scope, hiding the
// variables of the same name outside it (jinja2 resolves names when it compiles). scoping.cpp fills
// these lists in.
using ScopeNames = std::vector<std::string>;

struct ForStmt : Stmt {
    explicit ForStmt(SourcePos p) : Stmt(Kind::For, p) {}
    Target target;
    ExprPtr iterable;
    ExprPtr filter;  // `for x in xs if cond`
    bool recursive = false;
    Body body;
    Body otherwise;
    ScopeNames bodyUndefined, otherwiseUndefined;
};

struct SetStmt : Stmt {
    explicit SetStmt(SourcePos p) : Stmt(Kind::Set, p) {}
    Target target;
    ExprPtr value;
};

// {% set x | filters %}...{% endset %}
struct SetBlockStmt : Stmt {
    explicit SetBlockStmt(SourcePos p) : Stmt(Kind::SetBlock, p) {}
    Target target;
    ExprPtr filter;  // innermost operand null; may be null
    Body body;
    ScopeNames bodyUndefined;
};

// A macro, or the body of a {% call %} block (which the called macro sees as `caller`).
struct MacroDef {
    std::string name;
    std::vector<std::string> params;
    std::vector<ExprPtr> defaults;  // for the last defaults.size() params
    Body body;
    bool usesCaller = false, usesVarargs = false, usesKwargs = false;
    ScopeNames bodyUndefined;
};

struct MacroStmt : Stmt {
    explicit MacroStmt(SourcePos p) : Stmt(Kind::Macro, p) {}
    MacroDef macro;
};

struct CallBlockStmt : Stmt {
    explicit CallBlockStmt(SourcePos p) : Stmt(Kind::CallBlock, p) {}
    MacroDef caller;
    ExprPtr call;  // a CallExpr
};

struct FilterBlockStmt : Stmt {
    explicit FilterBlockStmt(SourcePos p) : Stmt(Kind::FilterBlock, p) {}
    ExprPtr filter;  // innermost operand null
    Body body;
    ScopeNames bodyUndefined;
};

struct WithStmt : Stmt {
    explicit WithStmt(SourcePos p) : Stmt(Kind::With, p) {}
    std::vector<std::pair<Target, ExprPtr>> assignments;
    Body body;
    ScopeNames bodyUndefined;
};

// A parsed template: its statements and the names its top level starts out undefined.
struct TemplateAst {
    Body body;
    ScopeNames undefinedOnEntry;
};

}  // namespace tandem::text::jinja
