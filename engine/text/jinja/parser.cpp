#include "text/jinja/parser.h"

#include <initializer_list>
#include <set>

#include "text/jinja/lexer.h"

namespace tandem::text::jinja {
namespace {

using Names = std::initializer_list<std::string_view>;

// Deeper nesting than this is refused instead of exhausting the stack (jinja2 hits Python's recursion
// limit at a similar depth); real templates nest a few levels.
constexpr int kMaxNesting = 256;
// Likewise for chains like a + b + c or x.a.b.c, which nest to the left.
constexpr int kMaxChain = 1024;

class Parser {
public:
    explicit Parser(std::string_view source) : tokens_(tokenize(source)) {}

    Body parse() { return subparse({}); }

private:
    // ---- token stream -------------------------------------------------------------------------
    const Token& cur() const { return tokens_[i_]; }
    const Token& look() const { return tokens_[std::min(i_ + 1, tokens_.size() - 1)]; }
    const Token& next() {
        const Token& t = tokens_[i_];
        if (i_ + 1 < tokens_.size()) ++i_;
        return t;
    }
    bool isName(std::string_view v) const { return cur().type == TokenType::Name && cur().text == v; }
    bool isOp(std::string_view op) const { return cur().type == TokenType::Operator && cur().text == op; }
    bool skipName(std::string_view v) {
        if (!isName(v)) return false;
        next();
        return true;
    }
    bool skipOp(std::string_view op) {
        if (!isOp(op)) return false;
        next();
        return true;
    }
    [[noreturn]] void fail(const std::string& message, SourcePos pos) const { throw TemplateSyntaxError(message, pos); }
    [[noreturn]] void fail(const std::string& message) const { fail(message, cur().pos); }
    [[noreturn]] void unexpected(const std::string& expected) const {
        if (cur().type == TokenType::Eof) fail("unexpected end of template, expected '" + expected + "'");
        fail("expected token '" + expected + "', got '" + describe(cur()) + "'");
    }
    const Token& expectOp(std::string_view op) {
        if (!isOp(op)) unexpected(std::string(op));
        return next();
    }
    const Token& expectName() {
        if (cur().type != TokenType::Name) unexpected("name");
        return next();
    }
    const Token& expectName(std::string_view v) {
        if (!isName(v)) unexpected(std::string(v));
        return next();
    }
    const Token& expect(TokenType type, const char* what) {
        if (cur().type != type) unexpected(what);
        return next();
    }
    bool atAny(Names names) const {
        for (const auto n : names)
            if (isName(n)) return true;
        return false;
    }

    // ---- statements ---------------------------------------------------------------------------
    Body subparse(Names endTokens) {
        Body body;
        while (true) {
            const Token& t = cur();
            if (t.type == TokenType::Data) {
                body.push_back(std::make_unique<TextStmt>(t.text, t.pos));
                next();
            } else if (t.type == TokenType::VariableBegin) {
                const SourcePos pos = next().pos;
                ExprPtr e = parseTuple(false, true, {}, false);
                expect(TokenType::VariableEnd, "end of print statement");
                body.push_back(std::make_unique<PrintStmt>(std::move(e), pos));
            } else if (t.type == TokenType::BlockBegin) {
                next();
                if (endTokens.size() && atAny(endTokens)) return body;
                parseStatement(body);
                expect(TokenType::BlockEnd, "end of statement block");
            } else {
                if (endTokens.size()) failEof(endTokens);
                return body;
            }
        }
    }

    [[noreturn]] void failEof(Names endTokens) const {
        std::string message = "unexpected end of template.";
        std::string looking;
        for (const auto n : endTokens) looking += (looking.empty() ? "'" : " or '") + std::string(n) + "'";
        message += " Jinja was looking for the following tags: " + looking + ".";
        if (!tagStack_.empty()) message += " The innermost block that needs to be closed is '" + tagStack_.back() + "'.";
        fail(message);
    }

    Body parseStatements(Names endTokens, bool dropNeedle) {
        skipOp(":");
        expect(TokenType::BlockEnd, "end of statement block");
        Body body = subparse(endTokens);
        if (cur().type == TokenType::Eof) failEof(endTokens);
        if (dropNeedle) next();
        return body;
    }

    void lengthen(int& links) const {
        if (++links > kMaxChain) fail("an expression in the template chains more than " + std::to_string(kMaxChain) + " operations");
    }

    // Counts one level of nesting for as long as it lives.
    class NestingGuard {
    public:
        explicit NestingGuard(Parser& p) : p_(p) {
            if (++p_.nesting_ > kMaxNesting) p_.fail("the template nests blocks or expressions more than " + std::to_string(kMaxNesting) + " levels deep");
        }
        ~NestingGuard() { --p_.nesting_; }
        NestingGuard(const NestingGuard&) = delete;
        NestingGuard& operator=(const NestingGuard&) = delete;

    private:
        Parser& p_;
    };

    void parseStatement(Body& out) {
        const NestingGuard guard(*this);
        const Token& t = cur();
        if (t.type != TokenType::Name) fail("tag name expected");
        const std::string tag = t.text;
        for (const char* unsupported : {"block", "extends", "include", "import", "from", "print", "autoescape"})
            if (tag == unsupported)
                fail("the '" + tag + "' tag is not supported in chat templates (there are no other templates to use)");
        tagStack_.push_back(tag);
        if (tag == "for") out.push_back(parseFor());
        else if (tag == "if") out.push_back(parseIf());
        else if (tag == "set") out.push_back(parseSet());
        else if (tag == "macro") out.push_back(parseMacro());
        else if (tag == "call") out.push_back(parseCallBlock());
        else if (tag == "filter") out.push_back(parseFilterBlock());
        else if (tag == "with") out.push_back(parseWith());
        else if (tag == "break" || tag == "continue") out.push_back(parseLoopControl());
        else if (tag == "generation") {
            // Hugging Face's tag marking assistant text for training masks; rendering ignores it.
            next();
            for (auto& s : parseStatements({"endgeneration"}, true)) out.push_back(std::move(s));
        } else {
            tagStack_.pop_back();
            std::string message = "Encountered unknown tag '" + tag + "'.";
            if (!tagStack_.empty()) message += " The innermost block that needs to be closed is '" + tagStack_.back() + "'.";
            fail(message);
        }
        tagStack_.pop_back();
    }

    StmtPtr parseFor() {
        auto s = std::make_unique<ForStmt>(expectName("for").pos);
        s->target = parseAssignTarget({"in"}, false);
        expectName("in");
        s->iterable = parseTuple(false, false, {"recursive"}, false);
        if (skipName("if")) s->filter = parseExpression(true);
        s->recursive = skipName("recursive");
        ++loopDepth_;
        s->body = parseStatements({"endfor", "else"}, false);
        --loopDepth_;
        if (next().text != "endfor") s->otherwise = parseStatements({"endfor"}, true);
        return s;
    }

    StmtPtr parseIf() {
        auto s = std::make_unique<IfStmt>(expectName("if").pos);
        while (true) {
            ExprPtr test = parseTuple(false, false, {}, false);
            Body body = parseStatements({"elif", "else", "endif"}, false);
            s->branches.emplace_back(std::move(test), std::move(body));
            const Token& t = next();
            if (t.text == "elif") continue;
            if (t.text == "else") s->otherwise = parseStatements({"endif"}, true);
            break;
        }
        return s;
    }

    StmtPtr parseSet() {
        const SourcePos pos = next().pos;
        Target target = parseAssignTarget({}, true);
        if (skipOp("=")) {
            auto s = std::make_unique<SetStmt>(pos);
            s->target = std::move(target);
            s->value = parseTuple(false, true, {}, false);
            return s;
        }
        auto s = std::make_unique<SetBlockStmt>(pos);
        s->target = std::move(target);
        if (isOp("|")) s->filter = parseFilter(nullptr, false);
        s->body = parseStatements({"endset"}, true);
        return s;
    }

    void parseSignature(MacroDef& m) {
        expectOp("(");
        while (!isOp(")")) {
            if (!m.params.empty()) expectOp(",");
            m.params.push_back(expectName().text);
            if (skipOp("=")) {
                m.defaults.push_back(parseExpression(true));
            } else if (!m.defaults.empty()) {
                fail("non-default argument follows default argument");
            }
        }
        expectOp(")");
    }

    // Parses a macro or caller body, noting whether it mentions caller, varargs or kwargs, which
    // decides (as in jinja2) whether the macro accepts a caller and extra arguments.
    void parseMacroBody(MacroDef& m, Names endTokens) {
        std::set<std::string> names;
        referencedNames_.push_back(&names);
        const int savedLoops = loopDepth_;
        loopDepth_ = 0;
        m.body = parseStatements(endTokens, true);
        loopDepth_ = savedLoops;
        referencedNames_.pop_back();
        m.usesCaller = names.count("caller") != 0;
        m.usesVarargs = names.count("varargs") != 0;
        m.usesKwargs = names.count("kwargs") != 0;
    }

    StmtPtr parseMacro() {
        auto s = std::make_unique<MacroStmt>(next().pos);
        s->macro.name = expectName().text;
        parseSignature(s->macro);
        parseMacroBody(s->macro, {"endmacro"});
        return s;
    }

    StmtPtr parseCallBlock() {
        auto s = std::make_unique<CallBlockStmt>(next().pos);
        s->caller.name = "caller";
        if (isOp("(")) parseSignature(s->caller);
        const SourcePos callPos = cur().pos;
        s->call = parseExpression(true);
        if (s->call->kind != Expr::Kind::Call) fail("expected call", callPos);
        parseMacroBody(s->caller, {"endcall"});
        return s;
    }

    StmtPtr parseFilterBlock() {
        auto s = std::make_unique<FilterBlockStmt>(next().pos);
        s->filter = parseFilter(nullptr, true);
        s->body = parseStatements({"endfilter"}, true);
        return s;
    }

    StmtPtr parseWith() {
        auto s = std::make_unique<WithStmt>(next().pos);
        while (cur().type != TokenType::BlockEnd) {
            if (!s->assignments.empty()) expectOp(",");
            Target t = parseAssignTarget({}, false);
            expectOp("=");
            s->assignments.emplace_back(std::move(t), parseExpression(true));
        }
        s->body = parseStatements({"endwith"}, true);
        return s;
    }

    StmtPtr parseLoopControl() {
        const Token& t = next();
        if (loopDepth_ == 0) fail("'" + t.text + "' outside of a for loop", t.pos);
        return std::make_unique<Stmt>(t.text == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, t.pos);
    }

    // ---- assignment targets -------------------------------------------------------------------
    bool isTupleEnd(Names extraEnd) const {
        if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || isOp(")")) return true;
        return atAny(extraEnd);
    }

    Target parseTargetPrimary(bool withNamespace) {
        const Token& t = cur();
        Target target;
        target.pos = t.pos;
        if (t.type == TokenType::Name) {
            for (const char* constant : {"true", "false", "none", "True", "False", "None"})
                if (t.text == constant) fail("can't assign to 'const'");
            target.name = next().text;
            if (withNamespace && isOp(".")) {
                next();
                target.kind = Target::Kind::NamespaceAttr;
                target.attribute = expectName().text;
            }
            return target;
        }
        if (skipOp("(")) {
            target = parseAssignTarget({}, withNamespace, true);
            expectOp(")");
            return target;
        }
        fail("can't assign to '" + describe(t) + "'");
    }

    Target parseAssignTarget(Names extraEnd, bool withNamespace, bool explicitParens = false) {
        Target tuple;
        tuple.kind = Target::Kind::Tuple;
        tuple.pos = cur().pos;
        bool isTuple = false;
        while (true) {
            if (!tuple.items.empty()) expectOp(",");
            if (isTupleEnd(extraEnd)) break;
            tuple.items.push_back(parseTargetPrimary(withNamespace));
            if (isOp(",")) {
                isTuple = true;
            } else {
                break;
            }
        }
        if (!isTuple) {
            if (!tuple.items.empty()) return std::move(tuple.items[0]);
            if (!explicitParens) fail("Expected an expression, got '" + describe(cur()) + "'");
        }
        return tuple;
    }

    // ---- expressions --------------------------------------------------------------------------
    ExprPtr parseExpression(bool withCondexpr) { return withCondexpr ? parseCondExpr() : parseOr(); }

    ExprPtr parseCondExpr() {
        ExprPtr expr = parseOr();
        int links = 0;
        while (isName("if")) {
            lengthen(links);
            const SourcePos pos = next().pos;
            ExprPtr condition = parseOr();
            ExprPtr otherwise = skipName("else") ? parseCondExpr() : nullptr;
            expr = std::make_unique<CondExpr>(std::move(condition), std::move(expr), std::move(otherwise), pos);
        }
        return expr;
    }

    ExprPtr parseOr() {
        ExprPtr left = parseAnd();
        int links = 0;
        while (isName("or")) {
            lengthen(links);
            const SourcePos pos = next().pos;
            left = std::make_unique<BinaryExpr>(Expr::Kind::Or, std::move(left), parseAnd(), pos);
        }
        return left;
    }

    ExprPtr parseAnd() {
        ExprPtr left = parseNot();
        int links = 0;
        while (isName("and")) {
            lengthen(links);
            const SourcePos pos = next().pos;
            left = std::make_unique<BinaryExpr>(Expr::Kind::And, std::move(left), parseNot(), pos);
        }
        return left;
    }

    ExprPtr parseNot() {
        if (isName("not")) {
            const NestingGuard guard(*this);
            const SourcePos pos = next().pos;
            return std::make_unique<UnaryExpr>(Expr::Kind::Not, parseNot(), pos);
        }
        return parseCompare();
    }

    ExprPtr parseCompare() {
        const SourcePos pos = cur().pos;
        ExprPtr first = parseMath1();
        std::unique_ptr<CompareExpr> cmp;
        while (true) {
            CompareExpr::Op op;
            if (cur().type == TokenType::Operator && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                                      cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
                const std::string& t = cur().text;
                op = t == "==" ? CompareExpr::Op::Eq : t == "!=" ? CompareExpr::Op::Ne : t == "<" ? CompareExpr::Op::Lt
                   : t == "<=" ? CompareExpr::Op::Le : t == ">" ? CompareExpr::Op::Gt : CompareExpr::Op::Ge;
                next();
            } else if (isName("in")) {
                op = CompareExpr::Op::In;
                next();
            } else if (isName("not") && look().type == TokenType::Name && look().text == "in") {
                op = CompareExpr::Op::NotIn;
                next();
                next();
            } else {
                break;
            }
            if (!cmp) cmp = std::make_unique<CompareExpr>(std::move(first), pos);
            cmp->rest.emplace_back(op, parseMath1());
        }
        if (cmp) return cmp;
        return first;
    }

    ExprPtr parseMath1() {
        ExprPtr left = parseConcat();
        int links = 0;
        while (isOp("+") || isOp("-")) {
            lengthen(links);
            const Token& t = next();
            left = std::make_unique<BinaryExpr>(t.text == "+" ? Expr::Kind::Add : Expr::Kind::Sub, std::move(left), parseConcat(), t.pos);
        }
        return left;
    }

    ExprPtr parseConcat() {
        ExprPtr first = parseMath2();
        if (!isOp("~")) return first;
        auto concat = std::make_unique<ItemsExpr>(Expr::Kind::Concat, cur().pos);
        concat->items.push_back(std::move(first));
        while (skipOp("~")) concat->items.push_back(parseMath2());
        return concat;
    }

    ExprPtr parseMath2() {
        ExprPtr left = parsePow();
        int links = 0;
        while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
            lengthen(links);
            const Token& t = next();
            const Expr::Kind k = t.text == "*" ? Expr::Kind::Mul : t.text == "/" ? Expr::Kind::Div
                               : t.text == "//" ? Expr::Kind::FloorDiv : Expr::Kind::Mod;
            left = std::make_unique<BinaryExpr>(k, std::move(left), parsePow(), t.pos);
        }
        return left;
    }

    ExprPtr parsePow() {
        ExprPtr left = parseUnary(true);
        int links = 0;
        while (isOp("**")) {
            lengthen(links);
            const SourcePos pos = next().pos;
            left = std::make_unique<BinaryExpr>(Expr::Kind::Pow, std::move(left), parseUnary(true), pos);
        }
        return left;
    }

    ExprPtr parseUnary(bool withFilter) {
        const NestingGuard guard(*this);
        ExprPtr node;
        if (isOp("-") || isOp("+")) {
            const Token& t = next();
            node = std::make_unique<UnaryExpr>(t.text == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, parseUnary(false), t.pos);
        } else {
            node = parsePrimary();
        }
        node = parsePostfix(std::move(node));
        if (withFilter) node = parseFilterExpr(std::move(node));
        return node;
    }

    ExprPtr parsePrimary() {
        const Token& t = cur();
        switch (t.type) {
        case TokenType::Name: {
            next();
            if (t.text == "true" || t.text == "True") return std::make_unique<LiteralExpr>(Value::boolean(true), t.pos);
            if (t.text == "false" || t.text == "False") return std::make_unique<LiteralExpr>(Value::boolean(false), t.pos);
            if (t.text == "none" || t.text == "None") return std::make_unique<LiteralExpr>(Value::none(), t.pos);
            for (auto* names : referencedNames_) names->insert(t.text);
            return std::make_unique<NameExpr>(t.text, t.pos);
        }
        case TokenType::String: {
            const SourcePos pos = t.pos;
            std::string s;
            while (cur().type == TokenType::String) s += next().text;  // adjacent literals concatenate
            return std::make_unique<LiteralExpr>(Value::string(std::move(s)), pos);
        }
        case TokenType::Integer: next(); return std::make_unique<LiteralExpr>(Value::integer(t.integer), t.pos);
        case TokenType::Float: next(); return std::make_unique<LiteralExpr>(Value::number(t.number), t.pos);
        case TokenType::Operator:
            if (t.text == "(") {
                next();
                ExprPtr e = parseTuple(false, true, {}, true);
                expectOp(")");
                return e;
            }
            if (t.text == "[") return parseList();
            if (t.text == "{") return parseDict();
            break;
        default: break;
        }
        if (t.type == TokenType::Eof) fail("unexpected end of template");
        fail("unexpected '" + describe(t) + "'");
    }

    ExprPtr parseTuple(bool, bool withCondexpr, Names extraEnd, bool explicitParens) {
        const SourcePos pos = cur().pos;
        std::vector<ExprPtr> items;
        bool isTuple = false;
        while (true) {
            if (!items.empty()) expectOp(",");
            if (isTupleEnd(extraEnd)) break;
            items.push_back(parseExpression(withCondexpr));
            if (isOp(",")) {
                isTuple = true;
            } else {
                break;
            }
        }
        if (!isTuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicitParens) fail("Expected an expression, got '" + describe(cur()) + "'");
        }
        auto tuple = std::make_unique<ItemsExpr>(Expr::Kind::Tuple, pos);
        tuple->items = std::move(items);
        return tuple;
    }

    ExprPtr parseList() {
        auto list = std::make_unique<ItemsExpr>(Expr::Kind::List, expectOp("[").pos);
        while (!isOp("]")) {
            if (!list->items.empty()) expectOp(",");
            if (isOp("]")) break;
            list->items.push_back(parseExpression(true));
        }
        expectOp("]");
        return list;
    }

    ExprPtr parseDict() {
        auto dict = std::make_unique<DictExpr>(expectOp("{").pos);
        while (!isOp("}")) {
            if (!dict->pairs.empty()) expectOp(",");
            if (isOp("}")) break;
            ExprPtr key = parseExpression(true);
            expectOp(":");
            dict->pairs.emplace_back(std::move(key), parseExpression(true));
        }
        expectOp("}");
        return dict;
    }

    ExprPtr parsePostfix(ExprPtr node) {
        int links = 0;
        while (true) {
            lengthen(links);
            if (isOp(".") || isOp("[")) {
                node = parseSubscript(std::move(node));
            } else if (isOp("(")) {
                node = parseCall(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr parseFilterExpr(ExprPtr node) {
        int links = 0;
        while (true) {
            lengthen(links);
            if (isOp("|")) {
                node = parseFilter(std::move(node), false);
            } else if (isName("is")) {
                node = parseTest(std::move(node));
            } else if (isOp("(")) {
                node = parseCall(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr parseSubscript(ExprPtr node) {
        const Token& t = next();
        if (t.text == ".") {
            const Token& attr = next();
            if (attr.type == TokenType::Name) return std::make_unique<GetAttrExpr>(std::move(node), attr.text, t.pos);
            if (attr.type != TokenType::Integer) fail("expected name or number", attr.pos);
            return std::make_unique<GetItemExpr>(std::move(node), std::make_unique<LiteralExpr>(Value::integer(attr.integer), attr.pos),
                                                 t.pos);
        }
        std::vector<ExprPtr> args;
        while (!isOp("]")) {
            if (!args.empty()) expectOp(",");
            args.push_back(parseSubscribed());
        }
        expectOp("]");
        ExprPtr key;
        if (args.size() == 1) {
            key = std::move(args[0]);
        } else {
            auto tuple = std::make_unique<ItemsExpr>(Expr::Kind::Tuple, t.pos);
            tuple->items = std::move(args);
            key = std::move(tuple);
        }
        return std::make_unique<GetItemExpr>(std::move(node), std::move(key), t.pos);
    }

    ExprPtr parseSubscribed() {
        const SourcePos pos = cur().pos;
        ExprPtr start;
        if (!isOp(":")) {
            start = parseExpression(true);
            if (!isOp(":")) return start;
        }
        next();  // ':'
        auto slice = std::make_unique<SliceExpr>(pos);
        slice->start = std::move(start);
        if (!isOp(":") && !isOp("]") && !isOp(",")) slice->stop = parseExpression(true);
        if (skipOp(":") && !isOp("]") && !isOp(",")) slice->step = parseExpression(true);
        return slice;
    }

    CallArgs parseCallArgs() {
        const SourcePos pos = expectOp("(").pos;
        CallArgs args;
        auto ensure = [&](bool ok) {
            if (!ok) fail("invalid syntax for function call expression", pos);
        };
        bool requireComma = false;
        while (!isOp(")")) {
            if (requireComma) {
                expectOp(",");
                if (isOp(")")) break;  // trailing comma
            }
            if (skipOp("*")) {
                ensure(!args.splatArgs && !args.splatKwargs);
                args.splatArgs = parseExpression(true);
            } else if (skipOp("**")) {
                ensure(!args.splatKwargs);
                args.splatKwargs = parseExpression(true);
            } else if (cur().type == TokenType::Name && look().type == TokenType::Operator && look().text == "=") {
                ensure(!args.splatKwargs);
                std::string key = next().text;
                next();
                args.keyword.emplace_back(std::move(key), parseExpression(true));
            } else {
                ensure(!args.splatArgs && !args.splatKwargs && args.keyword.empty());
                args.positional.push_back(parseExpression(true));
            }
            requireComma = true;
        }
        expectOp(")");
        return args;
    }

    // A call's errors point at the start of what is called, e.g. raise_exception(...).
    ExprPtr parseCall(ExprPtr callee) {
        const SourcePos pos = startOf(*callee);
        auto call = std::make_unique<CallExpr>(std::move(callee), pos);
        call->args = parseCallArgs();
        return call;
    }

    static SourcePos startOf(const Expr& e) {
        switch (e.kind) {
        case Expr::Kind::GetAttr: return startOf(*static_cast<const GetAttrExpr&>(e).object);
        case Expr::Kind::GetItem: return startOf(*static_cast<const GetItemExpr&>(e).object);
        case Expr::Kind::Call: return startOf(*static_cast<const CallExpr&>(e).callee);
        default: return e.pos;
        }
    }

    std::string parseDottedName() {
        std::string name = expectName().text;
        while (skipOp(".")) name += "." + expectName().text;
        return name;
    }

    ExprPtr parseFilter(ExprPtr node, bool startInline) {
        int links = 0;
        while (isOp("|") || startInline) {
            lengthen(links);
            if (!startInline) next();
            const SourcePos pos = cur().pos;
            auto filter = std::make_unique<FilterExpr>(Expr::Kind::Filter, std::move(node), parseDottedName(), pos);
            if (isOp("(")) filter->args = parseCallArgs();
            node = std::move(filter);
            startInline = false;
        }
        return node;
    }

    ExprPtr parseTest(ExprPtr node) {
        const SourcePos isPos = next().pos;
        const bool negated = skipName("not");
        const SourcePos pos = cur().pos;
        auto test = std::make_unique<FilterExpr>(Expr::Kind::Test, std::move(node), parseDottedName(), pos);
        const TokenType type = cur().type;
        if (isOp("(")) {
            test->args = parseCallArgs();
        } else if ((type == TokenType::Name || type == TokenType::String || type == TokenType::Integer || type == TokenType::Float ||
                    isOp("[") || isOp("{")) &&
                   !isName("else") && !isName("or") && !isName("and")) {
            if (isName("is")) fail("You cannot chain multiple tests with is");
            test->args.positional.push_back(parsePostfix(parsePrimary()));
        }
        if (negated) return std::make_unique<UnaryExpr>(Expr::Kind::Not, std::move(test), isPos);
        return test;
    }

    std::vector<Token> tokens_;
    std::size_t i_ = 0;
    std::vector<std::string> tagStack_;
    std::vector<std::set<std::string>*> referencedNames_;
    int loopDepth_ = 0;
    int nesting_ = 0;
};

}  // namespace

TemplateAst parseTemplate(std::string_view source) {
    TemplateAst ast;
    ast.body = Parser(source).parse();
    checkFiltersAndTests(ast.body);
    ast.undefinedOnEntry = analyzeScopes(ast.body);
    return ast;
}

}  // namespace tandem::text::jinja
