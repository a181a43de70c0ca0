// The app's text handling (the engine's tandem::Chat behind ChatFormatter): prompts exactly as
// transformers makes them, answers decoded with reasoning apart, characters never split, stop strings,
// clear errors.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "tandem/error.h"
#include "tandem/tokenizer.h"
#include "test_support.h"
#include "ui/chat/markdown_segments.h"
#include "ui/text/chat_formatter.h"
#include "ui_test_support.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

QJsonObject golden(const QString& fixture) {
    return QJsonDocument::fromJson(test::readFile(test::fixturePath(fixture) + "/golden.json")).object();
}

std::vector<int> encode(const QString& fixture, const std::string& text) {
    return text::Tokenizer::load(test::fixturePath(fixture).toStdString()).encode(text, false);
}

// Answers a one-question conversation with `ids` as the model's tokens; returns what onText showed,
// which must be what the answer says it was.
TextDelta decodeAll(const ChatFormatter& formatter, const std::vector<int>& ids) {
    TextDelta shown;
    const ChatAnswer answer = formatter.answer(
        {{"user", "hi"}}, {}, {},
        [&](std::span<const int> prompt, const GenerateOptions& options, const std::function<bool(int)>& onToken) {
            return test::scriptedGeneration(ids, prompt, options, onToken);
        },
        [&](const TextDelta& text) { shown += text; });
    if (answer.text.answer != shown.answer || answer.text.reasoning != shown.reasoning) return {"(differs)", "(differs)"};
    return shown;
}

}  // namespace

class ChatTextTest : public QObject {
    Q_OBJECT

private slots:
    void promptsMatchTransformers_data() {
        QTest::addColumn<QString>("fixture");
        for (const QString& name : test::fixtureNames()) QTest::newRow(qPrintable(name)) << name;
    }

    void promptsMatchTransformers() {
        // golden.json's chat cases: the ids of transformers' apply_chat_template.
        QFETCH(QString, fixture);
        const auto formatter = makeChatFormatter(test::fixturePath(fixture), {});
        int compared = 0;
        for (const auto& value : golden(fixture)["tokenizer"].toObject()["chat"].toArray()) {
            const QJsonObject c = value.toObject();
            if (!c["kwargs"].toObject().isEmpty() || !c["add_generation_prompt"].toBool()) continue;
            QList<PromptMessage> messages;
            for (const auto& entry : c["messages"].toArray())
                messages.append({entry.toObject()["role"].toString(), entry.toObject()["content"].toString()});
            std::vector<int> expected;
            for (const auto& id : c["ids"].toArray()) expected.push_back(id.toInt());
            QCOMPARE(formatter->encodeConversation(messages), expected);
            ++compared;
        }
        QVERIFY(compared > 0);
    }

    void answersStopAtTheEndOfTurn() {
        // The generator gets the conversation's prompt and the options with the end-of-turn token added.
        const auto formatter = makeChatFormatter(test::fixturePath("tiny-qwen3moe"), "qwen3_moe");
        const QList<PromptMessage> messages{{"system", "Be brief."}, {"user", "hi"}};
        GenerateOptions asked;
        asked.maxNewTokens = 7;
        std::vector<int> prompt;
        GenerateOptions options;
        formatter->answer(
            messages, asked, {},
            [&](std::span<const int> p, const GenerateOptions& o, const std::function<bool(int)>&) {
                prompt.assign(p.begin(), p.end());
                options = o;
                return GenerationStats{};
            },
            [](const TextDelta&) {});
        QCOMPARE(prompt, formatter->encodeConversation(messages));
        QCOMPARE(options.stopTokenIds, encode("tiny-qwen3moe", "<|im_end|>"));
        QVERIFY(options.vocabularyLimit > 0);
        QCOMPARE(options.maxNewTokens, 7);
    }

    void answersEndBeforeAStopString() {
        const auto formatter = makeChatFormatter(test::fixturePath("tiny-qwen3moe"), "qwen3_moe");
        const std::vector<int> ids = encode("tiny-qwen3moe", "Sure. User: and more after it");
        int fed = 0;
        TextDelta shown;
        const ChatAnswer answer = formatter->answer(
            {{"user", "hi"}}, {}, {"User:", "never"},
            [&](std::span<const int> prompt, const GenerateOptions& options, const std::function<bool(int)>& onToken) {
                return test::scriptedGeneration(ids, prompt, options, [&](int token) {
                    ++fed;
                    return onToken(token);
                });
            },
            [&](const TextDelta& text) { shown += text; });
        QVERIFY(answer.stoppedByStopString);
        QCOMPARE(shown.answer, QStringLiteral("Sure. "));
        QCOMPARE(answer.text.answer, QStringLiteral("Sure. "));
        // The model was told to stop at the token that completed the stop string.
        QVERIFY2(fed < static_cast<int>(ids.size()) && answer.stats.generatedTokens == fed, qPrintable(QString::number(fed)));
    }

    void separatesReasoningFromTheAnswer() {
        const auto formatter = makeChatFormatter(test::fixturePath("tiny-qwen3moe"), "qwen3_moe");
        const TextDelta all =
            decodeAll(*formatter, encode("tiny-qwen3moe", "<think>\nweigh the options\n</think>\n\nThe answer.<|im_end|>"));
        QCOMPARE(all.reasoning.trimmed(), QStringLiteral("weigh the options"));
        QCOMPARE(all.answer.trimmed(), QStringLiteral("The answer."));
    }

    void deepSeekAnswersStartInsideTheReasoning() {
        // Its template ends the prompt with "<think>\n": the first tokens are reasoning.
        const auto formatter = makeChatFormatter(test::fixturePath("tiny-deepseekv3-fp8"), "deepseek_v3");
        const TextDelta all = decodeAll(*formatter, encode("tiny-deepseekv3-fp8", "plan first</think>\n\nDone."));
        QCOMPARE(all.reasoning.trimmed(), QStringLiteral("plan first"));
        QCOMPARE(all.answer.trimmed(), QStringLiteral("Done."));
    }

    void neverShowsHalfACharacter() {
        const auto formatter = makeChatFormatter(test::fixturePath("tiny-qwen3moe"), "qwen3_moe");
        const QString text = QStringLiteral("你好, Grüße 👍 a");
        const std::vector<int> ids = encode("tiny-qwen3moe", text.toStdString());
        QVERIFY2(ids.size() > static_cast<std::size_t>(text.size() / 2), "the test needs characters spread over tokens");
        QString shown;
        int pieces = 0;
        bool whole = true;
        formatter->answer(
            {{"user", "hi"}}, {}, {},
            [&](std::span<const int> prompt, const GenerateOptions& options, const std::function<bool(int)>& onToken) {
                return test::scriptedGeneration(ids, prompt, options, onToken);
            },
            [&](const TextDelta& delta) {
                shown += delta.answer;
                ++pieces;
                if (shown.contains(QChar(0xFFFD)) || !text.startsWith(shown)) whole = false;
            });
        QVERIFY2(whole, qPrintable(shown));
        QVERIFY(pieces > 1);  // it streamed
        QCOMPARE(shown, text);
    }

    void missingTokenizerIsAClearError() {
        QTemporaryDir dir;
        try {
            makeChatFormatter(dir.path(), "qwen3_moe");
            QFAIL("a folder without tokenizer.json was accepted");
        } catch (const tandem::Error& e) {
            QVERIFY2(QString(e.what()).contains("tokenizer.json"), e.what());
        }
    }

    void splitsFencedCodeFromProse() {
        const auto segments = splitMarkdown("Intro\n\n```python\nprint('a')\n\n```\nAfter\n~~~\nopen");
        QCOMPARE(segments.size(), 4);
        QCOMPARE(segments[0].text, QStringLiteral("Intro"));
        QCOMPARE(segments[1].kind, MarkdownSegment::Kind::Code);
        QCOMPARE(segments[1].language, QStringLiteral("python"));
        QCOMPARE(segments[1].text, QStringLiteral("print('a')\n"));
        QCOMPARE(segments[2].text, QStringLiteral("After"));
        // A fence still open (an answer being streamed) runs to the end.
        QCOMPARE(segments[3].kind, MarkdownSegment::Kind::Code);
        QCOMPARE(segments[3].text, QStringLiteral("open"));
    }
};

QTEST_GUILESS_MAIN(ChatTextTest)
#include "tst_chat_text.moc"
