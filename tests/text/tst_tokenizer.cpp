// The tokenizer end to end: every encode/decode case of the fixtures' golden.json (made by Hugging Face
// transformers), the SentencePiece-style byte-fallback path, the BPE model options, added tokens,
// post-processors, and the errors a user can run into. Expected ids of hand-made tokenizers were
// produced by Hugging Face `tokenizers` from the same tokenizer.json.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "tandem/tokenizer.h"
#include "expect_error.h"
#include "test_support.h"
#include "tokenizer_json.h"

using tandem::text::Tokenizer;
using namespace tandem::test;

Q_DECLARE_METATYPE(std::vector<int>)

namespace {

std::vector<int> idsOf(const QJsonValue& value) {
    std::vector<int> ids;
    for (const QJsonValue& v : value.toArray()) ids.push_back(v.toInt());
    return ids;
}

QJsonObject goldenTokenizerCases(const QString& fixture) {
    return QJsonDocument::fromJson(readFile(fixturePath(fixture) + "/golden.json")).object()["tokenizer"].toObject();
}

std::string decodeAll(const Tokenizer& tokenizer, const std::vector<int>& ids, bool skipSpecial = false) {
    return tokenizer.decode(ids, skipSpecial);
}

// A copy of the Qwen fixture's tokenizer.json where the added token `content` has the given flags.
Json qwenWithAddedTokenFlags(const std::string& content, const Json& flags) {
    Json config = fixtureTokenizerJson("tiny-qwen3moe");
    for (Json& token : config["added_tokens"])
        if (token["content"] == content) token.update(flags);
    return config;
}

Json addedToken(int id, const std::string& content, bool singleWord, bool normalized) {
    return {{"id", id},       {"content", content},       {"single_word", singleWord}, {"lstrip", false},
            {"rstrip", false}, {"normalized", normalized}, {"special", false}};
}


}  // namespace

class TokenizerTest : public QObject {
    Q_OBJECT

private slots:
    void goldenEncode_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("text");
        QTest::addColumn<std::vector<int>>("ids");
        QTest::addColumn<std::vector<int>>("idsWithSpecials");
        QTest::addColumn<QString>("decoded");
        for (const QString& fixture : fixtureNames()) {
            const QJsonArray cases = goldenTokenizerCases(fixture)["encode"].toArray();
            QVERIFY2(!cases.isEmpty(), qPrintable(fixture + " has no tokenizer.encode cases"));
            for (qsizetype i = 0; i < cases.size(); ++i) {
                const QJsonObject c = cases[i].toObject();
                QTest::addRow("%s/%lld", qPrintable(fixture), static_cast<long long>(i))
                    << fixture << c["text"].toString() << idsOf(c["ids"]) << idsOf(c["ids_with_specials"])
                    << c["decoded"].toString();
            }
        }
    }

    // transformers' encode(text, add_special_tokens=False/True) and decode(ids) with special tokens kept.
    void goldenEncode() {
        QFETCH(QString, fixture);
        QFETCH(QString, text);
        QFETCH(std::vector<int>, ids);
        QFETCH(std::vector<int>, idsWithSpecials);
        QFETCH(QString, decoded);
        const Tokenizer tokenizer = Tokenizer::load(fixturePath(fixture).toStdString());
        const std::string utf8 = text.toStdString();
        QCOMPARE(tokenizer.encode(utf8, false), ids);
        QCOMPARE(tokenizer.encode(utf8, true), idsWithSpecials);
        QCOMPARE(QString::fromStdString(tokenizer.decode(ids, false)), decoded);
    }

    void goldenChatIds_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("rendered");
        QTest::addColumn<std::vector<int>>("ids");
        for (const QString& fixture : fixtureNames()) {
            const QJsonArray cases = goldenTokenizerCases(fixture)["chat"].toArray();
            QVERIFY2(!cases.isEmpty(), qPrintable(fixture + " has no tokenizer.chat cases"));
            for (qsizetype i = 0; i < cases.size(); ++i) {
                const QJsonObject c = cases[i].toObject();
                QTest::addRow("%s/%lld", qPrintable(fixture), static_cast<long long>(i))
                    << fixture << c["text"].toString() << idsOf(c["ids"]);
            }
        }
    }

    // A rendered chat prompt already holds its special tokens as text, so it is encoded without adding any.
    void goldenChatIds() {
        QFETCH(QString, fixture);
        QFETCH(QString, rendered);
        QFETCH(std::vector<int>, ids);
        const Tokenizer tokenizer = Tokenizer::load(fixturePath(fixture).toStdString());
        QCOMPARE(tokenizer.encode(rendered.toStdString(), false), ids);
    }

    void loadsFromFolderOrFile() {
        const Tokenizer fromFolder = Tokenizer::load(fixturePath("tiny-qwen3moe").toStdString());
        const Tokenizer fromFile = Tokenizer::load((fixturePath("tiny-qwen3moe") + "/tokenizer.json").toStdString());
        QCOMPARE(fromFolder.encode("Hello world", false), fromFile.encode("Hello world", false));
        QCOMPARE(fromFolder.encode("Hello world", false), (std::vector<int>{39, 68, 352, 78, 287, 263, 75, 67}));
    }

    void vocabularyQueries() {
        const Tokenizer tokenizer = Tokenizer::load(fixturePath("tiny-qwen3moe").toStdString());
        QCOMPARE(tokenizer.vocabSize(), 1007);
        QCOMPARE(tokenizer.tokenToId("<think>"), std::optional<int>(1003));
        QCOMPARE(tokenizer.tokenToId("Ġt"), std::optional<int>(256 + 0));
        QCOMPARE(tokenizer.tokenToId("no such token"), std::nullopt);
        QCOMPARE(tokenizer.idToToken(262), std::optional<std::string>("er"));
        QCOMPARE(tokenizer.idToToken(1002), std::optional<std::string>("<|im_end|>"));
        QCOMPARE(tokenizer.idToToken(5000), std::nullopt);
        QVERIFY(tokenizer.isSpecial(1002));
        QVERIFY(!tokenizer.isSpecial(262));
        // A copy shares the vocabulary and answers alike.
        const Tokenizer copy = tokenizer;
        QCOMPARE(copy.encode("mixture", false), tokenizer.encode("mixture", false));
    }

    // Llama 2 layout: Prepend("▁") + Replace(" " -> "▁") normalizer, no pre-tokenizer, so the whole
    // text is one word and every space (even a leading one) is a "▁".
    void sentencePieceWithNormalizer() {
        const Tokenizer t = tokenizerFrom(sentencePieceTokenizerJson(SentencePieceStyle::NormalizerPrependReplace));
        QCOMPARE(t.encode("hello world", true), (std::vector<int>{1, 279, 283}));
        QCOMPARE(t.encode(" hello", true), (std::vector<int>{1, 259, 279}));
        // Special tokens in the text cut it, and each stretch gets its own "▁".
        QCOMPARE(t.encode("<s>hello</s> world", true), (std::vector<int>{1, 1, 279, 2, 259, 283}));
        QCOMPARE(t.decode(std::vector<int>{1, 1, 279, 2, 259, 283}, false), std::string("<s><s> hello</s>  world"));
        QCOMPARE(t.decode(std::vector<int>{1, 1, 279, 2, 259, 283}, true), std::string("hello  world"));
        // The decoder's Strip removes the one leading space the normalizer added.
        QCOMPARE(t.decode(std::vector<int>{259, 279}, false), std::string(" hello"));
    }

    // Newer Llama/Mistral layout: a Metaspace pre-tokenizer with prepend_scheme "first".
    void sentencePieceWithMetaspace() {
        const Tokenizer t = tokenizerFrom(sentencePieceTokenizerJson(SentencePieceStyle::MetaspacePreTokenizer));
        QCOMPARE(t.encode("hello world", true), (std::vector<int>{1, 279, 283}));
        QCOMPARE(t.encode(" hello", true), (std::vector<int>{1, 279}));
        // "first": only the stretch at the start of the text gets a "▁", not the one after <s>.
        QCOMPARE(t.encode("<s>hello</s> world", true), (std::vector<int>{1, 1, 276, 277, 2, 283}));
        QCOMPARE(t.decode(std::vector<int>{1, 1, 276, 277, 2, 283}, true), std::string("hello world"));
    }

    void metaspacePrependSchemes() {
        Json config = sentencePieceTokenizerJson(SentencePieceStyle::MetaspacePreTokenizer);
        config["pre_tokenizer"]["prepend_scheme"] = "always";
        QCOMPARE(tokenizerFrom(config).encode("<s>hello world", false), (std::vector<int>{1, 279, 283}));
        config["pre_tokenizer"]["prepend_scheme"] = "never";
        QCOMPARE(tokenizerFrom(config).encode("<s>hello world", false), (std::vector<int>{1, 276, 277, 283}));
        config["pre_tokenizer"]["prepend_scheme"] = "first";
        config["pre_tokenizer"]["split"] = true;
        QCOMPARE(tokenizerFrom(config).encode("hello  world", false), (std::vector<int>{279, 259, 283}));
    }

    void byteFallbackEncodesUnknownCharactersAsBytes() {
        const Tokenizer t = tokenizerFrom(sentencePieceTokenizerJson(SentencePieceStyle::NormalizerPrependReplace));
        // "☃" is not in the vocabulary: its bytes E2 98 83 become <0xE2> <0x98> <0x83> (ids 3 + byte).
        QCOMPARE(t.encode("héllo ☃", false), (std::vector<int>{273, 271, 277, 259, 229, 155, 134}));
        QCOMPARE(t.decode(std::vector<int>{279, 229, 155, 134, 283}, false), std::string("hello☃ world"));
        // A run of byte tokens that is not valid UTF-8 becomes one U+FFFD per byte.
        QCOMPARE(t.decode(std::vector<int>{279, 229, 155, 134, 229, 155, 283}, false),
                 std::string("hello\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD world"));
    }

    void unkTokenWithoutByteFallback() {
        Json config = sentencePieceTokenizerJson(SentencePieceStyle::NormalizerPrependReplace);
        config["model"]["byte_fallback"] = false;
        QCOMPARE(tokenizerFrom(config).encode("hello xyzw ☃☃", false), (std::vector<int>{279, 259, 272, 0, 264, 259, 0}));
        config["model"]["fuse_unk"] = false;
        QCOMPARE(tokenizerFrom(config).encode("hello xyzw ☃☃", false),
                 (std::vector<int>{279, 259, 272, 0, 0, 264, 259, 0, 0}));
        // Without an unk_token an unknown character is dropped.
        config["model"]["unk_token"] = nullptr;
        QCOMPARE(tokenizerFrom(config).encode("hello xyzw ☃☃", false), (std::vector<int>{279, 259, 272, 264, 259}));
    }

    void ignoreMergesTakesWholeWordsFromTheVocabulary() {
        Json config = sentencePieceTokenizerJson(SentencePieceStyle::MetaspacePreTokenizer);
        config["pre_tokenizer"]["split"] = true;
        config["model"]["vocab"]["▁wd"] = 293;  // no merge leads to it
        QCOMPARE(tokenizerFrom(config).encode("wd hello", false), (std::vector<int>{274, 266, 279}));
        config["model"]["ignore_merges"] = true;
        QCOMPARE(tokenizerFrom(config).encode("wd hello", false), (std::vector<int>{293, 279}));
    }

    void mergesInBothSpellingsAgree() {
        Json strings = fixtureTokenizerJson("tiny-qwen3moe");
        QVERIFY(strings["model"]["merges"][0].is_array());
        Json pairs = strings;
        for (Json& merge : strings["model"]["merges"]) merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
        const std::string text = "The mixture of experts routes each token: 3.14, naïve café!";
        const auto expected = tokenizerFrom(pairs).encode(text, false);
        QCOMPARE(tokenizerFrom(strings).encode(text, false), expected);
        QVERIFY(expected.size() > 10);
    }

    void addedTokensAreMatchedBeforePreTokenization() {
        const Tokenizer t = Tokenizer::load(fixturePath("tiny-qwen3moe").toStdString());
        // The split regex would cut "<|im_end|>" into punctuation and letters; as an added token it stays whole.
        QCOMPARE(t.encode("a<|im_end|>b", false), (std::vector<int>{64, 1002, 65}));
        QCOMPARE(t.encode("a  <|im_end|>  b", false), (std::vector<int>{64, 257, 1002, 220, 293}));
    }

    void addedTokenStripsWhitespace() {
        const std::string text = "a  <|im_end|>  b";
        QCOMPARE(tokenizerFrom(qwenWithAddedTokenFlags("<|im_end|>", {{"lstrip", true}})).encode(text, false),
                 (std::vector<int>{64, 1002, 220, 293}));
        QCOMPARE(tokenizerFrom(qwenWithAddedTokenFlags("<|im_end|>", {{"rstrip", true}})).encode(text, false),
                 (std::vector<int>{64, 257, 1002, 65}));
        QCOMPARE(tokenizerFrom(qwenWithAddedTokenFlags("<|im_end|>", {{"lstrip", true}, {"rstrip", true}})).encode(text, false),
                 (std::vector<int>{64, 1002, 65}));
    }

    void addedTokenSingleWord() {
        Json config = fixtureTokenizerJson("tiny-qwen3moe");
        config["added_tokens"].push_back(addedToken(1007, "ello", true, false));
        const std::string text = "x ello yello ello, (ello)";
        // "yello" has the token inside a word, so single_word leaves it to BPE.
        QCOMPARE(tokenizerFrom(config).encode(text, false),
                 (std::vector<int>{87, 220, 1007, 220, 88, 68, 352, 78, 220, 1007, 11, 423, 1007, 8}));
        config["added_tokens"].back()["single_word"] = false;
        QCOMPARE(tokenizerFrom(config).encode(text, false),
                 (std::vector<int>{87, 220, 1007, 220, 88, 1007, 220, 1007, 11, 423, 1007, 8}));
        QCOMPARE(tokenizerFrom(config).decode(std::vector<int>{87, 220, 1007, 220, 88, 1007}, true), std::string("x ello yello"));
    }

    // A normalized added token is looked for after normalization; the others in the original text.
    void addedTokenNormalized() {
        Json config = fixtureTokenizerJson("tiny-qwen3moe");
        config["normalizer"] = {{"type", "Sequence"},
                                {"normalizers",
                                 {{{"type", "NFC"}}, {{"type", "Replace"}, {"pattern", {{"String", "@"}}}, {"content", "ello"}}}}};
        config["added_tokens"].push_back(addedToken(1007, "ello", false, true));
        QCOMPARE(tokenizerFrom(config).encode("h@", false), (std::vector<int>{71, 1007}));
        config["added_tokens"].back()["normalized"] = false;
        QCOMPARE(tokenizerFrom(config).encode("h@", false), (std::vector<int>{400, 352, 78}));
        QCOMPARE(tokenizerFrom(config).encode("hello", false), (std::vector<int>{71, 1007}));
    }

    void skipSpecialTokensHidesOnlySpecialOnes() {
        Json config = qwenWithAddedTokenFlags("<think>", {{"special", false}});
        const Tokenizer t = tokenizerFrom(config);
        const auto ids = t.encode("<|im_start|>user\nhi<think>x<|im_end|>", false);
        QCOMPARE(ids.front(), 1001);
        QCOMPARE(t.decode(ids, true), std::string("user\nhi<think>x"));
        QCOMPARE(t.decode(ids, false), std::string("<|im_start|>user\nhi<think>x<|im_end|>"));
        QVERIFY(!t.isSpecial(1003));
    }

    void templateProcessingAddsBos() {
        const Tokenizer t = Tokenizer::load(fixturePath("tiny-deepseekv2").toStdString());
        QCOMPARE(t.encode("", true), (std::vector<int>{1000}));
        QCOMPARE(t.encode(" ", true), (std::vector<int>{1000, 220}));
        QCOMPARE(t.encode(" ", false), (std::vector<int>{220}));
    }

    // Llama 3 files chain a ByteLevel post-processor (ids unchanged) and a TemplateProcessing.
    void postProcessorSequence() {
        Json config = fixtureTokenizerJson("tiny-qwen3moe");
        config["post_processor"] = {
            {"type", "Sequence"},
            {"processors",
             {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
              {{"type", "TemplateProcessing"},
               {"single",
                {{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                 {{"SpecialToken", {{"id", "<|im_end|>"}, {"type_id", 0}}}}}},
               {"pair", Json::array()},
               {"special_tokens",
                {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {1000}}, {"tokens", {"<|endoftext|>"}}}},
                 {"<|im_end|>", {{"id", "<|im_end|>"}, {"ids", {1002}}, {"tokens", {"<|im_end|>"}}}}}}}}}};
        const Tokenizer t = tokenizerFrom(config);
        QCOMPARE(t.encode("a", true), (std::vector<int>{1000, 64, 1002}));
        QCOMPARE(t.encode("a", false), (std::vector<int>{64}));
    }

    // transformers (5.x) takes BOS/EOS from tokenizer.json's post-processor, not from the
    // add_bos_token / add_eos_token of tokenizer_config.json; the Qwen fixture says add_bos_token false
    // and the DeepSeek one true, and both agree with their post-processors.
    void tokenizerConfigDoesNotOverrideThePostProcessor() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        QVERIFY(copyFixture("tiny-qwen3moe", dir.path()));
        QJsonObject config = QJsonDocument::fromJson(readFile(dir.path() + "/tokenizer_config.json")).object();
        config["add_bos_token"] = true;
        config["add_eos_token"] = true;
        QVERIFY(writeFile(dir.path() + "/tokenizer_config.json", QJsonDocument(config).toJson()));
        QCOMPARE(Tokenizer::load(dir.path().toStdString()).encode("Hello world", true),
                 (std::vector<int>{39, 68, 352, 78, 287, 263, 75, 67}));
    }

    void invalidUtf8IsRejected() {
        const Tokenizer t = Tokenizer::load(fixturePath("tiny-qwen3moe").toStdString());
        expectError([&] { t.encode("ok \xC3\x28 bad", false); }, {"not valid UTF-8", "0xC3", "offset 3"});
        expectError([&] { t.encode("\xED\xA0\x80", false); }, {"not valid UTF-8"});  // a UTF-16 surrogate
        expectError([&] { t.encode("\xF0\x9F\x98", false); }, {"not valid UTF-8"});  // cut short
    }

    void unknownIdIsRejected() {
        const Tokenizer t = Tokenizer::load(fixturePath("tiny-qwen3moe").toStdString());
        expectError([&] { decodeAll(t, {39, 5000}); }, {"token id 5000", "0 to 1006", "tokenizer.json"});
        expectError([&] { decodeAll(t, {-1}); }, {"token id -1"});
    }

    void malformedJsonIsRejected() {
        expectError([] { Tokenizer::fromJson("{\"model\": {", "broken.json"); }, {"broken.json", "not valid JSON"});
        expectError([] { Tokenizer::fromJson("[1, 2]", "list.json"); }, {"list.json", "JSON object"});
        Json noVocab = fixtureTokenizerJson("tiny-qwen3moe");
        noVocab["model"].erase("vocab");
        expectError([&] { tokenizerFrom(noVocab); }, {"model.vocab", "missing"});
        Json badMerge = fixtureTokenizerJson("tiny-qwen3moe");
        badMerge["model"]["merges"][3] = "Ġt";
        expectError([&] { tokenizerFrom(badMerge); }, {"model.merges[3]", "two tokens"});
        badMerge["model"]["merges"][3] = {"zzz", "h"};
        expectError([&] { tokenizerFrom(badMerge); }, {"model.merges[3]", "'zzz' is not in the vocabulary"});
        Json badFlag = qwenWithAddedTokenFlags("<think>", {{"lstrip", "yes"}});
        expectError([&] { tokenizerFrom(badFlag); }, {"added_tokens[3].lstrip", "true or false"});
    }

    void hugeTokenIdsAreRejected() {
        // 2^31 - 1 once overflowed the vocabulary size (found by fuzz_tokenizer_json); 2^24 would make the
        // id table of a 1,000-token file 16 M entries long.
        for (const long long id : {2147483647LL, 16777216LL}) {
            Json added = fixtureTokenizerJson("tiny-qwen3moe");
            added["added_tokens"].push_back({{"id", id}, {"content", "<x>"}, {"special", true}});
            expectError([&] { tokenizerFrom(added); }, {"added_tokens[", ".id", "from 0 to 16777215"});
            Json vocab = fixtureTokenizerJson("tiny-qwen3moe");
            vocab["model"]["vocab"]["<x>"] = id;
            expectError([&] { tokenizerFrom(vocab); }, {"model.vocab", "'<x>'", "from 0 to 16777215"});
        }
        Json largest = fixtureTokenizerJson("tiny-qwen3moe");
        largest["added_tokens"].push_back({{"id", 300000}, {"content", "<x>"}, {"special", true}});
        QCOMPARE(tokenizerFrom(largest).vocabSize(), 300001);
    }

    void unsupportedModelTypeIsRejected() {
        Json config = fixtureTokenizerJson("tiny-qwen3moe");
        config["model"]["type"] = "Unigram";
        expectError([&] { tokenizerFrom(config); }, {"model type 'Unigram' is not supported", "BPE"});
    }

    void unknownComponentTypeIsRejected_data() {
        QTest::addColumn<QString>("component");
        QTest::addColumn<QString>("expected");
        QTest::newRow("normalizer") << "normalizer" << "normalizer type 'Frobnicate'";
        QTest::newRow("pre_tokenizer") << "pre_tokenizer" << "pre-tokenizer type 'Frobnicate'";
        QTest::newRow("post_processor") << "post_processor" << "post-processor type 'Frobnicate'";
        QTest::newRow("decoder") << "decoder" << "decoder type 'Frobnicate'";
    }

    void unknownComponentTypeIsRejected() {
        QFETCH(QString, component);
        QFETCH(QString, expected);
        Json config = fixtureTokenizerJson("tiny-qwen3moe");
        config[component.toStdString()] = {{"type", "Frobnicate"}};
        const std::string where = "test tokenizer.json: " + component.toStdString();
        expectError([&] { tokenizerFrom(config); }, {where.c_str(), expected.toUtf8().constData(), "not supported"});
    }

    void badRegexIsRejected() {
        Json config = fixtureTokenizerJson("tiny-qwen3moe");
        config["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}+";
        expectError([&] { tokenizerFrom(config); },
                    {"pre_tokenizer.pretokenizers[0].pattern.Regex", "does not compile", "missing closing parenthesis"});
    }

    void missingFileIsRejected() {
        QTemporaryDir empty;
        QVERIFY(empty.isValid());
        expectError([&] { Tokenizer::load(empty.path().toStdString()); }, {"cannot read", "tokenizer.json"});
    }
};

QTEST_GUILESS_MAIN(TokenizerTest)
#include "tst_tokenizer.moc"
