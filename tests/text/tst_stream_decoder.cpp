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

Tokenizer harmony() { return tokenizerFrom(harmonyTokenizerJson()); }

// Streams `ids` one at a time, checking that what came out after each token is a beginning of the
// final reasoning and answer (nothing is taken back), and that a piece never mixes kinds.
Collected streamChecked(const Tokenizer& tokenizer, const std::vector<int>& ids, StreamDecoder::Options options = {}) {
    const Collected whole = stream(tokenizer, ids, options);
    StreamDecoder decoder(tokenizer, options);
    Collected out;
    for (std::size_t k = 0; k < ids.size(); ++k) {
        collect(decoder.push(ids[k]), out);
        if (!whole.reasoning.starts_with(out.reasoning) || !whole.answer.starts_with(out.answer))
            QTest::qFail(qPrintable(QString("after token %1 the stream is no beginning of the whole").arg(k)), __FILE__, __LINE__);
    }
    collect(decoder.finish(), out);
    if (out.reasoning != whole.reasoning || out.answer != whole.answer) QTest::qFail("two streams differ", __FILE__, __LINE__);
    return whole;
}

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

    // gpt-oss: "<|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...".
    // The generation prompt ended with "<|start|>assistant", so the output begins inside a header.
    void harmonyChannelsSeparateReasoning() {
        const Tokenizer tokenizer = harmony();
        const auto ids = tokenizer.encode("<|channel|>analysis<|message|>User asks 2+2. Answer 4 ☃.<|end|>"
                                          "<|start|>assistant<|channel|>final<|message|>It is 4 — naïve café.<|return|>",
                                          false);
        QCOMPARE(ids.front(), 1004);
        StreamDecoder decoder(tokenizer);
        QVERIFY(decoder.readsHarmony());
        Collected out;
        bool answerStarted = false;
        for (const int id : ids)
            for (const auto& piece : decoder.push(id)) {
                // Reasoning, then answer: once the final channel opens, no more reasoning.
                if (piece.kind == StreamText::Kind::Answer) answerStarted = true;
                QVERIFY(!(answerStarted && piece.kind == StreamText::Kind::Reasoning));
                collect({piece}, out);
            }
        // Everything is out before the end: the text is streamed, not held.
        QCOMPARE(out.reasoning, std::string("User asks 2+2. Answer 4 ☃."));
        QCOMPARE(out.answer, std::string("It is 4 — naïve café."));
        QVERIFY(decoder.finish().empty());
        QCOMPARE(streamChecked(tokenizer, ids).all, out.all);
    }

    // <|return|> and <|call|> end the turn (a server stops on them); <|end|> only a message.
    void harmonyEndOfTurn() {
        QCOMPARE(harmonyEndOfTurnTokens(harmony()), (std::vector<int>{1006, 1007}));
        QVERIFY(harmonyEndOfTurnTokens(qwen()).empty());
        QVERIFY(!StreamDecoder(qwen()).readsHarmony());
    }

    // Several analysis messages, a commentary preamble for the user, stray "to=assistant", and a final
    // answer that arrives without the stop token (generation stopped on <|return|>).
    void harmonyMessagesInTurn() {
        const Tokenizer tokenizer = harmony();
        const auto ids = tokenizer.encode("<|channel|>analysis<|message|>First.<|end|><|start|>assistant<|channel|>analysis"
                                          "<|message|> Second.<|end|><|start|>assistant<|channel|>commentary<|message|>Let me"
                                          " check.<|end|><|start|>assistant<|channel|>commentary to=assistant<|channel|>final"
                                          "<|message|> Done: 42",
                                          false);
        const Collected out = streamChecked(tokenizer, ids);
        QCOMPARE(out.reasoning, std::string("First. Second."));
        QCOMPARE(out.answer, std::string("Let me check. Done: 42"));
    }

    // A message to a tool is answer text in harmony's markup, for the server's parser: in the channel
    // header (as the model writes it) or in the role header (as the template renders past calls).
    void harmonyToolCallIsShownAsMarkup() {
        const Tokenizer tokenizer = harmony();
        const auto channelForm = tokenizer.encode("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
                                                  "<|channel|>commentary to=functions.get_weather <|constrain|>json"
                                                  "<|message|>{\"city\": \"Zürich\"}",
                                                  false);
        const Collected a = streamChecked(tokenizer, channelForm);
        QCOMPARE(a.reasoning, std::string("Need the weather."));
        QCOMPARE(a.answer, std::string("<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
                                       "<|message|>{\"city\": \"Zürich\"}"));

        // Right after the prompt's "<|start|>assistant", with <|call|> given to the decoder.
        const auto roleForm = tokenizer.encode(" to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>", false);
        const Collected b = streamChecked(tokenizer, roleForm);
        QVERIFY(b.reasoning.empty());
        QCOMPARE(b.answer, std::string("<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>"));

        // A call the model did not end before the next header still ends there.
        const auto unended = tokenizer.encode("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}"
                                              "<|start|>assistant<|channel|>final<|message|>Hi",
                                              false);
        QCOMPARE(streamChecked(tokenizer, unended).answer,
                 std::string("<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|end|>Hi"));
    }

    // The prompt opened the analysis itself: output is reasoning until the message ends.
    void harmonyStartsInReasoning() {
        const Tokenizer tokenizer = harmony();
        const auto ids = tokenizer.encode("hmm<|end|><|start|>assistant<|channel|>final<|message|>ok", false);
        StreamDecoder decoder(tokenizer, {.startsInReasoning = true, .shownSpecialTokens = {}, .harmonyChannels = true});
        QVERIFY(decoder.inReasoning());
        Collected out;
        for (const int id : ids) collect(decoder.push(id), out);
        collect(decoder.finish(), out);
        QCOMPARE(out.reasoning, std::string("hmm"));
        QCOMPARE(out.answer, std::string("ok"));
        // finish() readies the decoder for the next answer, again from the analysis.
        QVERIFY(decoder.inReasoning());
        for (const int id : tokenizer.encode("hmm", false)) collect(decoder.push(id), out);
        collect(decoder.finish(), out);
        QCOMPARE(out.reasoning, std::string("hmmhmm"));
    }

    // Output without harmony's framing is answer: held while it could be a header, then shown.
    void harmonyTextWithoutHeaders() {
        const Tokenizer tokenizer = harmony();
        const auto shortText = tokenizer.encode("Just text.", false);
        QCOMPARE(streamChecked(tokenizer, shortText).answer, std::string("Just text."));
        std::string longText;
        for (int i = 0; i < 40; ++i) longText += "word" + std::to_string(i) + " ";
        const auto ids = tokenizer.encode(longText, false);
        QVERIFY(ids.size() > 70);
        StreamDecoder decoder(tokenizer);
        Collected out;
        for (const int id : ids) collect(decoder.push(id), out);
        QVERIFY(!out.answer.empty());  // shown before the end
        collect(decoder.finish(), out);
        QCOMPARE(out.answer, longText);
        QVERIFY(out.reasoning.empty());
        // An unfinished header at the end is framing, not text.
        QVERIFY(stream(tokenizer, tokenizer.encode("<|channel|>analysis", false)).all.empty());
    }

    // Off (a completion): the text is the tokenizer's decode without special tokens, nothing is reasoning.
    void harmonyChannelsOff() {
        const Tokenizer tokenizer = harmony();
        const auto ids = tokenizer.encode("<|channel|>analysis<|message|>why<|end|><|start|>assistant<|channel|>final<|message|>so", false);
        StreamDecoder::Options options;
        options.harmonyChannels = false;
        StreamDecoder decoder(tokenizer, options);
        QVERIFY(!decoder.readsHarmony());
        const Collected out = stream(tokenizer, ids, options);
        QCOMPARE(out.answer, tokenizer.decode(ids, true));
        QCOMPARE(out.answer, std::string("analysiswhyassistantfinalso"));
        QVERIFY(out.reasoning.empty());
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
