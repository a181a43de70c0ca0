// The app's text handling (the engine's tandem::Chat behind ChatFormatter): prompts exactly as
// transformers makes them, answers decoded with reasoning apart, characters never split, clear errors.
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

using namespace tandem;
using namespace tandem::ui;

namespace {

QJsonObject golden(const QString& fixture) {
    return QJsonDocument::fromJson(test::readFile(test::fixturePath(fixture) + "/golden.json")).object();
}

std::vector<int> encode(const QString& fixture, const std::string& text) {
    return text::Tokenizer::load(test::fixturePath(fixture).toStdString()).encode(text, false);
}

// Feeds ids through the decoder of a one-question conversation and joins what comes out.
TextDelta decodeAll(const ChatFormatter& formatter, const std::vector<int>& ids) {
    auto decoder = formatter.newAnswerDecoder({{"user", "hi"}});
    TextDelta all;
    for (int id : ids) all += decoder->push(id);
    all += decoder->finish();
    return all;
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
        const auto formatter = makeChatFormatter(test::fixturePath("tiny-qwen3moe"), "qwen3_moe");
        const auto options = formatter->answerOptions({});
        QCOMPARE(options.stopTokenIds, encode("tiny-qwen3moe", "<|im_end|>"));
        QVERIFY(options.vocabularyLimit > 0);
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
        auto decoder = formatter->newAnswerDecoder({{"user", "hi"}});
        QString shown;
        for (int id : ids) {
            shown += decoder->push(id).answer;
            QVERIFY2(!shown.contains(QChar(0xFFFD)) && text.startsWith(shown), qPrintable(shown));
        }
        shown += decoder->finish().answer;
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
