// The streaming detokenizer: whole characters only, special tokens hidden, reasoning apart from the
// answer, and the same text as decoding everything at once, SentencePiece spacing included.
#include <QTest>

#include "tandem/stream_decoder.h"
#include "test_support.h"
#include "text/utf8.h"
#include "tokenizer_json.h"

using namespace tandem::text;
using namespace tandem::test;

namespace {

struct Collected {
    std::string answer;
    std::string reasoning;
    std::string all;  // both, in order
};

void collect(const std::vector<StreamText>& pieces, Collected& into) {
    for (const StreamText& piece : pieces) {
        QVERIFY2(utf8::firstInvalidOffset(piece.text) == utf8::kValid, "a piece is not whole UTF-8");
        QVERIFY2(!piece.text.empty(), "an empty piece was emitted");
        (piece.kind == StreamText::Kind::Answer ? into.answer : into.reasoning) += piece.text;
        into.all += piece.text;
    }
}

Collected stream(const Tokenizer& tokenizer, const std::vector<int>& ids, StreamDecoder::Options options = {}) {
    StreamDecoder decoder(tokenizer, options);
    Collected out;
    for (const int id : ids) collect(decoder.push(id), out);
    collect(decoder.finish(), out);
    return out;
}

Tokenizer qwen() { return Tokenizer::load(fixturePath("tiny-qwen3moe").toStdString()); }

}  // namespace

class StreamDecoderTest : public QObject {
    Q_OBJECT

private slots:
    // "☃" is three byte-level tokens (E2, 98, 83): nothing shows until the last one arrives.
    void holdsBackSplitCharacters() {
        StreamDecoder decoder(qwen());
        QVERIFY(decoder.push(64).size() == 1);  // "a"
        QVERIFY(decoder.push(158).empty());
        QVERIFY(decoder.push(246).empty());
        const auto snowman = decoder.push(225);
        QCOMPARE(snowman.size(), std::size_t{1});
        QCOMPARE(snowman[0].text, std::string("☃"));
        QCOMPARE(snowman[0].kind, StreamText::Kind::Answer);
        QVERIFY(decoder.finish().empty());
    }

    // Special tokens named in shownSpecialTokens come out as their text (a server's tool-call tags); the
    // others stay hidden.
    void shownSpecialTokensComeOut() {
        const Tokenizer tokenizer = qwen();
        const auto end = tokenizer.tokenToId("<|im_end|>");
        QVERIFY(end && tokenizer.isSpecial(*end));
        std::vector<int> ids = tokenizer.encode("call ", false);
        ids.push_back(*end);
        const auto tail = tokenizer.encode(" done", false);
        ids.insert(ids.end(), tail.begin(), tail.end());
        QCOMPARE(stream(tokenizer, ids).answer, std::string("call  done"));
        StreamDecoder shown(tokenizer, {false, {*end}});
        std::string text;
        for (const int id : ids)
            for (const auto& piece : shown.push(id)) text += piece.text;
        for (const auto& piece : shown.finish()) text += piece.text;
        QCOMPARE(text, std::string("call <|im_end|> done"));
    }

    void emojiSequenceStreamsAsWholeCharacters() {
        const Tokenizer tokenizer = qwen();
        const std::string text = "👋🏽🚀 emoji 👨‍👩‍👧‍👦 naïve 你好";
        const auto ids = tokenizer.encode(text, false);
        QCOMPARE(stream(tokenizer, ids).answer, text);
    }

    void finishFlushesAnUnfinishedCharacter() {
        StreamDecoder decoder(qwen());
        QVERIFY(decoder.push(158).empty());
        const auto rest = decoder.finish();
        QCOMPARE(rest.size(), std::size_t{1});
        QCOMPARE(rest[0].text, std::string(utf8::kReplacementCharacter));
    }

    void specialTokensAreNotShown() {
        const Tokenizer tokenizer = qwen();
        // <|im_start|>assistant\nHi<|im_end|><|endoftext|>
        std::vector<int> ids = tokenizer.encode("<|im_start|>assistant\nHi<|im_end|><|endoftext|>", false);
        QCOMPARE(ids.front(), 1001);
        QCOMPARE(ids.back(), 1000);
        const Collected out = stream(tokenizer, ids);
        QCOMPARE(out.answer, std::string("assistant\nHi"));
        QVERIFY(out.reasoning.empty());
    }

    void thinkTokensSeparateReasoning() {
        const Tokenizer tokenizer = qwen();
        // The golden case: <think>\nreasoning\n</think>\n\nanswer
        const std::vector<int> ids{1003, 198, 267, 410, 260, 292, 198, 1004, 353, 527, 86, 262};
        const Collected out = stream(tokenizer, ids);
        QCOMPARE(out.reasoning, std::string("\nreasoning\n"));
        QCOMPARE(out.answer, std::string("\n\nanswer"));
        QCOMPARE(out.all, std::string("\nreasoning\n\n\nanswer"));
    }

    // DeepSeek-R1 and Qwen3 prompts end with "<think>\n", so the output starts inside the reasoning.
    void startsInReasoningWhenThePromptOpenedIt() {
        const Tokenizer tokenizer = Tokenizer::load(fixturePath("tiny-deepseekv2").toStdString());
        const auto ids = tokenizer.encode("why</think>because<｜end▁of▁sentence｜>", false);
        StreamDecoder decoder(tokenizer, {.startsInReasoning = true});
        QVERIFY(decoder.inReasoning());
        Collected out;
        for (const int id : ids) collect(decoder.push(id), out);
        QVERIFY(!decoder.inReasoning());
        collect(decoder.finish(), out);
        QCOMPARE(out.reasoning, std::string("why"));
        QCOMPARE(out.answer, std::string("because"));
        // finish() readies the decoder for the next answer, which again starts in reasoning.
        QVERIFY(decoder.inReasoning());
    }

    // Without think tokens in the vocabulary the tags arrive as text, cut across several tokens.
    void thinkTagsWrittenAsText() {
        Json config = fixtureTokenizerJson("tiny-qwen3moe");
        Json kept = Json::array();
        for (const Json& token : config["added_tokens"])
            if (token["content"].get<std::string>().find("think") == std::string::npos) kept.push_back(token);
        config["added_tokens"] = kept;
        const Tokenizer tokenizer = tokenizerFrom(config);
        QCOMPARE(tokenizer.tokenToId("<think>"), std::nullopt);
        QVERIFY(tokenizer.encode("<think>", false).size() > 1);
        const auto ids = tokenizer.encode("ok<think>why</think>yes <thin", false);
        const Collected out = stream(tokenizer, ids);
        QCOMPARE(out.answer, std::string("okyes <thin"));
        QCOMPARE(out.reasoning, std::string("why"));
    }

    // SentencePiece: the first "▁" of the text is no space, later ones are; streaming must agree with
    // decoding the ids seen so far at every step.
    void sentencePieceSpacingMatchesWholeDecode_data() {
        QTest::addColumn<int>("style");
        QTest::newRow("Prepend+Replace normalizer") << static_cast<int>(SentencePieceStyle::NormalizerPrependReplace);
        QTest::newRow("Metaspace pre-tokenizer") << static_cast<int>(SentencePieceStyle::MetaspacePreTokenizer);
    }

    void sentencePieceSpacingMatchesWholeDecode() {
        QFETCH(int, style);
        const Tokenizer tokenizer = tokenizerFrom(sentencePieceTokenizerJson(static_cast<SentencePieceStyle>(style)));
        const auto ids = tokenizer.encode("hello world ☃ the café  wörld", true);
        QCOMPARE(ids.front(), 1);  // <s>, which must not show
        StreamDecoder decoder(tokenizer);
        Collected out;
        for (std::size_t k = 0; k < ids.size(); ++k) {
            collect(decoder.push(ids[k]), out);
            const std::string whole = tokenizer.decode(std::span(ids).first(k + 1), true);
            if (whole.ends_with(utf8::kReplacementCharacter))
                QVERIFY2(whole.starts_with(out.answer), qPrintable(QString::number(k)));
            else
                QCOMPARE(out.answer, whole);
        }
        collect(decoder.finish(), out);
        QCOMPARE(out.answer, std::string("hello world ☃ the café  wörld"));
    }

    void unknownIdIsAnError() {
        StreamDecoder decoder(qwen());
        try {
            decoder.push(99999);
        } catch (const tandem::Error& e) {
            QVERIFY(std::string(e.what()).find("99999") != std::string::npos);
            return;
        }
        QFAIL("no tandem::Error for an id outside the vocabulary");
    }
};

QTEST_GUILESS_MAIN(StreamDecoderTest)
#include "tst_stream_decoder.moc"
