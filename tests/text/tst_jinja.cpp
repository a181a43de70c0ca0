// The Jinja interpreter against Python's jinja2: every language feature chat templates use, each
// with its own group of cases in data/jinja_cases.json, plus the errors a template author sees.
#include <QTest>
#include <set>

#include "tandem/error.h"
#include "text/jinja/template.h"
#include "text_test_data.h"

using tandem::text::jinja::RenderOptions;
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

Outcome run(const std::string& source, const Json& variables = Json::object()) {
    try {
        return {true, Template(source).render(variables, fixedClock())};
    } catch (const tandem::Error& e) {
        return {false, e.what()};
    }
}

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

    void inputKeyOrderIsKept() {
        const Json v = Json::parse(R"({"d": {"zeta": 1, "alpha": {"y": 2, "b": 3}}})");
        QCOMPARE(QString::fromStdString(run("{{ d|tojson }} {{ d }}", v).text),
                 QString(R"({"zeta": 1, "alpha": {"y": 2, "b": 3}} {'zeta': 1, 'alpha': {'y': 2, 'b': 3}})"));
    }
};

QTEST_GUILESS_MAIN(JinjaTest)
#include "tst_jinja.moc"
