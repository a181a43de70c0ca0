// serve's tool-call parser (app/server/tool_calls.cpp) on each model family's format: one call, two,
// text before, malformed calls kept as content, unicode arguments, and text fed at every byte boundary.
// gpt-oss's harmony calls also go through TextStream (model_text.cpp), token by token, on a small
// tokenizer with harmony's special tokens, and the format is found by rendering a call through the
// real templates of tests/text/data.
#include <QTemporaryDir>
#include <QTest>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "server/model_text.h"
#include "server/tool_calls.h"
#include "test_support.h"
#include "text_test_data.h"
#include "tokenizer_json.h"

using namespace tandem::server;
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

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

// A model folder with the harmony test tokenizer (ids 1000..1007: <|endoftext|> <|start|> <|end|>
// <|message|> <|channel|> <|constrain|> <|return|> <|call|>) and a chat template of tests/text/data.
std::filesystem::path modelFolder(const QTemporaryDir& dir, const std::string& templateFile) {
    const QString root = dir.path();
    tandem::test::writeFile(root + "/tokenizer.json", QByteArray::fromStdString(tandem::test::harmonyTokenizerJson().dump()));
    tandem::test::writeFile(root + "/tokenizer_config.json",
                            QByteArray::fromStdString(Json{{"bos_token", "<|startoftext|>"}, {"eos_token", "<|return|>"}, {"pad_token", "<|endoftext|>"}}.dump()));
    tandem::test::writeFile(root + "/chat_template.jinja", QByteArray::fromStdString(tandem::test::readTextTestFile(templateFile)));
    return root.toStdString();
}

struct Streamed {
    std::string content, reasoning;
    std::vector<ToolCall> calls;
};

// The model's output (harmony markup written as text, encoded to ids) through a chat's TextStream,
// one token at a time, as the server streams it.
Streamed streamChat(const tandem::text::Tokenizer& tokenizer, const std::string& output, ToolCallFormat format) {
    TextStream stream(tokenizer, false, true, {}, format);
    std::vector<Delta> deltas;
    for (const int id : tokenizer.encode(output, false)) stream.push(id, deltas);
    stream.finish(deltas);
    Streamed out;
    for (const Delta& d : deltas) {
        if (d.kind == Delta::Kind::Content) out.content += d.text;
        else if (d.kind == Delta::Kind::Reasoning) out.reasoning += d.text;
        else out.calls.push_back({d.text, d.arguments});
    }
    return out;
}

const std::string kHarmonyCall = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";

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
        QCOMPARE(toolCallFormat("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>", ""),
                 ToolCallFormat::Harmony);
        QCOMPARE(toolCallFormat("", "gpt_oss"), ToolCallFormat::Harmony);
        QVERIFY(toolCallMarkers(ToolCallFormat::Harmony).empty());  // the decoder writes harmony's calls out itself
    }

    // As serve finds it: by rendering a past call through the model's own template.
    void formatFoundThroughRealTemplates_data() {
        QTest::addColumn<QString>("file");
        QTest::addColumn<int>("format");
        QTest::newRow("gpt-oss") << "gpt_oss.jinja" << int(ToolCallFormat::Harmony);
        QTest::newRow("qwen3") << "qwen3.jinja" << int(ToolCallFormat::Hermes);
        QTest::newRow("glm-4.6") << "glm4_6.jinja" << int(ToolCallFormat::Glm);
        QTest::newRow("deepseek-v3.1") << "deepseek_v3_1.jinja" << int(ToolCallFormat::DeepSeek);
        QTest::newRow("mixtral") << "mixtral.jinja" << int(ToolCallFormat::None);
    }

    void formatFoundThroughRealTemplates() {
        QFETCH(QString, file);
        QFETCH(int, format);
        QTemporaryDir dir;
        const ModelText text(modelFolder(dir, file.toStdString()), "");
        QCOMPARE(int(text.toolCallFormat()), format);
    }

    // gpt-oss: the model writes the recipient in the channel header; its template renders past calls
    // with it in the role header. <|call|> is a stop token, so the text usually ends without it.
    void harmony() {
        const auto one = parse(ToolCallFormat::Harmony, kHarmonyCall + "{\"city\": \"Paris\", \"days\": 2}");
        QCOMPARE(one.content, std::string());
        QCOMPARE(one.calls.size(), std::size_t(1));
        QCOMPARE(one.calls[0].name, std::string("get_weather"));
        QVERIFY(args(one.calls[0]) == Json({{"city", "Paris"}, {"days", 2}}));

        const auto rendered = parse(ToolCallFormat::Harmony,
                                    "Let me check. <|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>"
                                    "<|start|>assistant to=functions.say<|channel|>commentary json<|message|>"
                                    "{\"text\": \"héllo 世界 🙂\"}<|call|>");
        QCOMPARE(rendered.content, std::string("Let me check. "));
        QCOMPARE(rendered.calls.size(), std::size_t(2));
        QCOMPARE(rendered.calls[0].name, std::string("get_time"));
        QCOMPARE(rendered.calls[0].arguments, std::string("{}"));
        QCOMPARE(rendered.calls[1].name, std::string("say"));
        QVERIFY(rendered.calls[1].arguments.find("世界") != std::string::npos);

        // A builtin tool's recipient has no "functions." to take off; a call may end with <|end|>.
        const auto builtin = parse(ToolCallFormat::Harmony,
                                   "<|start|>assistant<|channel|>analysis to=browser.search <|constrain|>json<|message|>{\"query\": \"x\"}<|end|>");
        QCOMPARE(builtin.calls.size(), std::size_t(1));
        QCOMPARE(builtin.calls[0].name, std::string("browser.search"));
        QCOMPARE(builtin.content, std::string());
    }

    void harmonyMalformedIsContent() {
        for (const std::string& text : std::vector<std::string>{
                 kHarmonyCall + "{\"city\": ",                    // cut off (max_tokens)
                 kHarmonyCall + "print(1)<|call|>",                  // no JSON
                 kHarmonyCall + "[1, 2]",                            // not an object
                 "<|start|>assistant<|channel|>commentary<|message|>no recipient",
                 "<|start|>assistant to=functions. <|message|>{}",  // no name
                 "a <|start|>assistant<|channel|>commentary to=functions.f",  // never reaches <|message|>
                 "text <|sta"}) {
            const auto r = parse(ToolCallFormat::Harmony, text);
            QVERIFY2(r.calls.empty(), text.c_str());
            QCOMPARE(r.content, text);
        }
        // A header far too long is text, given without waiting for the end.
        ToolCallParser parser(ToolCallFormat::Harmony);
        std::string content;
        std::vector<ToolCall> calls;
        const std::string longText = "<|start|>" + std::string(600, 'x');
        parser.push(longText, content, calls);
        QCOMPARE(content, longText);
    }

    // gpt-oss's template would quote arguments given as JSON text again (tojson), and reads reasoning
    // from `thinking`: serve hands it the messages that way.
    void harmonyMessagesForTemplate() {
        const OrderedJson call = {{"id", "c1"}, {"type", "function"},
                                  {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Lima\"}"}}}};
        const OrderedJson messages = OrderedJson::array({
            {{"role", "user"}, {"content", "Weather in Lima?"}},
            {{"role", "assistant"}, {"content", "Checking."}, {"reasoning_content", "Use the tool."}, {"tool_calls", {call}}},
            {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "18 C"}},
            {{"role", "assistant"}, {"content", "18 °C."}, {"reasoning_content", "Say it."}}});
        QVERIFY(messagesForTemplate(ToolCallFormat::Hermes, messages) == messages);
        const OrderedJson adapted = messagesForTemplate(ToolCallFormat::Harmony, messages);
        QVERIFY(adapted[1]["thinking"] == OrderedJson("Use the tool."));
        QVERIFY(!adapted[1].contains("content"));  // the template refuses content and thinking beside a call
        QVERIFY(adapted[1]["tool_calls"][0]["function"]["arguments"] == OrderedJson({{"city", "Lima"}}));
        QVERIFY(adapted[3]["content"] == OrderedJson("18 °C."));
        QVERIFY(adapted[3]["thinking"] == OrderedJson("Say it."));

        // Through serve's prompt: the past call as the model would have written it, its analysis kept
        // (no final answer came after it), and <|return|> and <|call|> end the turn.
        QTemporaryDir dir;
        const ModelText text(modelFolder(dir, "gpt_oss.jinja"), "gpt_oss");
        ChatRequest request;
        request.messages = OrderedJson::array({messages[0], messages[1], messages[2]});
        const std::string prompt = text.tokenizer().decode(text.chatPrompt(request).tokens, false);
        QVERIFY(prompt.find("<|start|>assistant<|channel|>analysis<|message|>Use the tool.<|end|>"
                            "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
                            "{\"city\": \"Lima\"}<|call|>") != std::string::npos);
        QVERIFY(prompt.ends_with("<|end|><|start|>assistant"));
        const auto stops = text.chatOptions({}).stopTokenIds;
        QVERIFY(std::find(stops.begin(), stops.end(), 1006) != stops.end());
        QVERIFY(std::find(stops.begin(), stops.end(), 1007) != stops.end());
    }

    // What serve does with gpt-oss's output, token by token: analysis is reasoning, the headers are gone,
    // a call comes out as a tool call and a final answer as content.
    void harmonyThroughTextStream() {
        const auto tokenizer = tandem::test::tokenizerFrom(tandem::test::harmonyTokenizerJson());
        const auto call = streamChat(tokenizer,
                                     "<|channel|>analysis<|message|>Need the weather, ñ.<|end|>" + kHarmonyCall +
                                         "{\"city\": \"Lima\", \"note\": \"世界\"}",
                                     ToolCallFormat::Harmony);
        QCOMPARE(call.reasoning, std::string("Need the weather, ñ."));
        QCOMPARE(call.content, std::string());
        QCOMPARE(call.calls.size(), std::size_t(1));
        QCOMPARE(call.calls[0].name, std::string("get_weather"));
        QVERIFY(args(call.calls[0]) == Json({{"city", "Lima"}, {"note", "世界"}}));

        // The recipient in the role header, right after the prompt's "<|start|>assistant".
        const auto roleHeader = streamChat(tokenizer, " to=functions.get_time<|channel|>commentary <|constrain|>json<|message|>{}",
                                           ToolCallFormat::Harmony);
        QCOMPARE(roleHeader.calls.size(), std::size_t(1));
        QCOMPARE(roleHeader.calls[0].name, std::string("get_time"));
        QCOMPARE(roleHeader.content, std::string());

        const auto answer = streamChat(tokenizer,
                                       "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final"
                                       "<|message|>It is <b>4</b> — sure.",
                                       ToolCallFormat::Harmony);
        QCOMPARE(answer.reasoning, std::string("Easy."));
        QCOMPARE(answer.content, std::string("It is <b>4</b> — sure."));
        QVERIFY(answer.calls.empty());

        // A call the model left unended before its next message, then an answer.
        const auto unended = streamChat(tokenizer, kHarmonyCall + "{\"a\": 1}<|start|>assistant<|channel|>final<|message|>Hi",
                                        ToolCallFormat::Harmony);
        QCOMPARE(unended.calls.size(), std::size_t(1));
        QCOMPARE(unended.content, std::string("Hi"));

        // Without tools (no format) a call stays visible as the model's markup.
        const auto plain = streamChat(tokenizer, kHarmonyCall + "{}", ToolCallFormat::None);
        QCOMPARE(plain.content, kHarmonyCall + "{}");

        // A completion is the text as decoded, channels not read, no <think> tags put in.
        TextStream completion(tokenizer, false, false, {}, ToolCallFormat::None);
        std::vector<Delta> deltas;
        const auto ids = tokenizer.encode("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b", false);
        for (const int id : ids) completion.push(id, deltas);
        completion.finish(deltas);
        std::string text;
        for (const Delta& d : deltas) {
            QCOMPARE(int(d.kind), int(Delta::Kind::Content));
            text += d.text;
        }
        QCOMPARE(text, std::string("analysisaassistantfinalb"));
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
        QTest::newRow("harmony") << int(ToolCallFormat::Harmony)
                                 << QByteArray::fromStdString("Sure ñ. " + kHarmonyCall + "{\"v\": \"ñ世\"}<|call|> " +
                                                              "<|start|>assistant to=functions.g<|channel|>commentary json<|message|>"
                                                              "{}<|end|> <|sta");
        QTest::newRow("harmony, open at the end") << int(ToolCallFormat::Harmony)
                                                  << QByteArray::fromStdString("<|start|>assistant to=functions.g<|channel|>commentary "
                                                                               "json<|message|>{}<|call|>" + kHarmonyCall + "{\"a\": [1]}");
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
