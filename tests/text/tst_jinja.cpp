// The Jinja interpreter against Python's jinja2: every language feature chat templates use, each
// with its own group of cases in data/jinja_cases.json, plus the errors a template author sees, and
// hostile templates: integer overflow, runaway recursion, work and memory without end, cancelling.
#include <QTest>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "tandem/error.h"
#include "text/jinja/template.h"
#include "text_test_data.h"

using tandem::text::jinja::RenderLimits;
using tandem::text::jinja::RenderOptions;
using tandem::text::jinja::RenderUsage;
using tandem::text::jinja::Template;
using Json = nlohmann::ordered_json;

namespace {

RenderOptions fixedClock() {
    RenderOptions options;
    options.now = tandem::test::referenceNow;
    return options;
}

// Renders `source`; the error message instead when parsing or rendering fails.
struct Outcome {
    bool ok = false;
    std::string text;
};

Outcome runWith(const std::string& source, const RenderOptions& options, const Json& variables = Json::object()) {
    try {
        return {true, Template(source).render(variables, options)};
    } catch (const tandem::Error& e) {
        return {false, e.what()};
    }
}

Outcome run(const std::string& source, const Json& variables = Json::object()) { return runWith(source, fixedClock(), variables); }

// `source` renders to `text`, as jinja2 renders it.
#define CHECK_RENDERS(source, expected)                                                  \
    do {                                                                                 \
        const std::string source_ = (source);                                            \
        const Outcome got_ = run(source_);                                               \
        QVERIFY2(got_.ok, (source_ + "\nfailed: " + got_.text).c_str());                 \
        QCOMPARE(QString::fromStdString(got_.text), QString::fromStdString(expected));   \
    } while (false)

// `outcome` is an error whose message contains `fragment`.
#define CHECK_FAILS_WITH(outcome, fragment)                                                                      \
    do {                                                                                                         \
        const Outcome got_ = (outcome);                                                                          \
        QVERIFY2(!got_.ok, ("rendered '" + got_.text.substr(0, 200) + "' instead of failing").c_str());         \
        QVERIFY2(got_.text.find(fragment) != std::string::npos, got_.text.c_str());                              \
    } while (false)

// A template that would run for hours and builds nothing.
const char* kEndless = "{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}";

const Json& cases() {
    static const Json all = tandem::test::readTextTestJson("jinja_cases.json");
    return all;
}

}  // namespace

class JinjaTest : public QObject {
    Q_OBJECT

private:
    // Every case of one feature group renders as jinja2 rendered it, or fails where jinja2 failed.
    static void checkFeature(const char* feature) {
        int checked = 0;
        for (const auto& c : cases()) {
            if (c["feature"] != feature) continue;
            ++checked;
            const std::string source = c["template"];
            const Outcome got = run(source, c["variables"]);
            const QByteArray where = QByteArray("template: ") + source.c_str();
            if (c.contains("text")) {
                QVERIFY2(got.ok, qPrintable(where + "\nfailed: " + QByteArray(got.text.c_str())));
                QCOMPARE(QString::fromStdString(got.text), QString::fromStdString(c["text"].get<std::string>()));
                continue;
            }
            QVERIFY2(!got.ok, qPrintable(where + "\nrendered '" + QByteArray(got.text.c_str()) + "' where jinja2 failed"));
            // Syntax errors are worded our own way; runtime errors carry Python's message.
            const std::string type = c["error_type"];
            const bool syntax = type == "TemplateSyntaxError" || type == "TemplateAssertionError" || type == "SyntaxError";
            const std::string expected = syntax ? "syntax error" : c["error"].get<std::string>();
            QVERIFY2(got.text.find(expected) != std::string::npos,
                     qPrintable(where + "\nerror '" + QByteArray(got.text.c_str()) + "' lacks '" + expected.c_str() + "'"));
        }
        QVERIFY2(checked > 0, feature);
    }

private slots:
    void everyFeatureGroupHasCases() {
        std::set<std::string> groups;
        for (const auto& c : cases()) groups.insert(c["feature"]);
        QCOMPARE(groups.size(), std::size_t(32));
    }

    void ifElifElse() { checkFeature("if_elif_else"); }
    void forLoopVariables() { checkFeature("for_loop_variables"); }
    void forElseAndFilter() { checkFeature("for_else_and_filter"); }
    void breakContinue() { checkFeature("break_continue"); }
    void generationTag() { checkFeature("generation_tag"); }
    void setAndScoping() { checkFeature("set_and_scoping"); }
    void blockSet() { checkFeature("block_set"); }
    void namespaces() { checkFeature("namespace"); }
    void macros() { checkFeature("macros"); }
    void whitespaceControl() { checkFeature("whitespace_control"); }
    void comments() { checkFeature("comments"); }
    void filterTojson() { checkFeature("filter_tojson"); }
    void filterString() { checkFeature("filter_string"); }
    void filterLengthDefault() { checkFeature("filter_length_default"); }
    void filterSequences() { checkFeature("filter_sequences"); }
    void filterSelectMap() { checkFeature("filter_select_map"); }
    void filterNumbers() { checkFeature("filter_numbers"); }
    void testsTypes() { checkFeature("tests_types"); }
    void testsValues() { checkFeature("tests_values"); }
    void stringMethods() { checkFeature("string_methods"); }
    void dictMethods() { checkFeature("dict_methods"); }
    void listMethodsAndSandbox() { checkFeature("list_methods_sandbox"); }
    void slicing() { checkFeature("slicing"); }
    void operators() { checkFeature("operators"); }
    void conditionalExpression() { checkFeature("conditional_expression"); }
    void stringLiterals() { checkFeature("string_literals"); }
    void attributeAndItemLookup() { checkFeature("attribute_and_item_lookup"); }
    void undefinedValues() { checkFeature("undefined"); }
    void valuesPrinting() { checkFeature("values_printing"); }
    void truthiness() { checkFeature("truthiness"); }
    void globals() { checkFeature("globals"); }
    void syntaxErrors() { checkFeature("syntax_errors"); }

    void syntaxErrorNamesLineAndColumn() {
        const Outcome got = run("first line\n{% if x %}\n   {{ 1 + }}\n{% endif %}");
        QVERIFY(!got.ok);
        QVERIFY2(got.text.find("line 3, column 11: syntax error: unexpected 'end of print statement'") != std::string::npos,
                 got.text.c_str());
    }

    void unclosedBlockNamesTheBlock() {
        const Outcome got = run("{% for m in messages %}\n{{ m }}");
        QVERIFY(!got.ok);
        QVERIFY2(got.text.find("looking for the following tags: 'endfor' or 'else'") != std::string::npos, got.text.c_str());
        QVERIFY2(got.text.find("innermost block that needs to be closed is 'for'") != std::string::npos, got.text.c_str());
    }

    void runtimeErrorNamesLineAndColumn() {
        const Outcome got = run("{% for m in messages %}\n  {{- m.content.x.y }}\n{% endfor %}",
                                Json{{"messages", Json::array({Json{{"content", Json::object()}}})}});
        QVERIFY(!got.ok);
        QVERIFY2(got.text.find("line 2, column 18: 'dict object' has no attribute 'x'") != std::string::npos, got.text.c_str());
    }

    void raiseExceptionKeepsTheMessage() {
        const Outcome got = run("{% if messages[0].role != 'user' %}\n{{ raise_exception('Conversation must start with a user turn') }}{% endif %}",
                                Json{{"messages", Json::array({Json{{"role", "assistant"}}})}});
        QVERIFY(!got.ok);
        QVERIFY2(got.text.find("line 2, column 4: the template raised an error: Conversation must start with a user turn") !=
                     std::string::npos,
                 got.text.c_str());
    }

    void errorsNameTheTemplateOrigin() {
        try {
            Template("{{ x.y }}", "the chat template in /models/m/tokenizer_config.json").render(Json::object());
            QFAIL("rendering an attribute of an undefined name must fail");
        } catch (const tandem::Error& e) {
            QCOMPARE(QString(e.what()), QString("the chat template in /models/m/tokenizer_config.json, line 1, column 5: 'x' is undefined"));
        }
    }

    void undefinedAttributePrintsEmptyButChainedLookupFails() {
        QCOMPARE(QString::fromStdString(run("[{{ m.nope }}]", Json{{"m", Json::object()}}).text), QString("[]"));
        const Outcome got = run("{{ m.nope.deeper }}", Json{{"m", Json::object()}});
        QVERIFY(!got.ok);
        QVERIFY2(got.text.find("'dict object' has no attribute 'nope'") != std::string::npos, got.text.c_str());
    }

    void sandboxRefusesMutatingLists() {
        const Outcome got = run("{% set xs = [] %}{{ xs.append(1) }}");
        QVERIFY(!got.ok);
        QVERIFY2(got.text.find("access to attribute 'append' of 'list' object is unsafe.") != std::string::npos, got.text.c_str());
    }

    void unknownFilterFailsBeforeRendering() {
        try {
            Template t("{{ x|frobnicate }}");
            QFAIL("an unknown filter must be a syntax error");
        } catch (const tandem::Error& e) {
            QVERIFY2(QString(e.what()).contains("line 1, column 6: syntax error: No filter named 'frobnicate'."), e.what());
        }
    }

    // ---- hostile templates --------------------------------------------------------------------------

    // INT64_MIN // -1 and % -1 trapped with SIGFPE; Python has big integers, we fail where 64 bits end.
    void integerOverflowFailsInsteadOfTrapping() {
        CHECK_FAILS_WITH(run("{{ (-9223372036854775807 - 1) // -1 }}"), "line 1, column 31: integer result does not fit in 64 bits");
        CHECK_RENDERS("{{ (-9223372036854775807 - 1) % -1 }}|{{ 5 % -1 }}|{{ -7 // -1 }}", "0|0|7");
        CHECK_FAILS_WITH(run("{{ -(-9223372036854775807 - 1) }}"), "does not fit in 64 bits");
        CHECK_FAILS_WITH(run("{{ (-9223372036854775807 - 1)|abs }}"), "does not fit in 64 bits");
        CHECK_FAILS_WITH(run("{{ 9223372036854775807 + 1 }}"), "does not fit in 64 bits");
        CHECK_FAILS_WITH(run("{{ 3037000500 * 3037000500 }}"), "does not fit in 64 bits");
        CHECK_FAILS_WITH(run("{{ 9223372036854775807|round(-19) }}"), "does not fit in 64 bits");
        CHECK_FAILS_WITH(run("{{ 1e300|int }}"), "does not fit in 64 bits");
        CHECK_FAILS_WITH(run("{{ '1e300'|int }}"), "does not fit in 64 bits");
        CHECK_FAILS_WITH(run("{{ '%d' % 1e300 }}"), "does not fit in 64 bits");
        CHECK_RENDERS("{{ 4999999999999999999|round(-19) }}|{{ 15|round(-1) }}", "0|20");
        CHECK_RENDERS("{{ '-9223372036854775808'|int }}|{{ '9223372036854775807'|int }}|{{ '12'|int(base=99) }}",
                      "-9223372036854775808|9223372036854775807|12");
    }

    // ** multiplied once per unit of the exponent: 1 ** (2**63 - 1) never returned.
    void wrongArgumentTypesAreTemplateErrors() {
        // 'hello'.endswith('x', 'lo') aborted the process with std::bad_variant_access (found by fuzz_chat_template).
        const std::pair<const char*, const char*> cases[] = {
            {"{{ 'hello'.endswith('x', 'lo') }}", "slice indices must be integers or None, not str"},
            {"{{ 'hello'.startswith('h', 0, [1]) }}", "slice indices must be integers or None, not list"},
            {"{{ 'hello'.count('l', none, 'x') }}", "slice indices must be integers or None, not str"},
        };
        for (const auto& [source, message] : cases) {
            const Outcome got = run(source);
            QVERIFY2(!got.ok, source);
            QVERIFY2(got.text.find(message) != std::string::npos, got.text.c_str());
        }
        QCOMPARE(QString::fromStdString(run("{{ 'hello'.endswith('l', 0, -1) }}").text), QString("True"));
    }

    void powerIsSquareAndMultiply() {
        CHECK_RENDERS("{{ 2 ** 62 }}|{{ (-2) ** 63 }}|{{ 3 ** 39 }}", "4611686018427387904|-9223372036854775808|4052555153018976267");
        CHECK_RENDERS("{{ 1 ** 9223372036854775807 }}{{ (-1) ** 9223372036854775807 }}{{ 0 ** 9223372036854775807 }}", "1-10");
        CHECK_FAILS_WITH(run("{{ 2 ** 63 }}"), "does not fit in 64 bits");
        CHECK_FAILS_WITH(run("{{ 10 ** 10 ** 10 }}"), "does not fit in 64 bits");
    }

    // The count of range(), the steps of slices and truncate's length + leeway overflowed int64.
    void rangeSliceAndCountsDoNotOverflow() {
        CHECK_FAILS_WITH(run("{{ range(-9223372036854775807, 9223372036854775807)|length }}"), "Range too big");
        CHECK_FAILS_WITH(run("{{ range(9223372036854775807, -9223372036854775807, -1)|length }}"), "Range too big");
        CHECK_RENDERS("{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904)|list }}",
                      "[-9223372036854775807, -4611686018427387903, 1, 4611686018427387905]");
        CHECK_RENDERS("{{ range(9223372036854775807, -9223372036854775807, -4611686018427387904)|list }}",
                      "[9223372036854775807, 4611686018427387903, -1, -4611686018427387905]");
        CHECK_RENDERS("{{ [1,2,3][1::9223372036854775807] }}{{ [1,2,3][::-9223372036854775807] }}{{ 'abc'[2::-9223372036854775807] }}",
                      "[2][3]c");
        CHECK_RENDERS("{{ 'x'|truncate(9223372036854775807, leeway=9223372036854775807) }}", "x");
        CHECK_RENDERS("{{ '%*d|' % (-5, 3) }}{{ '%.*f' % (-3, 1.5) }}", "3    |2");
        CHECK_FAILS_WITH(run("{{ '%c' % 1114112 }}"), "%c arg not in range(0x110000)");
        CHECK_FAILS_WITH(run("{{ '{:c}'.format(-1) }}"), "%c arg not in range(0x110000)");
        CHECK_FAILS_WITH(run("{{ '{:{:{}}}'.format(1, 2, 3) }}"), "Max string recursion exceeded");
    }

    // A recursive loop calling loop() forever overflowed the stack; it stops where macros stop.
    void loopRecursionIsLimited() {
        CHECK_FAILS_WITH(run("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}"), "loop() recursed more than 200 levels deep");
        CHECK_FAILS_WITH(run("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "macro 'f' recursed more than 200 levels deep");
        CHECK_RENDERS("{% for x in [[[[1]]]] recursive %}{% if x is iterable %}({{ loop(x) }}){% else %}{{ x }}{% endif %}{% endfor %}",
                      "(((1)))");
    }

    // A namespace inside itself printed forever; Python prints the container met again as {...}/[...].
    void valuesInsideThemselvesPrintAsPythonDoes() {
        CHECK_RENDERS("{% set ns = namespace() %}{% set ns.x = ns %}{{ ns }}", "<Namespace {'x': <Namespace {...}>}>");
        CHECK_RENDERS("{% set ns = namespace() %}{% set ns.x = [ns] %}{{ ns }}|{{ ns.x }}",
                      "<Namespace {'x': [<Namespace {...}>]}>|[<Namespace {'x': [...]}>]");
        CHECK_RENDERS("{% set ns = namespace() %}{% set ns.x = ns %}{{ ns == ns.x }}|{{ ns in [1, ns] }}", "True|True");
    }

    // A list nested 100,000 deep overflowed the stack when printed, serialised, compared, or merely
    // destroyed at the end of the render.
    void deeplyNestedValuesFailCleanly() {
        const std::string nest = "{% set ns = namespace(x=[], y=[]) %}{% for i in range(100000) %}"
                                 "{% set ns.x = [ns.x] %}{% set ns.y = [ns.y] %}{% endfor %}";
        CHECK_FAILS_WITH(run(nest + "{{ ns.x }}"), "a value nested more than 500 levels deep");
        CHECK_FAILS_WITH(run(nest + "{{ ns.x }}"), "cannot be printed");
        CHECK_FAILS_WITH(run(nest + "{{ ns.x|tojson }}"), "cannot be converted to JSON");
        CHECK_FAILS_WITH(run(nest + "{{ ns.x == ns.y }}"), "cannot be compared");
        CHECK_FAILS_WITH(run(nest + "{{ ns.x in [ns.y] }}"), "cannot be compared");
        CHECK_FAILS_WITH(run(nest + "{{ ns.x < ns.y }}"), "cannot be compared");
        CHECK_RENDERS(nest + "built", "built");
        // Chains through namespaces and cyclers are destroyed without recursing as deep.
        CHECK_RENDERS("{% set st = namespace(head=none) %}{% for i in range(100000) %}{% set st.head = namespace(next=st.head) %}{% endfor %}ok",
                      "ok");
        CHECK_RENDERS("{% set st = namespace(c=none) %}{% for i in range(100000) %}{% set st.c = cycler(st.c) %}{% endfor %}ok", "ok");
        CHECK_FAILS_WITH(run("{{ " + std::string(20000, '[') + std::string(20000, ']') + " }}"), "syntax error");
    }

    // Nested range(100000) loops and a macro doubling its calls to 2^40 never returned.
    void endlessWorkRunsOutOfSteps() {
        const auto start = std::chrono::steady_clock::now();
        CHECK_FAILS_WITH(run(kEndless), "the template ran more than 20000000 steps");
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        QVERIFY2(seconds < 30, qPrintable(QString("the default step budget took %1 s to run out").arg(seconds)));
        // Building a new range(100000) each time, the same loops run out of memory budget first.
        CHECK_FAILS_WITH(run("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"), "rendering stopped");
        RenderOptions small = fixedClock();
        small.limits.steps = 100000;
        CHECK_FAILS_WITH(runWith("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}", small),
                         "the template ran more than 100000 steps");
        // Builtins count the items they go through: sorting and searching big lists costs steps too.
        CHECK_FAILS_WITH(runWith("{% set xs = range(100000)|list %}{% for i in range(1000) %}{% if -1 in xs %}{% endif %}{% endfor %}", small),
                         "steps");
        CHECK_FAILS_WITH(runWith("{% set s = 'ab' * 1000000 %}{% for i in range(1000) %}{{ s|length }}{% endfor %}", small), "steps");
    }

    void renderCanBeCancelled() {
        std::atomic<bool> cancel{false};
        RenderOptions options = fixedClock();
        options.cancel = &cancel;
        options.limits.steps = std::numeric_limits<std::uint64_t>::max();
        std::thread canceller([&cancel] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            cancel = true;
        });
        const Outcome got = runWith(kEndless, options);
        canceller.join();
        CHECK_FAILS_WITH(got, "rendering was cancelled");
        CHECK_RENDERS("{% for i in range(10) %}{% endfor %}not cancelled", "not cancelled");
    }

    // 'a' * 10**10, doubling a string 60 times, a format width or tojson indent of 2^62 asked the
    // machine for exabytes ("internal error: basic_string::_M_create" at best).
    void stringsAndListsAreBounded() {
        CHECK_FAILS_WITH(run("{{ 'a' * 10**10 }}"), "the template tried to make a string longer than 64 MiB");
        CHECK_FAILS_WITH(run("{{ ['a'] * 10**10 }}"), "the template tried to make a list of more than 1048576 items");
        CHECK_FAILS_WITH(run("{% set ns = namespace(s='a') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
                         "longer than 64 MiB");
        CHECK_FAILS_WITH(run("{% set ns = namespace(s='a') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"),
                         "longer than 64 MiB");
        CHECK_RENDERS("{% set s = 'a' %}{% for i in range(60) %}{% set s = s ~ s %}{% endfor %}{{ s }}", "a");
        CHECK_RENDERS("[{{ '' * 10**18 }}{{ [] * 10**18 }}{{ 'ab' * -3 }}]", "[[]]");
        for (const char* source : {"{{ '{:>4611686018427387904}'.format(1) }}", "{{ '{:.4611686018427387904f}'.format(1.5) }}",
                                   "{{ '%4611686018427387904d' % 1 }}", "{{ '%.99999999999999999999999f' % 1.5 }}",
                                   "{{ '%*s' % (4611686018427387904, 'x') }}", "{{ '%.4611686018427387904d' % 1 }}",
                                   "{{ {'a': 1}|tojson(indent=10**9) }}", "{{ 'x'.ljust(2**62) }}", "{{ 'x'.rjust(2**62) }}",
                                   "{{ 'x'.center(2**62) }}", "{{ 'x'.zfill(2**62) }}", "{{ 'x'|center(2**62) }}",
                                   "{{ 'x\ny'|indent(2**62) }}"})
            CHECK_FAILS_WITH(run(source), "longer than 64 MiB");
        CHECK_FAILS_WITH(run("{{ [1]|batch(2**62, 0)|list }}"), "a list of more than 1048576 items");
        // Strings that grow piece by piece are checked as they grow (shown with smaller limits, which
        // work the same and take less time and memory to reach).
        RenderOptions small = fixedClock();
        small.limits.stringBytes = 1 << 20;
        small.limits.listItems = 1000;
        for (const char* source : {"{{ 'ab'.replace('', 'x' * 800000) }}", "{{ ('a' * 600000).replace('a', 'bb') }}",
                                   "{{ ['x' * 600000, 'y' * 600000]|join }}", "{{ ('x' * 600000).join(['a', 'b', 'c']) }}",
                                   "{{ ['x' * 600000, 'y' * 600000] }}", "{{ {'x': 'x' * 600000, 'y': 'y' * 600000}|tojson }}",
                                   "{{ ('x' * 600000 ~ '\n' ~ 'y' * 600000)|indent(4) }}", "{{ '%s%s' % ('x' * 600000, 'y' * 600000) }}",
                                   "{{ '{}{}'.format('x' * 600000, 'y' * 600000) }}", "{{ strftime_now('%c' * 100000) }}"})
            CHECK_FAILS_WITH(runWith(source, small), "the template tried to make a string longer than 1 MiB");
        CHECK_FAILS_WITH(runWith("{% for i in range(3) %}{{ 'x' * 600000 }}{% endfor %}", small), "its output longer than 1 MiB");
        CHECK_FAILS_WITH(runWith("{{ ('x' * 2000)|list }}", small), "a list of more than 1000 items");
        CHECK_FAILS_WITH(runWith("{{ ('a,' * 2000).split(',')|length }}", small), "a list of more than 1000 items");
        CHECK_FAILS_WITH(runWith("{{ ('a\n' * 2000).splitlines()|length }}", small), "a list of more than 1000 items");
        CHECK_FAILS_WITH(runWith("{{ range(600) + range(600) }}", small), "a list of more than 1000 items");
    }

    // Each string may stay under the limit and the total still grow without end: the render has a
    // budget for all it builds.
    void everythingBuiltIsCounted() {
        CHECK_FAILS_WITH(run("{% set big = 'a' * 30000000 %}{% for i in range(100000) %}{% set x = big ~ i %}{% endfor %}"),
                         "the template built more than 256 MiB of strings and lists in one render");
        RenderOptions small = fixedClock();
        small.limits.builtBytes = 16 << 20;
        CHECK_FAILS_WITH(runWith("{% set ns = namespace(xs=[]) %}{% for i in range(100000) %}{% set ns.xs = ns.xs + [i] %}{% endfor %}", small),
                         "the template built more than 16 MiB");
        CHECK_FAILS_WITH(runWith("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", small), "the template built more than 16 MiB");
    }

    void limitsAreReportedInTemplateTerms() {
        RenderUsage usage;
        RenderOptions options = fixedClock();
        options.usage = &usage;
        options.limits.steps = 150;
        const Outcome got = runWith("line one\n{% for i in range(100) %}\n{{ i }}{% endfor %}", options);
        // In the loop: at its head (each iteration counts) or in its body.
        QVERIFY2(got.text.find("template, line 2, column 4: ") != std::string::npos ||
                     got.text.find("template, line 3, column ") != std::string::npos,
                 got.text.c_str());
        CHECK_FAILS_WITH(got, ": the template ran more than 150 steps (a loop or recursion that does not end?); rendering stopped");
        QCOMPARE(usage.steps, std::uint64_t(151));
        RenderUsage nested;
        options.usage = &nested;
        options.limits = RenderLimits{};
        QVERIFY(runWith("{% macro m(n) %}{% if n %}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(10) }}{{ [[[1]]] }}", options).ok);
        QCOMPARE(nested.deepestCall, 11);
        QCOMPARE(nested.deepestValue, 3);
    }

    void inputKeyOrderIsKept() {
        const Json v = Json::parse(R"({"d": {"zeta": 1, "alpha": {"y": 2, "b": 3}}})");
        QCOMPARE(QString::fromStdString(run("{{ d|tojson }} {{ d }}", v).text),
                 QString(R"({"zeta": 1, "alpha": {"y": 2, "b": 3}} {'zeta': 1, 'alpha': {'y': 2, 'b': 3}})"));
    }
};

QTEST_GUILESS_MAIN(JinjaTest)
#include "tst_jinja.moc"
