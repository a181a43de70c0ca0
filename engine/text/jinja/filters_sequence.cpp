// The filters over sequences and mappings. Like jinja2, select/reject/map/unique/items hand back
// one-shot iterators, not lists.
#include <algorithm>
#include <map>

#include "text/jinja/attributes.h"
#include "text/jinja/budget.h"
#include "text/jinja/error.h"
#include "text/jinja/filters.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/python_ops.h"
#include "text/jinja/unicode.h"

namespace tandem::text::jinja {
namespace {

const Value kNone = Value::none();

Value iterator(std::vector<Value> items) { return Value::sequence(std::move(items), SequenceKind::Iterator); }

Value ignoreCase(const Value& v) { return v.isString() ? Value::string(unicode::lower(v.str())) : v; }

// jinja2's make_attrgetter, with the ignore_case post-processing most sorting filters apply.
Value keyOf(const Value& item, const Value& attribute, bool caseSensitive) {
    const Value key = attribute.isNone() ? item : lookupAttributePath(item, attribute);
    return caseSensitive ? key : ignoreCase(key);
}

// The first item, taken from iterators as Python's next(iter(x)) does.
std::optional<Value> firstItem(const Value& v) {
    if (v.isSequence(SequenceKind::Iterator)) {
        Sequence& s = v.seq();
        if (s.consumed >= s.items.size()) return std::nullopt;
        return s.items[s.consumed++];
    }
    const std::vector<Value> items = py::iterate(v);
    if (items.empty()) return std::nullopt;
    return items.front();
}

Value fBatch(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "batch", {{"linecount", std::nullopt}, {"fill_with", kNone}});
    const std::int64_t lineCount = args[0].defined().asInt();
    std::vector<Value> batches, current;
    for (Value& item : py::iterate(v)) {
        if (static_cast<std::int64_t>(current.size()) == lineCount) batches.push_back(Value::list(std::exchange(current, {})));
        current.push_back(std::move(item));
    }
    if (!current.empty()) {
        if (!args[1].isNone()) {
            if (lineCount > 0) budget::checkList(static_cast<std::size_t>(lineCount));
            while (static_cast<std::int64_t>(current.size()) < lineCount) current.push_back(args[1]);
        }
        batches.push_back(Value::list(std::move(current)));
    }
    return iterator(std::move(batches));
}

Value fDictsort(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "dictsort", {{"case_sensitive", Value::boolean(false)}, {"by", Value::string("key")},
                                                    {"reverse", Value::boolean(false)}});
    const std::string by = py::str(args[1]);
    if (by != "key" && by != "value") throw TemplateError("You can only sort by either \"key\" or \"value\"");
    v.defined();
    if (!v.isDict()) throw TemplateError("'" + py::typeName(v) + "' object has no attribute 'items'");
    const std::size_t pos = by == "key" ? 0 : 1;
    const bool caseSensitive = py::truthy(args[0]);
    std::vector<Value> items;
    for (const auto& [k, val] : v.dict().entries()) items.push_back(Value::tuple({k, val}));
    auto key = [&](const Value& t) { return caseSensitive ? t.seq().items[pos] : ignoreCase(t.seq().items[pos]); };
    const bool reverse = py::truthy(args[2]);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        budget::chargeSteps(1);
        return reverse ? py::less(key(y), key(x)) : py::less(key(x), key(y));
    });
    return Value::list(std::move(items));
}

Value fFirst(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "first", {});
    if (auto item = firstItem(v)) return *item;
    return Value::undefined("No first item, sequence was empty.");
}

Value fLast(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "last", {});
    if (v.isSequence(SequenceKind::Iterator) || !(v.isSequence() || v.isString() || v.isDict() || v.isUndefined()))
        throw TemplateError("'" + py::typeName(v) + "' object is not reversible");
    const std::vector<Value> items = py::iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value fItems(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "items", {});
    if (v.isUndefined()) return iterator({});
    if (!v.isDict()) throw TemplateError("Can only get item pairs from a mapping.");
    std::vector<Value> items;
    for (const auto& [k, val] : v.dict().entries()) items.push_back(Value::tuple({k, val}));
    return iterator(std::move(items));
}

Value fJoin(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "join", {{"d", Value::string("")}, {"attribute", kNone}});
    const std::string sep = py::str(args[0]);
    std::string out;
    bool first = true;
    for (const Value& item : py::iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += py::str(args[1].isNone() ? item : lookupAttributePath(item, args[1]));
        budget::checkString(out.size());
    }
    return Value::string(std::move(out));
}

Value fLength(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "length", {});
    return Value::integer(static_cast<std::int64_t>(py::len(v)));
}

Value fList(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "list", {});
    return Value::list(py::iterate(v));
}

Value fMap(Interpreter& in, const Value& v, const Arguments& a) {
    if (!py::truthy(v)) return iterator({});
    std::vector<Value> out;
    if (a.positional.empty() && std::any_of(a.keyword.begin(), a.keyword.end(), [](const auto& k) { return k.first == "attribute"; })) {
        Value attribute, fallback;
        for (const auto& [k, val] : a.keyword) {
            if (k == "attribute") attribute = val;
            else if (k == "default") fallback = val;
            else throw TemplateError("Unexpected keyword argument " + py::stringRepr(k));
        }
        for (const Value& item : py::iterate(v)) {
            Value mapped = lookupAttributePath(item, attribute);
            out.push_back(!fallback.isNone() && mapped.isUndefined() ? fallback : mapped);
        }
        return iterator(std::move(out));
    }
    if (a.positional.empty()) throw TemplateError("map requires a filter argument");
    const std::string name = py::str(a.positional[0]);
    Arguments rest{std::vector<Value>(a.positional.begin() + 1, a.positional.end()), a.keyword};
    for (const Value& item : py::iterate(v)) out.push_back(in.applyFilter(name, item, rest));
    return iterator(std::move(out));
}

// select, reject, selectattr, rejectattr.
Value selectOrReject(Interpreter& in, const Value& v, const Arguments& a, bool select, bool byAttribute) {
    if (!py::truthy(v)) return iterator({});
    std::size_t offset = 0;
    Value attribute;
    if (byAttribute) {
        if (a.positional.empty()) throw TemplateError("Missing parameter for attribute name");
        attribute = a.positional[0];
        offset = 1;
    }
    std::optional<std::string> test;
    Arguments testArgs;
    if (a.positional.size() > offset) {
        test = py::str(a.positional[offset]);
        testArgs.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(offset + 1), a.positional.end());
        testArgs.keyword = a.keyword;
    }
    std::vector<Value> out;
    for (const Value& item : py::iterate(v)) {
        const Value subject = byAttribute ? lookupAttributePath(item, attribute) : item;
        const bool passed = test ? in.applyTest(*test, subject, testArgs) : py::truthy(subject);
        if (passed == select) out.push_back(item);
    }
    return iterator(std::move(out));
}

Value fSelect(Interpreter& in, const Value& v, const Arguments& a) { return selectOrReject(in, v, a, true, false); }
Value fReject(Interpreter& in, const Value& v, const Arguments& a) { return selectOrReject(in, v, a, false, false); }
Value fSelectattr(Interpreter& in, const Value& v, const Arguments& a) { return selectOrReject(in, v, a, true, true); }
Value fRejectattr(Interpreter& in, const Value& v, const Arguments& a) { return selectOrReject(in, v, a, false, true); }

Value extreme(const Value& v, const Arguments& a, const char* name, bool wantMax) {
    const auto args = bindArguments(a, name, {{"case_sensitive", Value::boolean(false)}, {"attribute", kNone}});
    const std::vector<Value> items = py::iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    const bool caseSensitive = py::truthy(args[0]);
    std::size_t best = 0;
    Value bestKey = keyOf(items[0], args[1], caseSensitive);
    for (std::size_t i = 1; i < items.size(); ++i) {
        Value key = keyOf(items[i], args[1], caseSensitive);
        if (wantMax ? py::compare(key, bestKey, ">") : py::compare(key, bestKey, "<")) {
            best = i;
            bestKey = std::move(key);
        }
    }
    return items[best];
}

Value fMax(Interpreter&, const Value& v, const Arguments& a) { return extreme(v, a, "max", true); }
Value fMin(Interpreter&, const Value& v, const Arguments& a) { return extreme(v, a, "min", false); }

Value fReverse(Interpreter&, const Value& v, const Arguments& a) {
    bindArguments(a, "reverse", {});
    if (v.isString()) {
        std::u32string text = unicode::decode(v.str());
        std::reverse(text.begin(), text.end());
        return Value::string(unicode::encode(text));
    }
    if (!(v.isSequence() || v.isDict() || v.isUndefined())) throw TemplateError("argument must be iterable");
    std::vector<Value> items = py::iterate(v);
    std::reverse(items.begin(), items.end());
    // reversed() gives an iterator; an iterator itself can only be listed and reversed.
    return v.isSequence(SequenceKind::Iterator) ? Value::list(std::move(items)) : iterator(std::move(items));
}

Value fSort(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "sort", {{"reverse", Value::boolean(false)}, {"case_sensitive", Value::boolean(false)},
                                                {"attribute", kNone}});
    std::vector<Value> items = py::iterate(v);
    const bool caseSensitive = py::truthy(args[1]);
    // jinja2's make_multi_attrgetter: "a,b" sorts by a, then b.
    std::vector<Value> attributes;
    if (args[2].isString()) {
        std::string s = args[2].str();
        for (std::size_t start = 0;;) {
            const std::size_t comma = s.find(',', start);
            attributes.push_back(Value::string(s.substr(start, comma - start)));
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
    } else {
        attributes.push_back(args[2]);
    }
    std::vector<std::pair<Value, Value>> keyed;
    for (Value& item : items) {
        std::vector<Value> key;
        for (const Value& attr : attributes) key.push_back(keyOf(item, attr, caseSensitive));
        keyed.emplace_back(Value::list(std::move(key)), std::move(item));
    }
    const bool reverse = py::truthy(args[0]);
    std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
        budget::chargeSteps(1);
        return reverse ? py::less(y.first, x.first) : py::less(x.first, y.first);
    });
    std::vector<Value> out;
    for (auto& [key, item] : keyed) out.push_back(std::move(item));
    return Value::list(std::move(out));
}

Value fSum(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "sum", {{"attribute", kNone}, {"start", Value::integer(0)}});
    Value total = args[1];
    for (const Value& item : py::iterate(v)) total = py::add(total, args[0].isNone() ? item : lookupAttributePath(item, args[0]));
    return total;
}

Value fUnique(Interpreter&, const Value& v, const Arguments& a) {
    const auto args = bindArguments(a, "unique", {{"case_sensitive", Value::boolean(false)}, {"attribute", kNone}});
    const bool caseSensitive = py::truthy(args[0]);
    std::vector<Value> seen, out;
    for (const Value& item : py::iterate(v)) {
        Value key = keyOf(item, args[1], caseSensitive);
        if (!py::hashable(key)) throw TemplateError("unhashable type: '" + py::typeName(key) + "'");
        budget::chargeSteps(seen.size() / 16);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py::equals(s, key); })) continue;
        seen.push_back(std::move(key));
        out.push_back(item);
    }
    return iterator(std::move(out));
}

const std::map<std::string_view, FilterFn>& sequenceFilters() {
    static const std::map<std::string_view, FilterFn> table = {
        {"batch", fBatch},   {"count", fLength},   {"dictsort", fDictsort}, {"first", fFirst},
        {"items", fItems},   {"join", fJoin},      {"last", fLast},         {"length", fLength},
        {"list", fList},     {"map", fMap},        {"max", fMax},           {"min", fMin},
        {"reject", fReject}, {"rejectattr", fRejectattr}, {"reverse", fReverse}, {"select", fSelect},
        {"selectattr", fSelectattr}, {"sort", fSort}, {"sum", fSum},        {"unique", fUnique},
    };
    return table;
}

}  // namespace

Value lookupAttributePath(const Value& item, const Value& path) {
    if (!path.isString()) return getItem(item, path);
    Value current = item;
    const std::string& s = path.str();
    for (std::size_t start = 0;;) {
        const std::size_t dot = s.find('.', start);
        const std::string part = s.substr(start, dot - start);
        // Python's str.isdigit() parts become integer indexes; longer ones could not index anything.
        const bool digits = !part.empty() && part.size() < 18 &&
                            std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        current = getItem(current, digits ? Value::integer(std::stoll(part)) : Value::string(part));
        if (dot == std::string::npos) return current;
        start = dot + 1;
    }
}

FilterFn findSequenceFilter(std::string_view name) {
    const auto& table = sequenceFilters();
    const auto it = table.find(name);
    return it != table.end() ? it->second : nullptr;
}

}  // namespace tandem::text::jinja
