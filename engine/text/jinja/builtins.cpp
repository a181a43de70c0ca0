// The global functions of jinja2's sandbox (range, dict, namespace, joiner, cycler) and the two
// Hugging Face adds for chat templates (raise_exception, strftime_now).
#include <ctime>
#include <locale.h>

#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"
#include "text/jinja/python_ops.h"

namespace tandem::text::jinja {
namespace {

// jinja2's sandbox refuses longer ranges.
constexpr std::int64_t kMaxRange = 100000;

std::int64_t rangeArgument(const Value& v) {
    v.defined();
    if (!v.isIntegral()) throw TemplateError("'" + py::typeName(v) + "' object cannot be interpreted as an integer");
    return v.asInt();
}

Value range(Interpreter&, const Arguments& a) {
    if (!a.keyword.empty()) throw TemplateError("range() takes no keyword arguments");
    const auto& p = a.positional;
    if (p.empty() || p.size() > 3) throw TemplateError("range expected at most 3 arguments, got " + std::to_string(p.size()));
    std::int64_t start = 0, stop, step = 1;
    if (p.size() == 1) {
        stop = rangeArgument(p[0]);
    } else {
        start = rangeArgument(p[0]);
        stop = rangeArgument(p[1]);
        if (p.size() == 3) step = rangeArgument(p[2]);
    }
    if (step == 0) throw TemplateError("range() arg 3 must not be zero");
    // CPython's range length, in unsigned arithmetic: stop - start overflows int64 for the widest
    // ranges, and each item start + i * step fits although i * step may not.
    const bool ascending = step > 0;
    const std::uint64_t span = ascending ? (stop > start ? std::uint64_t(stop) - std::uint64_t(start) : 0)
                                         : (start > stop ? std::uint64_t(start) - std::uint64_t(stop) : 0);
    const std::uint64_t stride = ascending ? std::uint64_t(step) : 0 - std::uint64_t(step);
    const std::uint64_t count = span ? (span - 1) / stride + 1 : 0;
    if (count > kMaxRange)
        throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + std::to_string(kMaxRange) + ").");
    std::vector<Value> items;
    items.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i)
        items.push_back(Value::integer(static_cast<std::int64_t>(std::uint64_t(start) + i * std::uint64_t(step))));
    return Value::list(std::move(items));
}

// dict(mapping or pairs, **kwargs), shared by dict() and namespace().
Dict buildDict(const Arguments& a, const char* name) {
    if (a.positional.size() > 1)
        throw TemplateError(std::string(name) + " expected at most 1 argument, got " + std::to_string(a.positional.size()));
    Dict d;
    if (!a.positional.empty()) {
        const Value& source = a.positional[0].defined();
        if (source.isDict()) {
            d = source.dict();
        } else {
            for (const Value& pair : py::iterate(source)) {
                const std::vector<Value> kv = py::iterate(pair);
                if (kv.size() != 2)
                    throw TemplateError("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
                d.set(kv[0], kv[1]);
            }
        }
    }
    for (const auto& [k, v] : a.keyword) d.set(Value::string(k), v);
    return d;
}

class Joiner : public Object {
public:
    explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
    std::string typeName() const override { return "Joiner"; }
    std::string typeRepr() const override { return "jinja2.utils.Joiner object"; }
    std::string repr() const override { return "<jinja2.utils.Joiner object>"; }
    bool callable() const override { return true; }
    Value call(Interpreter&, const Arguments& a) override {
        bindArguments(a, "joiner", {});
        if (!used_) {
            used_ = true;
            return Value::string("");
        }
        return Value::string(sep_);
    }

private:
    std::string sep_;
    bool used_ = false;
};

class Cycler : public Object {
public:
    explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
    ~Cycler() override {
        ValueRelease release;
        for (Value& v : items_) release(v);
    }
    std::string typeName() const override { return "Cycler"; }
    std::string typeRepr() const override { return "jinja2.utils.Cycler object"; }
    std::string repr() const override { return "<jinja2.utils.Cycler object>"; }
    std::optional<Value> attribute(std::string_view name) const override {
        const Cycler* self = this;
        if (name == "current") return items_[pos_];
        if (name == "next")
            return makeFunction("next", [self](Interpreter&, const Arguments& a) {
                bindArguments(a, "cycler.next", {});
                Value v = self->items_[self->pos_];
                self->pos_ = (self->pos_ + 1) % self->items_.size();
                return v;
            });
        if (name == "reset")
            return makeFunction("reset", [self](Interpreter&, const Arguments& a) {
                bindArguments(a, "cycler.reset", {});
                self->pos_ = 0;
                return Value::none();
            });
        return std::nullopt;
    }

private:
    std::vector<Value> items_;
    mutable std::size_t pos_ = 0;  // advanced by next(), which templates reach through attribute()
};

std::tm localNow() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    return tm;
}

}  // namespace

void addGlobals(Scope& globals) {
    globals.set("range", makeFunction("range", range));
    globals.set("dict", makeFunction("dict", [](Interpreter&, const Arguments& a) { return Value::dict(buildDict(a, "dict")); }));
    globals.set("namespace", makeFunction("namespace", [](Interpreter& in, const Arguments& a) {
                    auto ns = std::make_shared<Namespace>();
                    in.track(ns);
                    const Dict attributes = buildDict(a, "namespace");
                    for (const auto& [k, v] : attributes.entries()) ns->set(py::str(k), v);
                    return Value::object(std::move(ns));
                }));
    globals.set("joiner", makeFunction("joiner", [](Interpreter&, const Arguments& a) {
                    const auto args = bindArguments(a, "joiner", {{"sep", Value::string(", ")}});
                    return Value::object(std::make_shared<Joiner>(py::str(args[0])));
                }));
    globals.set("cycler", makeFunction("cycler", [](Interpreter&, const Arguments& a) {
                    if (a.positional.empty()) throw TemplateError("at least one item has to be provided");
                    return Value::object(std::make_shared<Cycler>(a.positional));
                }));
    globals.set("raise_exception", makeFunction("raise_exception", [](Interpreter&, const Arguments& a) -> Value {
                    const auto args = bindArguments(a, "raise_exception", {{"message", std::nullopt}});
                    throw TemplateRaised(py::str(args[0]));
                }));
    globals.set("strftime_now", makeFunction("strftime_now", [](Interpreter& in, const Arguments& a) {
                    const auto args = bindArguments(a, "strftime_now", {{"format", std::nullopt}});
                    if (!args[0].isString()) throw TemplateError("strftime() argument 1 must be str, not " + py::typeName(args[0]));
                    const std::tm tm = in.options().now ? in.options().now() : localNow();
                    budget::checkString(256 + args[0].str().size() * 16);
                    std::string buffer(256 + args[0].str().size() * 16, '\0');
                    // Python leaves LC_TIME at "C"; a Qt application does not, so name the locale.
                    static const locale_t cLocale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
                    const std::size_t n = strftime_l(buffer.data(), buffer.size(), args[0].str().c_str(), &tm, cLocale);
                    buffer.resize(n);
                    return Value::string(std::move(buffer));
                }));
}

}  // namespace tandem::text::jinja
