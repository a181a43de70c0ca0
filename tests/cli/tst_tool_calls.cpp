// serve's tool-call parser (app/server/tool_calls.cpp) on each model family's format: one call, two,
// text before, malformed calls kept as content, unicode arguments, and text fed at every byte boundary.
#include <QTest>
#include <nlohmann/json.hpp>

#include "server/tool_calls.h"

using namespace tandem::server;
using Json = nlohmann::json;

namespace {

struct Result {
    std::string content;
    std::vector<ToolCall> calls;
};

Result parse(ToolCallFormat format, const std::string& text) {
    Result r;
    r.calls = ToolCallParser::parse(format, text, r.content);
    return r;
}

// The text in two pieces, split at `at`.
Result parseSplit(ToolCallFormat format, const std::string& text, std::size_t at) {
    Result r;
    ToolCallParser parser(format);
    parser.push(std::string_view(text).substr(0, at), r.content, r.calls);
    parser.push(std::string_view(text).substr(at), r.content, r.calls);
    parser.finish(r.content, r.calls);
    return r;
}

// One byte at a time.
Result parseBytes(ToolCallFormat format, const std::string& text) {
    Result r;
    ToolCallParser parser(format);
    for (const char c : text) parser.push(std::string_view(&c, 1), r.content, r.calls);
    parser.finish(r.content, r.calls);
    return r;
}

Json args(const ToolCall& call) { return Json::parse(call.arguments); }

const std::string kDsBegin = "<｜tool▁calls▁begin｜>";
const std::string kDsEnd = "<｜tool▁calls▁end｜>";
const std::string kDsCall = "<｜tool▁call▁begin｜>";
const std::string kDsCallEnd = "<｜tool▁call▁end｜>";
const std::string kDsSep = "<｜tool▁sep｜>";

}  // namespace

class TestToolCalls : public QObject {
    Q_OBJECT

private slots:
    void formatByTemplateOrModelType() {
        QCOMPARE(toolCallFormat("<tool_call>\n{\"name\": \"f\"}", "llama"), ToolCallFormat::Hermes);
        QCOMPARE(toolCallFormat("<tool_call>f\n<arg_key>x</arg_key>", ""), ToolCallFormat::Glm);
        QCOMPARE(toolCallFormat(kDsBegin + kDsCall + "f" + kDsSep + "{}", ""), ToolCallFormat::DeepSeek);
        QCOMPARE(toolCallFormat("", "qwen3_moe"), ToolCallFormat::Hermes);
        QCOMPARE(toolCallFormat("", "glm4_moe"), ToolCallFormat::Glm);
        QCOMPARE(toolCallFormat("", "deepseek_v3"), ToolCallFormat::DeepSeek);
        QCOMPARE(toolCallFormat("", "mixtral"), ToolCallFormat::None);
    }

    void hermes() {
        const auto one = parse(ToolCallFormat::Hermes,
                               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
        QCOMPARE(one.content, std::string());
        QCOMPARE(one.calls.size(), std::size_t(1));
        QCOMPARE(one.calls[0].name, std::string("get_weather"));
        QVERIFY(args(one.calls[0]) == Json({{"city", "Paris"}}));

        const auto two = parse(ToolCallFormat::Hermes,
                               "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"n\": 1}}\n</tool_call>\n"
                               "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>\n");
        QCOMPARE(two.content, std::string("Let me look.\n"));
        QCOMPARE(two.calls.size(), std::size_t(2));
        QCOMPARE(two.calls[0].name, std::string("a"));
        QVERIFY(args(two.calls[0]) == Json({{"n", 1}}));
        QCOMPARE(two.calls[1].name, std::string("b"));
        QVERIFY(args(two.calls[1]) == Json::object());

        const auto unicode = parse(ToolCallFormat::Hermes,
                                   "<tool_call>\n{\"name\": \"say\", \"arguments\": {\"text\": \"héllo 世界 🙂\"}}\n</tool_call>");
        QCOMPARE(unicode.calls.size(), std::size_t(1));
        QVERIFY(args(unicode.calls[0])["text"].get<std::string>() == std::string("héllo 世界 🙂"));
        QVERIFY(unicode.calls[0].arguments.find("世界") != std::string::npos);  // UTF-8, not \u escapes

        // Arguments written as a JSON string are taken as the object they hold.
        const auto asString = parse(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 2}\"}</tool_call>");
        QCOMPARE(asString.calls.size(), std::size_t(1));
        QVERIFY(args(asString.calls[0]) == Json({{"x", 2}}));
    }

    void hermesMalformedIsContent() {
        for (const std::string& text : std::vector<std::string>{"Sure <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n",
                                       "<tool_call>\n{\"name\": \"f\", \"arguments\": {x: 1}}\n</tool_call>",
                                       "<tool_call>not json</tool_call> after", "<tool_call>[1, 2]</tool_call>",
                                       "<tool_call>{\"arguments\": {}}</tool_call>", "a <tool_ca", "<tool_call>"}) {
            const auto r = parse(ToolCallFormat::Hermes, text);
            QVERIFY2(r.calls.empty(), text.c_str());
            QCOMPARE(r.content, text);
        }
        // A good call after a bad one is still a call.
        const auto mixed = parse(ToolCallFormat::Hermes, "<tool_call>oops</tool_call><tool_call>{\"name\": \"f\"}</tool_call>");
        QCOMPARE(mixed.content, std::string("<tool_call>oops</tool_call>"));
        QCOMPARE(mixed.calls.size(), std::size_t(1));
        QCOMPARE(mixed.calls[0].arguments, std::string("{}"));
        // Without a format, the markup is only text.
        const std::string call = "<tool_call>{\"name\": \"f\"}</tool_call>";
        QCOMPARE(parse(ToolCallFormat::None, call).content, call);
    }

    void glm() {
        const auto one = parse(ToolCallFormat::Glm,
                               "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
                               "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>opts</arg_key>\n"
                               "<arg_value>{\"metric\": true, \"hours\": [1, 2]}</arg_value>\n<arg_key>ok</arg_key>\n"
                               "<arg_value>false</arg_value>\n</tool_call>");
        QCOMPARE(one.content, std::string());
        QCOMPARE(one.calls.size(), std::size_t(1));
        QCOMPARE(one.calls[0].name, std::string("get_weather"));
        QVERIFY(args(one.calls[0]) ==
                 Json({{"city", "Paris"}, {"days", 3}, {"opts", {{"metric", true}, {"hours", {1, 2}}}}, {"ok", false}}));

        const auto two = parse(ToolCallFormat::Glm,
                               "I will check both.\n<tool_call>a\n<arg_key>q</arg_key>\n<arg_value>naïve café ✓</arg_value>\n</tool_call>"
                               "\n<tool_call>b\n</tool_call>");
        QCOMPARE(two.content, std::string("I will check both.\n"));
        QCOMPARE(two.calls.size(), std::size_t(2));
        QVERIFY(args(two.calls[0]) == Json({{"q", "naïve café ✓"}}));
        QCOMPARE(two.calls[1].name, std::string("b"));
        QVERIFY(args(two.calls[1]) == Json::object());

        for (const std::string& text : std::vector<std::string>{"<tool_call>f\n<arg_key>x</arg_key>\n<arg_value>1</arg_value>",
                                       "<tool_call>f\n<arg_key>x</arg_key>\n</tool_call>",
                                       "<tool_call>f\nstray text\n</tool_call>", "<tool_call>\n</tool_call>"}) {
            const auto r = parse(ToolCallFormat::Glm, text);
            QVERIFY2(r.calls.empty(), text.c_str());
            QCOMPARE(r.content, text);
        }
    }

    void deepSeekV3() {
        const std::string call1 = kDsCall + "function" + kDsSep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + kDsCallEnd;
        const std::string call2 = kDsCall + "function" + kDsSep + "say\n```json\n{\"text\": \"привет 🙂\"}\n```" + kDsCallEnd;
        const auto one = parse(ToolCallFormat::DeepSeek, kDsBegin + call1 + kDsEnd);
        QCOMPARE(one.content, std::string());
        QCOMPARE(one.calls.size(), std::size_t(1));
        QCOMPARE(one.calls[0].name, std::string("get_weather"));
        QVERIFY(args(one.calls[0]) == Json({{"city", "Paris"}}));

        // As deepseek_v3.jinja renders several: a newline between calls.
        const auto two = parse(ToolCallFormat::DeepSeek, "Checking." + kDsBegin + call1 + "\n" + call2 + kDsEnd);
        QCOMPARE(two.content, std::string("Checking."));
        QCOMPARE(two.calls.size(), std::size_t(2));
        QVERIFY(args(two.calls[1])["text"].get<std::string>() == std::string("привет 🙂"));

        for (const std::string& text : {kDsBegin + call1,  // the block never ends: the call is given, the rest is held
                                       kDsBegin + kDsCall + "function" + kDsSep + "f\n```json\n{bad}\n```" + kDsCallEnd + kDsEnd,
                                       kDsBegin + kDsCall + "function" + kDsSep + "f\n```json\n{\"x\": 1}",
                                       "text " + kDsBegin + "not a call"}) {
            const auto r = parse(ToolCallFormat::DeepSeek, text);
            if (text == kDsBegin + call1) {
                QCOMPARE(r.calls.size(), std::size_t(1));
                QCOMPARE(r.content, std::string());
                continue;
            }
            QVERIFY2(r.calls.empty(), text.c_str());
            QCOMPARE(r.content, text.substr(0, text.size() - (text.ends_with(kDsEnd) ? kDsEnd.size() : 0)));
        }
    }

    void deepSeekV31() {
        const std::string call1 = kDsCall + "get_weather" + kDsSep + "{\"city\": \"Paris\"}" + kDsCallEnd;
        const std::string call2 = kDsCall + "add" + kDsSep + "{\"a\": 1, \"b\": [2.5, null]}" + kDsCallEnd;
        const auto one = parse(ToolCallFormat::DeepSeek, kDsBegin + call1 + kDsEnd);
        QCOMPARE(one.calls.size(), std::size_t(1));
        QCOMPARE(one.calls[0].name, std::string("get_weather"));
        QVERIFY(args(one.calls[0]) == Json({{"city", "Paris"}}));
        const auto two = parse(ToolCallFormat::DeepSeek, "Sure: " + kDsBegin + call1 + call2 + kDsEnd);
        QCOMPARE(two.content, std::string("Sure: "));
        QCOMPARE(two.calls.size(), std::size_t(2));
        QVERIFY(args(two.calls[1]) == Json({{"a", 1}, {"b", {2.5, nullptr}}}));
        const auto bad = parse(ToolCallFormat::DeepSeek, kDsBegin + kDsCall + "f" + kDsSep + "[1]" + kDsCallEnd + kDsEnd);
        QVERIFY(bad.calls.empty());
        QCOMPARE(bad.content, kDsBegin + kDsCall + "f" + kDsSep + "[1]" + kDsCallEnd);
    }

    // Split anywhere (inside a tag, inside a UTF-8 character), the text parses as it does whole.
    void streamedAtEveryByte_data() {
        QTest::addColumn<int>("format");
        QTest::addColumn<QByteArray>("text");
        QTest::newRow("hermes") << int(ToolCallFormat::Hermes)
                                << QByteArray("Voilà <tool_call>\n{\"name\": \"a\", \"arguments\": {\"t\": \"é世\"}}\n</tool_call>\n"
                                              "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call> <tool_");
        QTest::newRow("glm") << int(ToolCallFormat::Glm)
                             << QByteArray("ok\n<tool_call>f\n<arg_key>k</arg_key>\n<arg_value>[1, \"ü\"]</arg_value>\n</tool_call>\n"
                                          "<tool_call>g\n<arg_key>s</arg_key>\n<arg_value>été</arg_value>\n</tool_call>");
        QTest::newRow("deepseek") << int(ToolCallFormat::DeepSeek)
                                  << QByteArray::fromStdString("x " + kDsBegin + kDsCall + "function" + kDsSep +
                                                               "f\n```json\n{\"v\": \"ñ\"}\n```" + kDsCallEnd + "\n" + kDsCall +
                                                               "g" + kDsSep + "{}" + kDsCallEnd + kDsEnd + " <｜tool");
    }

    void streamedAtEveryByte() {
        QFETCH(int, format);
        QFETCH(QByteArray, text);
        const auto f = static_cast<ToolCallFormat>(format);
        const std::string s = text.toStdString();
        const auto whole = parse(f, s);
        QCOMPARE(whole.calls.size(), std::size_t(2));
        const auto check = [&](const Result& r, const char* where) {
            QVERIFY2(r.content == whole.content, where);
            QVERIFY2(r.calls.size() == whole.calls.size(), where);
            for (std::size_t i = 0; i < r.calls.size(); ++i) {
                QVERIFY2(r.calls[i].name == whole.calls[i].name, where);
                QVERIFY2(r.calls[i].arguments == whole.calls[i].arguments, where);
            }
        };
        for (std::size_t at = 0; at <= s.size(); ++at) check(parseSplit(f, s, at), qPrintable(QString("split at %1").arg(at)));
        check(parseBytes(f, s), "byte by byte");
    }

    // Text that cannot start a call is given at once, not held.
    void textIsNotHeldBack() {
        ToolCallParser parser(ToolCallFormat::Hermes);
        std::string content;
        std::vector<ToolCall> calls;
        parser.push("Hello <b>world</b> <tool", content, calls);
        QCOMPARE(content, std::string("Hello <b>world</b> "));
        parser.push("_call>{\"name\": \"f\"}", content, calls);
        QCOMPARE(content, std::string("Hello <b>world</b> "));
        QVERIFY(calls.empty());
        parser.push("</tool_call>", content, calls);
        QCOMPARE(calls.size(), std::size_t(1));
        QVERIFY(parser.sawCalls());
    }
};

QTEST_GUILESS_MAIN(TestToolCalls)
#include "tst_tool_calls.moc"
