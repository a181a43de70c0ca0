// The stand-in text handling: prompts rendered like the fixtures' chat templates, exact decoding of
// the reference ids, reasoning split from the answer, characters split across tokens, clear errors.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "tandem/error.h"
#include "test_support.h"
#include "ui/chat/markdown_segments.h"
#include "ui/text/standin_chat_formatter.h"
#include "ui/text/utf8_stream.h"

using namespace tandem;
using namespace tandem::ui;

namespace {

QJsonObject golden(const QString& fixture) {
    return QJsonDocument::fromJson(test::readFile(test::fixturePath(fixture) + "/golden.json")).object();
}

// Feeds ids through a decoder and joins what comes out.
TextDelta decodeAll(const ChatFormatter& formatter, const std::vector<int>& ids) {
    auto decoder = formatter.newAnswerDecoder();
    TextDelta all;
    for (int id : ids) all += decoder->push(id);
    all += decoder->finish();
    return all;
}

}  // namespace

class ChatTextTest : public QObject {
    Q_OBJECT

private slots:
    void rendersLikeTheChatTemplate_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<int>("chatCase");
        // Cases whose assistant turns carry no reasoning render identically; for ChatML the stored answer
        // (reasoning already split off) also matches the template's own stripping.
        QTest::newRow("qwen3 one question") << "tiny-qwen3moe" << 0;
        QTest::newRow("qwen3 system and history") << "tiny-qwen3moe" << 2;
        QTest::newRow("qwen3 code and emoji") << "tiny-qwen3moe" << 4;
        QTest::newRow("deepseek-v3 one question") << "tiny-deepseekv3-fp8" << 0;
        QTest::newRow("deepseek-v3 history") << "tiny-deepseekv3-fp8" << 4;
        QTest::newRow("deepseek-v2 one question") << "tiny-deepseekv2" << 0;
        QTest::newRow("mixtral one question") << "tiny-mixtral" << 0;
        QTest::newRow("mixtral history") << "tiny-mixtral" << 4;
    }

    void rendersLikeTheChatTemplate() {
        QFETCH(QString, fixture);
        QFETCH(int, chatCase);
        const QJsonObject c = golden(fixture)["tokenizer"].toObject()["chat"].toArray()[chatCase].toObject();
        QList<PromptMessage> messages;
        for (const auto& entry : c["messages"].toArray()) {
            const QJsonObject m = entry.toObject();
            QString content = m["content"].toString();
            if (content.contains("</think>")) content = content.section("</think>", -1).trimmed();
            messages.append({m["role"].toString(), content});
        }
        const auto formatter = StandInChatFormatter::load(test::fixturePath(fixture), {});
        QCOMPARE(formatter->render(messages), c["text"].toString());
    }

    void decodesReferenceIdsExactly_data() {
        QTest::addColumn<QString>("fixture");
        for (const QString& name : test::fixtureNames()) QTest::newRow(qPrintable(name)) << name;
    }

    void decodesReferenceIdsExactly() {
        QFETCH(QString, fixture);
        const auto vocabulary = ByteVocabulary::load(test::fixturePath(fixture) + "/tokenizer.json");
        const QJsonArray cases = golden(fixture)["tokenizer"].toObject()["encode"].toArray();
        QVERIFY(!cases.isEmpty());
        for (const auto& value : cases) {
            const QJsonObject entry = value.toObject();
            QByteArray bytes;
            for (const auto& id : entry["ids"].toArray()) bytes += vocabulary.bytes(id.toInt());
            QCOMPARE(QString::fromUtf8(bytes), entry["decoded"].toString());
        }
    }

    void encodingRoundTripsWithAddedTokens() {
        const auto vocabulary = ByteVocabulary::load(test::fixturePath("tiny-qwen3moe") + "/tokenizer.json");
        const QString text = QStringLiteral("<|im_start|>user\nGrüße, 你好 👍<|im_end|>\n");
        const std::vector<int> ids = vocabulary.encode(text);
        QCOMPARE(ids.front(), *vocabulary.addedTokenId("<|im_start|>"));
        QCOMPARE(ids[ids.size() - 2], *vocabulary.addedTokenId("<|im_end|>"));
        QByteArray bytes;
        for (int id : ids) bytes += vocabulary.bytes(id);
        QCOMPARE(QString::fromUtf8(bytes), text);
        for (int id : ids) QVERIFY(id >= 0 && id < vocabulary.size());
    }

    void separatesReasoningFromTheAnswer() {
        const auto formatter = StandInChatFormatter::load(test::fixturePath("tiny-qwen3moe"), "qwen3_moe");
        const auto vocabulary = ByteVocabulary::load(test::fixturePath("tiny-qwen3moe") + "/tokenizer.json");
        const std::vector<int> ids = vocabulary.encode("<think>\nweigh the options\n</think>\n\nThe answer.<|im_end|>");
        const TextDelta all = decodeAll(*formatter, ids);
        QCOMPARE(all.reasoning.trimmed(), QStringLiteral("weigh the options"));
        QCOMPARE(all.answer, QStringLiteral("The answer."));
    }

    void deepSeekAnswersStartInsideTheReasoning() {
        // Its template ends the prompt with "<think>\n": the first tokens are reasoning.
        const auto formatter = StandInChatFormatter::load(test::fixturePath("tiny-deepseekv3-fp8"), "deepseek_v3");
        QVERIFY(formatter->render({{"user", "hi"}}).endsWith("<think>\n"));
        const auto vocabulary = ByteVocabulary::load(test::fixturePath("tiny-deepseekv3-fp8") + "/tokenizer.json");
        const TextDelta all = decodeAll(*formatter, vocabulary.encode("plan first</think>\n\nDone."));
        QCOMPARE(all.reasoning, QStringLiteral("plan first"));
        QCOMPARE(all.answer, QStringLiteral("Done."));
    }

    void holdsBackAPartialCharacter() {
        Utf8Stream stream;
        const QByteArray ni = QStringLiteral("你").toUtf8();
        QCOMPARE(ni.size(), 3);
        QCOMPARE(stream.push(ni.left(1)), QString());
        QCOMPARE(stream.push(ni.mid(1, 1)), QString());
        QCOMPARE(stream.push(ni.mid(2) + "a"), QStringLiteral("你a"));
        QCOMPARE(stream.push(ni.left(2)), QString());
        QCOMPARE(stream.finish(), QString(QChar(0xFFFD)));
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
