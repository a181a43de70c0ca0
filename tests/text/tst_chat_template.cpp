// Chat templates as models ship them: loading from a model folder, the fixtures' golden renderings
// (made by transformers' apply_chat_template), the real templates of Qwen3, DeepSeek-V3/R1, Kimi-K2,
// Llama 3, Mistral/Mixtral and gpt-oss against Python's jinja2, the fallback formats, and
// `tandem-cli render-chat`.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "tandem/chat.h"
#include "tandem/error.h"
#include "test_support.h"
#include "text/chat_template.h"
#include "tandem/tokenizer.h"
#include "text_test_data.h"

// From tokenizer_json.h, whose Json (nlohmann::json) would clash with this file's ordered one.
namespace tandem::test {
nlohmann::json harmonyTokenizerJson();
text::Tokenizer tokenizerFrom(const nlohmann::json& config);
}  // namespace tandem::test

using tandem::text::ChatTemplate;
using Json = nlohmann::ordered_json;
using namespace tandem::test;

namespace {

std::filesystem::path path(const QString& dir, const char* file = nullptr) {
    std::filesystem::path p = dir.toStdString();
    return file ? p / file : p;
}

bool writeJson(const QString& file, const Json& j) { return writeFile(file, QByteArray::fromStdString(j.dump(2))); }

// Renders `messages`; the error message instead when rendering fails.
std::pair<bool, std::string> tryRender(const ChatTemplate& chat, const Json& messages, bool addGenerationPrompt,
                                       const Json& extra) {
    try {
        return {true, chat.render(messages, addGenerationPrompt, extra)};
    } catch (const tandem::Error& e) {
        return {false, e.what()};
    }
}

const Json& modelCases() {
    static const Json all = readTextTestJson("model_cases.json");
    return all;
}

}  // namespace

class ChatTemplateTest : public QObject {
    Q_OBJECT

private slots:
    // ---- the fixtures: transformers' own renderings ----------------------------------------------
    void fixtureGoldenChat_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<int>("index");
        for (const QString& f : fixtureNames()) {
            const Json golden = Json::parse(readFile(fixturePath(f) + "/golden.json").toStdString());
            for (std::size_t i = 0; i < golden["tokenizer"]["chat"].size(); ++i)
                QTest::newRow(qPrintable(QString("%1/chat-%2").arg(f).arg(i))) << f << static_cast<int>(i);
        }
    }
    void fixtureGoldenChat() {
        QFETCH(QString, fixture);
        QFETCH(int, index);
        const Json golden = Json::parse(readFile(fixturePath(fixture) + "/golden.json").toStdString());
        const Json& c = golden["tokenizer"]["chat"][static_cast<std::size_t>(index)];
        const ChatTemplate chat = ChatTemplate::load(path(fixturePath(fixture)));
        QVERIFY(!chat.isFallback());
        const std::string text = chat.render(c["messages"], c["add_generation_prompt"].get<bool>(), c["kwargs"]);
        QCOMPARE(QString::fromStdString(text), QString::fromStdString(c["text"].get<std::string>()));
    }

    // ---- the real templates of the supported model families --------------------------------------
    void modelTemplates_data() {
        QTest::addColumn<int>("index");
        for (std::size_t i = 0; i < modelCases().size(); ++i) {
            const Json& c = modelCases()[i];
            QTest::newRow(qPrintable(QString::fromStdString(c["template"].get<std::string>() + ": " + c["name"].get<std::string>())))
                << static_cast<int>(i);
        }
    }
    void modelTemplates() {
        QFETCH(int, index);
        const Json& c = modelCases()[static_cast<std::size_t>(index)];
        // A model folder as it is downloaded: the template and special tokens in tokenizer_config.json.
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        Json config = c["special_tokens"];
        config["chat_template"] = readTextTestFile(c["template"]);
        QVERIFY(writeJson(dir.filePath("tokenizer_config.json"), config));
        ChatTemplate chat = ChatTemplate::load(path(dir.path()), "");
        chat.setClock(referenceNow);
        const auto [ok, text] = tryRender(chat, c["messages"], c["add_generation_prompt"].get<bool>(), c["extra"]);
        if (c.contains("text")) {
            QVERIFY2(ok, text.c_str());
            QCOMPARE(QString::fromStdString(text), QString::fromStdString(c["text"].get<std::string>()));
        } else {
            QVERIFY2(!ok, "jinja2 refused this conversation, so must we");
            QVERIFY2(text.find(c["error"].get<std::string>()) != std::string::npos, text.c_str());
        }
    }

    void everyModelFamilyIsCovered() {
        std::map<std::string, int> perTemplate;
        for (const auto& c : modelCases()) ++perTemplate[c["template"]];
        for (const char* t : {"qwen3.jinja", "deepseek_v3.jinja", "deepseek_v3_1.jinja", "deepseek_r1.jinja", "kimi_k2.jinja", "kimi_k2_thinking.jinja",
                              "llama3.jinja", "mixtral.jinja", "mistral_nemo.jinja", "gpt_oss.jinja", "glm4_6.jinja"})
            QVERIFY2(perTemplate[t] >= 3, t);
    }

    // ---- where the template comes from -----------------------------------------------------------
    void chatTemplateJinjaOverridesTokenizerConfig() {
        QTemporaryDir dir;
        QVERIFY(writeJson(dir.filePath("tokenizer_config.json"), Json{{"chat_template", "from config"}, {"eos_token", "</s>"}}));
        QVERIFY(writeFile(dir.filePath("chat_template.jinja"), "from file {{ eos_token }}\n"));
        const ChatTemplate chat = ChatTemplate::load(path(dir.path()), "mixtral");
        QCOMPARE(QString::fromStdString(chat.render(Json::array(), true)), QString("from file </s>"));
    }

    void chatTemplateJsonIsTheLastResort() {
        QTemporaryDir dir;
        QVERIFY(writeJson(dir.filePath("tokenizer_config.json"), Json{{"bos_token", "<s>"}}));
        QVERIFY(writeJson(dir.filePath("chat_template.json"), Json{{"chat_template", "{{ bos_token }}{{ messages|length }}"}}));
        const ChatTemplate chat = ChatTemplate::load(path(dir.path()), "mixtral");
        QVERIFY(!chat.isFallback());
        QCOMPARE(QString::fromStdString(chat.render(Json::array({Json::object()}), true)), QString("<s>1"));
    }

    void namedTemplatesPickToolUseWhenToolsAreGiven() {
        QTemporaryDir dir;
        const Json list = Json::array({Json{{"name", "default"}, {"template", "plain"}}, Json{{"name", "tool_use"}, {"template", "tools: {{ tools|length }}"}}});
        QVERIFY(writeJson(dir.filePath("tokenizer_config.json"), Json{{"chat_template", list}}));
        const ChatTemplate chat = ChatTemplate::load(path(dir.path()), "");
        QCOMPARE(QString::fromStdString(chat.render(Json::array(), true)), QString("plain"));
        QCOMPARE(QString::fromStdString(chat.render(Json::array(), true, Json{{"tools", Json::array({1, 2})}})), QString("tools: 2"));
    }

    void specialTokensAsAddedTokenObjects() {
        QTemporaryDir dir;
        const Json config = Json::parse(R"({"bos_token": {"__type": "AddedToken", "content": "<|bos|>", "lstrip": false},
            "eos_token": "<|eos|>", "pad_token": null, "unk_token": "",
            "chat_template": "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ unk_token is defined }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}"})");
        QVERIFY(writeJson(dir.filePath("tokenizer_config.json"), config));
        const ChatTemplate chat = ChatTemplate::load(path(dir.path()), "");
        QCOMPARE(QString::fromStdString(chat.render(Json::array(), false)), QString("<|bos|>|<|eos|>|False|False|None|None|False"));
    }

    void specialTokensMapFillsTheGaps() {
        QTemporaryDir dir;
        QVERIFY(writeJson(dir.filePath("tokenizer_config.json"), Json{{"eos_token", "<|eot|>"}, {"chat_template", "{{ bos_token }}|{{ eos_token }}"}}));
        QVERIFY(writeJson(dir.filePath("special_tokens_map.json"), Json{{"bos_token", Json{{"content", "<|bot|>"}}}, {"eos_token", "</s>"}}));
        const ChatTemplate chat = ChatTemplate::load(path(dir.path()), "");
        QCOMPARE(QString::fromStdString(chat.render(Json::array(), true)), QString("<|bot|>|<|eot|>"));
    }

    void extraVariablesOverrideSpecialTokens() {
        const ChatTemplate chat("{{ eos_token }} {{ enable_thinking }} {{ tools|length }}", Json{{"eos_token", "</s>"}});
        QCOMPARE(QString::fromStdString(chat.render(Json::array(), true, Json{{"eos_token", "<e>"}, {"enable_thinking", false},
                                                                             {"tools", Json::array({Json::object()})}})),
                 QString("<e> False 1"));
    }

    // ---- models without a template ---------------------------------------------------------------
    void fallbackFormats_data() {
        QTest::addColumn<QString>("modelType");
        QTest::addColumn<QString>("expected");
        QTest::newRow("qwen3_moe") << "qwen3_moe"
                                   << "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                      "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n";
        QTest::newRow("deepseek_v3") << "deepseek_v3"
                                     << "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>"
                                        "<｜User｜>Bye<｜Assistant｜>";
        QTest::newRow("deepseek_v2") << "deepseek_v2"
                                     << "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>"
                                        "<｜User｜>Bye<｜Assistant｜>";
        QTest::newRow("mixtral") << "mixtral" << "<s>[INST] Be brief.\n\nHi [/INST]Hello</s>[INST] Bye [/INST]";
    }
    void fallbackFormats() {
        QFETCH(QString, modelType);
        QFETCH(QString, expected);
        QTemporaryDir dir;
        QVERIFY(writeJson(dir.filePath("config.json"), Json{{"model_type", modelType.toStdString()}}));
        const ChatTemplate chat = ChatTemplate::load(path(dir.path()));
        QVERIFY(chat.isFallback());
        QVERIFY2(QString::fromStdString(chat.warning()).contains("has no chat template; using the standard " + modelType),
                 chat.warning().c_str());
        const Json messages = Json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}])");
        QCOMPARE(QString::fromStdString(chat.render(messages, true)), expected);
    }

    void fallbackUsesTheTokenizersSpecialTokens() {
        QTemporaryDir dir;
        QVERIFY(writeJson(dir.filePath("tokenizer_config.json"), Json{{"bos_token", "<B>"}, {"eos_token", "<E>"}}));
        const ChatTemplate chat = ChatTemplate::load(path(dir.path()), "mixtral");
        QCOMPARE(QString::fromStdString(chat.render(Json::parse(R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])"), false)),
                 QString("<B>[INST] x [/INST]y<E>"));
    }

    void unknownModelWithoutTemplateFails() {
        QTemporaryDir dir;
        try {
            ChatTemplate::load(path(dir.path()), "llama4");
            QFAIL("a model without a template and without a known format must be refused");
        } catch (const tandem::Error& e) {
            QVERIFY2(QString(e.what()).contains("no chat template") && QString(e.what()).contains("'llama4'"), e.what());
        }
    }

    // ---- broken inputs ---------------------------------------------------------------------------
    void malformedTokenizerConfigFails() {
        QTemporaryDir dir;
        QVERIFY(writeFile(dir.filePath("tokenizer_config.json"), "{\"chat_template\": "));
        try {
            ChatTemplate::load(path(dir.path()), "qwen3_moe");
            QFAIL("broken JSON must be reported");
        } catch (const tandem::Error& e) {
            QVERIFY2(QString(e.what()).contains("tokenizer_config.json is not valid JSON"), e.what());
        }
    }

    void templateSyntaxErrorNamesTheFile() {
        QTemporaryDir dir;
        QVERIFY(writeJson(dir.filePath("tokenizer_config.json"), Json{{"chat_template", "{% for m in messages %}\n{{ m.content }"}}));
        try {
            ChatTemplate::load(path(dir.path()), "");
            QFAIL("a broken template must be reported when loading");
        } catch (const tandem::Error& e) {
            QVERIFY2(QString(e.what()).contains("tokenizer_config.json, line 2, column 14: syntax error"), e.what());
        }
    }

    void messagesMustBeAnArray() {
        const ChatTemplate chat("{{ messages }}", Json::object());
        QVERIFY_EXCEPTION_THROWN(chat.render(Json{{"role", "user"}}, true), tandem::Error);
    }

    // ---- the command line ------------------------------------------------------------------------
    // gpt-oss through tandem::Chat (tandem-cli chat and the app): the prompt ends with the opening of the
    // assistant's header, <|return|> and <|call|> end the turn, and the output's analysis channel is the
    // reasoning, its final channel the answer, streamed token by token with the headers hidden.
    void gptOssChatTurn() {
        QTemporaryDir dir;
        QVERIFY(writeFile(dir.path() + "/tokenizer.json", QByteArray::fromStdString(harmonyTokenizerJson().dump())));
        QVERIFY(writeJson(dir.path() + "/tokenizer_config.json", {{"eos_token", "<|return|>"}, {"pad_token", "<|endoftext|>"}}));
        QVERIFY(writeFile(dir.path() + "/chat_template.jinja", QByteArray::fromStdString(readTextTestFile("gpt_oss.jinja"))));
        const tandem::Chat chat(path(dir.path()), "gpt_oss");
        const auto tokenizer = tokenizerFrom(harmonyTokenizerJson());
        const std::vector<tandem::ChatMessage> conversation{{"system", "Be brief.", ""},
                                                            {"user", "Is 91 prime?", ""},
                                                            {"assistant", "No, 7 × 13.", "91 = 7 * 13."},
                                                            {"user", "And 97?", ""}};
        const auto output = tokenizer.encode("<|channel|>analysis<|message|>No divisor up to 9: prime ✓.<|end|>"
                                             "<|start|>assistant<|channel|>final<|message|>Yes, 97 is prime.",
                                             false);
        std::string prompt;
        std::vector<int> stops;
        std::vector<std::pair<tandem::TextKind, std::string>> pieces;
        const auto reply = chat.reply(
            [&](std::span<const int> tokens, const tandem::GenerateOptions& options, const std::function<bool(int)>& onToken) {
                prompt = tokenizer.decode(tokens, false);
                stops = options.stopTokenIds;
                for (const int id : output)
                    if (!onToken(id)) break;
                return tandem::GenerationStats{};
            },
            conversation, {}, [&](tandem::TextKind kind, std::string_view text) {
                pieces.emplace_back(kind, std::string(text));
                return true;
            });
        QVERIFY(prompt.find("<|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>") != std::string::npos);
        QVERIFY(prompt.find("<|start|>assistant<|channel|>final<|message|>No, 7 × 13.<|end|>") != std::string::npos);
        QVERIFY(prompt.find("91 = 7 * 13.") == std::string::npos);  // earlier thinking is dropped
        QVERIFY(prompt.find("Reasoning: medium") != std::string::npos);  // the template's default effort
        QVERIFY(prompt.ends_with("<|start|>user<|message|>And 97?<|end|><|start|>assistant"));
        QVERIFY(std::find(stops.begin(), stops.end(), 1006) != stops.end());  // <|return|>
        QVERIFY(std::find(stops.begin(), stops.end(), 1007) != stops.end());  // <|call|>
        QCOMPARE(reply.reasoning, std::string("No divisor up to 9: prime ✓."));
        QCOMPARE(reply.answer, std::string("Yes, 97 is prime."));
        QVERIFY(pieces.size() > 4);  // streamed, not given at the end
        bool answering = false;
        for (const auto& [kind, text] : pieces) {
            if (kind == tandem::TextKind::Answer) answering = true;
            QVERIFY(!(answering && kind == tandem::TextKind::Reasoning));
            QVERIFY(text.find("<|") == std::string::npos && text.find("analysis") == std::string::npos);
        }
    }

    // ChatOptions::reasoningEffort reaches gpt-oss's template (tandem-cli chat --reasoning-effort); a
    // value the template does not know is refused before anything runs.
    void gptOssReasoningEffort() {
        QTemporaryDir dir;
        QVERIFY(writeFile(dir.path() + "/tokenizer.json", QByteArray::fromStdString(harmonyTokenizerJson().dump())));
        QVERIFY(writeJson(dir.path() + "/tokenizer_config.json", {{"eos_token", "<|return|>"}, {"pad_token", "<|endoftext|>"}}));
        QVERIFY(writeFile(dir.path() + "/chat_template.jinja", QByteArray::fromStdString(readTextTestFile("gpt_oss.jinja"))));
        const tandem::Chat chat(path(dir.path()), "gpt_oss");
        const auto tokenizer = tokenizerFrom(harmonyTokenizerJson());
        const std::vector<tandem::ChatMessage> conversation{{"user", "Is 97 prime?", ""}};
        std::string prompt;
        const auto generator = [&](std::span<const int> tokens, const tandem::GenerateOptions&, const std::function<bool(int)>&) {
            prompt = tokenizer.decode(tokens, false);
            return tandem::GenerationStats{};
        };
        const auto ignore = [](tandem::TextKind, std::string_view) { return true; };
        tandem::ChatOptions options;
        options.reasoningEffort = "high";
        chat.reply(generator, conversation, options, ignore);
        QVERIFY2(prompt.find("Reasoning: high") != std::string::npos, prompt.c_str());
        options.reasoningEffort = "extreme";
        prompt.clear();
        QVERIFY_THROWS_EXCEPTION(tandem::Error, chat.reply(generator, conversation, options, ignore));
        QVERIFY(prompt.empty());
    }

    void cliRendersByteExact_data() {
        QTest::addColumn<QString>("fixture");
        for (const QString& f : fixtureNames()) QTest::newRow(qPrintable(f)) << f;
    }
    void cliRendersByteExact() {
        QFETCH(QString, fixture);
        const Json golden = Json::parse(readFile(fixturePath(fixture) + "/golden.json").toStdString());
        for (const auto& c : golden["tokenizer"]["chat"]) {
            QStringList args{"render-chat", "--model", fixturePath(fixture)};
            for (const auto& [name, value] : c["kwargs"].items()) args << "--var" << QString::fromStdString(name + "=" + value.dump());
            if (!c["add_generation_prompt"].get<bool>()) args << "--no-generation-prompt";
            QProcess cli;
            cli.start(cliPath(), args);
            QVERIFY(cli.waitForStarted());
            cli.write(QByteArray::fromStdString(c["messages"].dump()));
            cli.closeWriteChannel();
            QVERIFY(cli.waitForFinished(60000));
            QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
            QCOMPARE(cli.readAllStandardOutput(), QByteArray::fromStdString(c["text"].get<std::string>()));
        }
    }

    void cliWithoutGenerationPrompt() {
        QProcess cli;
        cli.start(cliPath(), {"render-chat", "--model", fixturePath("tiny-qwen3moe"), "--no-generation-prompt"});
        QVERIFY(cli.waitForStarted());
        cli.write(R"([{"role": "user", "content": "Hi"}])");
        cli.closeWriteChannel();
        QVERIFY(cli.waitForFinished(60000));
        QCOMPARE(cli.exitCode(), 0);
        QCOMPARE(cli.readAllStandardOutput(), QByteArray("<|im_start|>user\nHi<|im_end|>\n"));
    }

    void cliRejectsBadInput_data() {
        QTest::addColumn<QStringList>("extraArgs");
        QTest::addColumn<QByteArray>("stdinText");
        QTest::addColumn<QString>("message");
        QTest::newRow("var without =") << QStringList{"--var", "enable_thinking"} << QByteArray("[]") << "--var expects NAME=JSON";
        QTest::newRow("var not JSON") << QStringList{"--var", "effort=high"} << QByteArray("[]") << "is not JSON";
        QTest::newRow("stdin not JSON") << QStringList{} << QByteArray("[{") << "standard input is not a JSON array";
        QTest::newRow("stdin not an array") << QStringList{} << QByteArray("{}") << "must be a JSON array";
    }
    void cliRejectsBadInput() {
        QFETCH(QStringList, extraArgs);
        QFETCH(QByteArray, stdinText);
        QFETCH(QString, message);
        QProcess cli;
        cli.start(cliPath(), QStringList{"render-chat", "--model", fixturePath("tiny-qwen3moe")} + extraArgs);
        QVERIFY(cli.waitForStarted());
        cli.write(stdinText);
        cli.closeWriteChannel();
        QVERIFY(cli.waitForFinished(60000));
        QCOMPARE(cli.exitCode(), 1);
        const QString err = cli.readAllStandardError();
        QVERIFY2(err.contains(message), qPrintable(err));
    }
};

QTEST_GUILESS_MAIN(ChatTemplateTest)
#include "tst_chat_template.moc"
