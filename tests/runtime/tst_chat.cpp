// Chat: the model's template and tokenizer around a session or a caller's generator; stop strings;
// multi-turn cache reuse.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTest>

#include "runtime/stop_strings.h"
#include "tandem/chat.h"
#include "tandem/tokenizer.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

std::unique_ptr<Engine> loadEngine(const QString& fixture) {
    EngineOptions o;
    o.threads = 2;
    o.device = Device::Cpu;
    return Engine::load(fixturePath(fixture).toStdString(), o);
}

std::string collect(runtime::StopStringFilter& f, const std::vector<std::string>& pieces) {
    std::string out;
    for (const auto& p : pieces) out += f.push(p);
    return out + f.finish();
}

}  // namespace

class ChatTest : public QObject {
    Q_OBJECT
private slots:
    void stopStringsAcrossPieces() {
        runtime::StopStringFilter f({"<|user|>", "STOP"});
        QCOMPARE(f.push("Hello <|us"), std::string("Hello "));  // "<|us" might start a stop string
        QVERIFY(!f.stopped());
        QCOMPARE(f.push("er|> more"), std::string());
        QVERIFY(f.stopped());
        QCOMPARE(f.push("after"), std::string());
        QCOMPARE(f.finish(), std::string());

        runtime::StopStringFilter g({"STOP"});
        QCOMPARE(collect(g, {"ST", "ART and ST", "O", "P!"}), std::string("START and "));
        runtime::StopStringFilter none({});
        QCOMPARE(collect(none, {"a", "b"}), std::string("ab"));
        runtime::StopStringFilter held({"END"});
        QCOMPARE(collect(held, {"the E", "N"}), std::string("the EN"));  // never completed: all shown
    }

    void promptTokensMatchTransformers_data() {
        QTest::addColumn<QString>("fixture");
        for (const auto& f : fixtureNames()) QTest::newRow(qPrintable(f)) << f;
    }
    void promptTokensMatchTransformers() {
        // golden.json's chat cases: transformers' apply_chat_template(tokenize=True) ids.
        QFETCH(QString, fixture);
        auto engine = loadEngine(fixture);
        const Chat chat(*engine, fixturePath(fixture).toStdString());
        const auto golden = QJsonDocument::fromJson(readFile(fixturePath(fixture) + "/golden.json")).object();
        int compared = 0;
        for (const auto& c : golden["tokenizer"].toObject()["chat"].toArray()) {
            const auto chatCase = c.toObject();
            const auto kwargs = chatCase["kwargs"].toObject();
            if (!chatCase["add_generation_prompt"].toBool() || (!kwargs.isEmpty() && !kwargs.contains("enable_thinking")))
                continue;
            std::vector<ChatMessage> conversation;
            for (const auto& value : chatCase["messages"].toArray()) {
                const QJsonObject m = value.toObject();
                conversation.push_back({m["role"].toString().toStdString(), m["content"].toString().toStdString(), ""});
            }
            std::vector<int> expected;
            for (const auto& id : chatCase["ids"].toArray()) expected.push_back(id.toInt());
            QCOMPARE(chat.promptTokens(conversation, kwargs["enable_thinking"].toBool(true)), expected);
            ++compared;
        }
        QVERIFY(compared > 0);
    }

    void followUpReusesTheConversation() {
        auto engine = loadEngine("tiny-qwen3moe");
        const Chat chat(*engine, fixturePath("tiny-qwen3moe").toStdString());
        auto session = engine->newSession();
        ChatOptions options;
        options.generate.maxNewTokens = 8;
        std::vector<ChatMessage> conversation{{"user", "What is a mixture of experts?", ""}};
        std::string streamed;
        const auto first = chat.reply(*session, conversation, options, [&](TextKind, std::string_view t) {
            streamed += t;
            return true;
        });
        QCOMPARE(streamed, first.answer + first.reasoning);
        QCOMPARE(first.stats.reusedTokens, 0);
        QCOMPARE(first.stats.generatedTokens, 8);

        conversation.push_back({"assistant", first.answer, first.reasoning});
        conversation.push_back({"user", "And then?", ""});
        const auto second = chat.reply(*session, conversation, options, [](TextKind, std::string_view) { return true; });
        const int promptLength = static_cast<int>(chat.promptTokens(conversation, true).size());
        QCOMPARE(second.stats.promptTokens, promptLength);
        // Everything up to the first answer is reused (its text may tokenize differently at the end).
        QVERIFY2(second.stats.reusedTokens >= static_cast<int>(chat.promptTokens({conversation[0]}, true).size()),
                 qPrintable(QString::number(second.stats.reusedTokens)));
        QCOMPARE(second.stats.reusedTokens + second.stats.prefilledTokens, promptLength);
    }

    void stopStringEndsTheAnswer() {
        auto engine = loadEngine("tiny-mixtral");
        const Chat chat(*engine, fixturePath("tiny-mixtral").toStdString());
        auto session = engine->newSession();
        ChatOptions options;
        options.generate.maxNewTokens = 12;
        const std::vector<ChatMessage> conversation{{"user", "Hi", ""}};
        const auto free = chat.reply(*session, conversation, options, [](TextKind, std::string_view) { return true; });
        QVERIFY(free.answer.size() >= 4);
        // Stop at a piece of what the model says anyway (greedy is deterministic).
        options.stopStrings = {free.answer.substr(2, 2)};
        session->reset();
        const auto stopped = chat.reply(*session, conversation, options, [](TextKind, std::string_view) { return true; });
        QVERIFY(stopped.stoppedByStopString);
        QVERIFY(stopped.answer.find(options.stopStrings[0]) == std::string::npos);
        QCOMPARE(stopped.answer, free.answer.substr(0, free.answer.find(options.stopStrings[0])));
    }

    void replyRunsTheTurnThroughTheGivenGenerator() {
        // The app's way in: its own generator (the engine thread's work around each token), the same turn.
        const Chat chat(fixturePath("tiny-qwen3moe").toStdString(), "qwen3_moe");
        const auto tokenizer = text::Tokenizer::load(fixturePath("tiny-qwen3moe").toStdString());
        const std::vector<int> script = tokenizer.encode("<think>\nweigh it\n</think>\n\nFine. END and more", false);
        const std::vector<ChatMessage> conversation{
            {"system", "Be brief.", ""}, {"user", "Hi", ""}, {"assistant", "Hello.", "greet back"}, {"user", "How are you?", ""}};
        ChatOptions options;
        options.generate.maxNewTokens = 64;
        options.stopStrings = {"END"};
        std::vector<int> prompt;
        GenerateOptions given;
        std::size_t fed = 0;
        std::string streamed;
        const auto reply = chat.reply(
            [&](std::span<const int> p, const GenerateOptions& o, const std::function<bool(int)>& onToken) {
                prompt.assign(p.begin(), p.end());
                given = o;
                GenerationStats stats;
                stats.promptTokens = static_cast<int>(p.size());
                while (fed < script.size()) {
                    ++stats.generatedTokens;
                    if (!onToken(script[fed++])) break;
                }
                return stats;
            },
            conversation, options, [&](TextKind, std::string_view t) {
                streamed += t;
                return true;
            });
        QCOMPARE(prompt, chat.promptTokens(conversation, true));
        QCOMPARE(given.maxNewTokens, 64);
        QCOMPARE(given.stopTokenIds, tokenizer.encode("<|im_end|>", false));
        QVERIFY(given.vocabularyLimit > 0);
        QCOMPARE(QString::fromStdString(reply.reasoning).trimmed(), QStringLiteral("weigh it"));
        QCOMPARE(QString::fromStdString(reply.answer).trimmed(), QStringLiteral("Fine."));
        QCOMPARE(streamed, reply.reasoning + reply.answer);
        QVERIFY(reply.stoppedByStopString);
        QVERIFY2(fed < script.size(), "the generator was not told to stop at the stop string");
        QCOMPARE(reply.stats.generatedTokens, static_cast<int>(fed));
    }

    void terminalChat() {
        QProcess p;
        p.start(cliPath(), {"chat", "--model", fixturePath("tiny-deepseekv2"), "--max-tokens", "4", "--temperature", "0"});
        QVERIFY(p.waitForStarted());
        p.write("Hello\n/system Be brief.\nAgain\n/quit\n");
        p.closeWriteChannel();
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 0);
        const QString err = QString::fromUtf8(p.readAllStandardError());
        const QString out = QString::fromUtf8(p.readAllStandardOutput());
        QCOMPARE(err.count("tok/s"), 2);
        QVERIFY2(out.contains("(system prompt set; new conversation)"), qPrintable(out));
    }
};

QTEST_GUILESS_MAIN(ChatTest)
#include "tst_chat.moc"
