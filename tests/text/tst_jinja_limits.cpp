// The render limits against the real chat templates of data/: each renders a long conversation (50
// user turns, tools and tool calls where the template takes them, every message a couple of KB) far
// inside every limit of RenderLimits. The figures it prints are the ones docs/ARCHITECTURE.md quotes.
// And a chat template that never ends can be cancelled.
#include <QTest>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "tandem/error.h"
#include "text/chat_template.h"
#include "text/jinja/template.h"
#include "text_test_data.h"

using tandem::text::jinja::RenderLimits;
using tandem::text::jinja::RenderOptions;
using tandem::text::jinja::RenderUsage;
using tandem::text::jinja::Template;
using Json = nlohmann::ordered_json;

namespace {

constexpr int kTurns = 50;
constexpr std::size_t kMessageBytes = 2000;

bool hasTools(const Json& c) { return c["extra"].contains("tools") || c["extra"].contains("builtin_tools"); }

// Where a case's exchange ends: after its last answer or tool result (0 when it has none).
std::size_t exchangeEnd(const Json& messages) {
    std::size_t end = 0;
    for (std::size_t i = 0; i < messages.size(); ++i)
        if (messages[i]["role"] != "user" && messages[i]["role"] != "system" && messages[i]["role"] != "developer") end = i + 1;
    return end;
}

std::size_t leadingSystem(const Json& messages) {
    std::size_t n = 0;
    while (n < messages.size() && (messages[n]["role"] == "system" || messages[n]["role"] == "developer")) ++n;
    return n;
}

// The messages of the exchange that longConversation() repeats; 0 when it holds no user turn.
std::size_t exchangeLength(const Json& messages) {
    const std::size_t first = leadingSystem(messages), end = exchangeEnd(messages);
    bool user = false;
    for (std::size_t i = first; i < end; ++i) user = user || messages[i]["role"] == "user";
    return user ? end - first : 0;
}

// The richest case of each template: with tools if any has them, then the longest exchange.
std::map<std::string, Json> richestCasePerTemplate() {
    std::map<std::string, Json> best;
    for (const Json& c : tandem::test::readTextTestJson("model_cases.json")) {
        if (c.contains("error") || exchangeLength(c["messages"]) == 0) continue;
        const std::string name = c["template"];
        const auto it = best.find(name);
        if (it != best.end() && std::make_pair(hasTools(it->second), exchangeLength(it->second["messages"])) >=
                                    std::make_pair(hasTools(c), exchangeLength(c["messages"])))
            continue;
        best[name] = c;
    }
    return best;
}

// The case's conversation stretched to kTurns user turns: its system messages, its exchange over and
// over, then what followed the exchange; every text content grown to about kMessageBytes.
Json longConversation(const Json& messages) {
    const std::size_t first = leadingSystem(messages), end = exchangeEnd(messages);
    Json out = Json::array();
    for (std::size_t i = 0; i < first; ++i) out.push_back(messages[i]);
    int turns = 0;
    while (turns < kTurns)
        for (std::size_t i = first; i < end; ++i) {
            out.push_back(messages[i]);
            if (messages[i]["role"] == "user") ++turns;
        }
    for (std::size_t i = end; i < messages.size(); ++i) out.push_back(messages[i]);
    const std::string filler = " The quick brown fox jumps over the lazy dog, again and again, until the message is long.";
    for (Json& m : out)
        if (m.contains("content") && m["content"].is_string()) {
            std::string text = m["content"];
            while (text.size() < kMessageBytes) text += filler;
            m["content"] = text;
        }
    return out;
}

}  // namespace

class JinjaLimitsTest : public QObject {
    Q_OBJECT

private slots:
    void realTemplatesStayFarInsideTheLimits() {
        const RenderLimits limits;
        const auto cases = richestCasePerTemplate();
        QVERIFY(cases.size() >= 10);
        qInfo("%-24s %-40s %9s %10s %9s %5s %5s %8s", "template", "case stretched to 50 turns", "steps", "built", "output", "call",
              "value", "ms");
        for (const auto& [name, c] : cases) {
            Json variables = c["special_tokens"];
            for (const auto& [key, value] : c["extra"].items()) variables[key] = value;
            variables["messages"] = longConversation(c["messages"]);
            if (!variables.contains("tools")) variables["tools"] = nullptr;
            if (!variables.contains("documents")) variables["documents"] = nullptr;
            variables["add_generation_prompt"] = c["add_generation_prompt"];
            RenderUsage usage;
            RenderOptions options;
            options.now = tandem::test::referenceNow;
            options.usage = &usage;
            const Template t(tandem::test::readTextTestFile(name), name);
            const auto start = std::chrono::steady_clock::now();
            const std::string text = t.render(variables, options);
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            qInfo("%-24s %-40s %9llu %10llu %9zu %5d %5d %8.2f", name.c_str(), c["name"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(usage.steps), static_cast<unsigned long long>(usage.builtBytes), text.size(),
                  usage.deepestCall, usage.deepestValue, ms);
            QVERIFY(text.size() > kTurns * kMessageBytes);
            // Work and memory at least 100 times below their limits; depths at least 10 times.
            QVERIFY2(usage.steps * 100 <= limits.steps, name.c_str());
            QVERIFY2(usage.builtBytes * 100 <= limits.builtBytes, name.c_str());
            QVERIFY2(usage.longestString * 100 <= limits.stringBytes, name.c_str());
            QVERIFY2(usage.deepestCall * 10 <= limits.callDepth, name.c_str());
            QVERIFY2(usage.deepestValue * 10 <= limits.valueDepth, name.c_str());
        }
    }

    void chatTemplateRenderCanBeCancelled() {
        tandem::text::ChatTemplate chat("{% for m in messages %}{% for i in range(100000) %}{% for j in range(100000) %}"
                                        "{% endfor %}{% endfor %}{% endfor %}",
                                        Json::object(), "the chat template in /models/m/tokenizer_config.json");
        std::atomic<bool> cancel{false};
        chat.setCancelFlag(&cancel);
        std::thread canceller([&cancel] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            cancel = true;
        });
        const auto start = std::chrono::steady_clock::now();
        try {
            chat.render(Json::array({Json{{"role", "user"}, {"content", "hi"}}}), true);
            canceller.join();
            QFAIL("the render must end once cancelled");
        } catch (const tandem::Error& e) {
            canceller.join();
            QVERIFY2(QString(e.what()).startsWith("the chat template in /models/m/tokenizer_config.json, line 1, column "), e.what());
            QVERIFY2(QString(e.what()).endsWith(": rendering was cancelled"), e.what());
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        QVERIFY2(seconds < 1.0, qPrintable(QString("cancelling took %1 s").arg(seconds)));
    }
};

QTEST_GUILESS_MAIN(JinjaLimitsTest)
#include "tst_jinja_limits.moc"
