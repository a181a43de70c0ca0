// Each tokenizer.json component on its own (white-box): normalizers, pre-tokenizers with their regexes
// and split behaviors, decoders, post-processors, and the UTF-8 helpers under them. Expected values
// are what Hugging Face `tokenizers` gives for the same component configuration.
#include <QTest>

#include "tokenizer_json.h"
#include "text/decoder.h"
#include "text/normalizer.h"
#include "text/post_processor.h"
#include "text/pre_tokenizer.h"
#include "text/regex.h"
#include "text/utf8.h"
#include "tandem/error.h"

using namespace tandem::text;
using tandem::test::Json;

namespace {

QStringList piecesOf(const Json& config, const std::string& text, bool atStart = true) {
    const auto preTokenizer = makePreTokenizer(config, "test pre_tokenizer");
    QStringList pieces;
    preTokenizer->split(Piece{text, atStart},
                        [&](const Piece& piece) { pieces << QString::fromStdString(std::string(piece.text)); });
    return pieces;
}

std::string normalized(const Json& config, std::string text) {
    makeNormalizer(config, "test normalizer")->normalize(text);
    return text;
}

std::string decoded(const Json& config, std::vector<std::string> tokens) {
    makeDecoder(config, "test decoder")->decodeChain(tokens);
    std::string text;
    for (const auto& token : tokens) text += token;
    return text;
}

Json split(const std::string& regex, const std::string& behavior, bool invert = false) {
    return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior}, {"invert", invert}};
}

Json byteLevel(bool addPrefixSpace, bool useRegex) {
    return {{"type", "ByteLevel"}, {"add_prefix_space", addPrefixSpace}, {"trim_offsets", false}, {"use_regex", useRegex}};
}

// The Qwen2/3 and Kimi-style word pattern: case-insensitive contractions, \p classes, a lookahead.
const char* kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

class TokenizerComponentsTest : public QObject {
    Q_OBJECT

private slots:
    void utf8LossyReplacesMaximalSubparts() {
        QCOMPARE(utf8::toValidLossy("ok"), std::string("ok"));
        // E2 98 is the start of a three-byte character cut short: one U+FFFD for both bytes.
        QCOMPARE(utf8::toValidLossy("a\xE2\x98" "b"), std::string("a\uFFFD" "b"));
        // A surrogate (ED A0 80) is three maximal subparts of one byte each.
        QCOMPARE(utf8::toValidLossy("\xED\xA0\x80"), std::string("\uFFFD\uFFFD\uFFFD"));
        QCOMPARE(utf8::toValidLossy("\xFF\xC0\x80"), std::string("\uFFFD\uFFFD\uFFFD"));
        QCOMPARE(utf8::firstInvalidOffset("h\xC3\xA9\xFF"), std::size_t{3});
        QCOMPARE(utf8::firstInvalidOffset("h\xC3\xA9"), utf8::kValid);
    }

    void regexUsesUnicodeProperties() {
        const Regex letters(R"(\p{L}+)", "test");
        const std::string text = "42 élan Привет";
        const auto first = letters.find(text, 0);
        QVERIFY(first);
        QCOMPARE(text.substr(first->start, first->end - first->start), std::string("élan"));
        const auto second = letters.find(text, first->end);
        QVERIFY(second);
        QCOMPARE(text.substr(second->start, second->end - second->start), std::string("Привет"));
        QVERIFY(!letters.find(text, second->end));
        // \s is Unicode whitespace: no-break space and ideographic space included.
        const Regex space(R"(\s)", "test");
        QCOMPARE(space.find("a\u00A0b", 0)->start, std::size_t{1});
        QCOMPARE(space.find("a\u3000b", 0)->start, std::size_t{1});
    }

    void nfcComposes() {
        const Json nfc = {{"type", "NFC"}};
        QCOMPARE(normalized(nfc, "cafe\u0301"), std::string("caf\u00E9"));
        QCOMPARE(normalized(nfc, "\u212B"), std::string("\u00C5"));  // the Angstrom sign is Å
        QCOMPARE(normalized(nfc, "plain ascii"), std::string("plain ascii"));
        // NFKC also folds compatibility characters, NFC does not.
        QCOMPARE(normalized(nfc, "\uFB01"), std::string("\uFB01"));
        QCOMPARE(normalized(Json{{"type", "NFKC"}}, "\uFB01"), std::string("fi"));
    }

    void prependAndReplaceInSequence() {
        const Json sequence = {
            {"type", "Sequence"},
            {"normalizers",
             {{{"type", "NFC"}},
              {{"type", "Prepend"}, {"prepend", "▁"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}},
              {{"type", "Replace"}, {"pattern", {{"Regex", "[0-9]+"}}}, {"content", "#"}}}}};
        QCOMPARE(normalized(sequence, "cafe\u0301 12 x"), std::string("▁café▁#▁x"));
        // Prepend leaves an empty text empty.
        QCOMPARE(normalized(Json{{"type", "Prepend"}, {"prepend", "▁"}}, ""), std::string());
    }

    void splitWithCaseInsensitiveGroupsAndLookahead() {
        QCOMPARE(piecesOf(split(kQwenPattern, "Isolated"), "I'LL don't  go\n\n  now 123 élan"),
                 (QStringList{"I", "'LL", " don", "'t", " ", " go", "\n\n", " ", " now", " ", "1", "2", "3", " élan"}));
    }

    void splitCjkRangeAndDigitGroups() {
        // DeepSeek's first two stages: up to three digits, then runs of CJK and kana.
        const Json deepseek = {{"type", "Sequence"},
                               {"pretokenizers",
                                {split(R"(\p{N}{1,3})", "Isolated"), split("[一-龥\u3040-ゟ゠-ヿ]+", "Isolated")}}};
        QCOMPARE(piecesOf(deepseek, "x12345日本語のabc"), (QStringList{"x", "123", "45", "日本語の", "abc"}));
    }

    // Kimi-K2's pattern intersects classes ("letters but not Han"), Oniguruma syntax that is rewritten
    // for PCRE2.
    void splitWithClassIntersection() {
        const std::string kimi =
            R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+)"
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+)"
            R"([\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
            R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";
        QCOMPARE(piecesOf(split(kimi, "Isolated"), "HelloWorld中文English混合テキストCamelCase I'LL 12345"),
                 (QStringList{"Hello", "World", "中文", "English", "混合", "テキストCamel", "Case", " I'LL", " ", "123", "45"}));
        // A negated intersection and one of three classes.
        QCOMPARE(piecesOf(split("[^a-z&&[^aeiou]]+", "Isolated"), "strength AEIOU aei xyz"),
                 (QStringList{"str", "e", "ngth", " AEIOU aei ", "xyz"}));
        QCOMPARE(piecesOf(split("[a-z&&[^aeiou]&&[^xyz]]+", "Isolated"), "strength aei xyz"),
                 (QStringList{"str", "e", "ngth", " aei xyz"}));
    }

    void nestedClassUnionIsRejected() {
        try {
            piecesOf(split("[a[bc]]", "Isolated"), "abc");
        } catch (const tandem::Error& e) {
            QVERIFY2(std::string(e.what()).find("nested inside another") != std::string::npos, e.what());
            return;
        }
        QFAIL("a nested class union was accepted");
    }

    void splitBehaviors_data() {
        QTest::addColumn<QString>("behavior");
        QTest::addColumn<bool>("invert");
        QTest::addColumn<QStringList>("expected");
        QTest::newRow("Removed") << "Removed" << false << QStringList{"ab", "c", "d"};
        QTest::newRow("Removed inverted") << "Removed" << true << QStringList{"1", "2", "3", "4", "5"};
        QTest::newRow("Isolated") << "Isolated" << false << QStringList{"ab", "1", "2", "c", "3", "d", "4", "5"};
        QTest::newRow("Isolated inverted") << "Isolated" << true << QStringList{"ab", "1", "2", "c", "3", "d", "4", "5"};
        QTest::newRow("MergedWithPrevious") << "MergedWithPrevious" << false << QStringList{"ab1", "2", "c3", "d4", "5"};
        QTest::newRow("MergedWithPrevious inverted")
            << "MergedWithPrevious" << true << QStringList{"ab", "1", "2c", "3d", "4", "5"};
        QTest::newRow("MergedWithNext") << "MergedWithNext" << false << QStringList{"ab", "1", "2c", "3d", "4", "5"};
        QTest::newRow("MergedWithNext inverted") << "MergedWithNext" << true << QStringList{"ab1", "2", "c3", "d4", "5"};
        QTest::newRow("Contiguous") << "Contiguous" << false << QStringList{"ab", "12", "c", "3", "d", "45"};
        QTest::newRow("Contiguous inverted") << "Contiguous" << true << QStringList{"ab", "12", "c", "3", "d", "45"};
    }

    void splitBehaviors() {
        QFETCH(QString, behavior);
        QFETCH(bool, invert);
        QFETCH(QStringList, expected);
        QCOMPARE(piecesOf(split("[0-9]", behavior.toStdString(), invert), "ab12c3d45"), expected);
    }

    void splitWithLiteralPattern() {
        const Json literal = {{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Removed"}, {"invert", false}};
        // "." is a literal dot, not "any character".
        QCOMPARE(piecesOf(literal, "a.b..c"), (QStringList{"a", "b", "c"}));
    }

    void byteLevelMapsBytesAndSplitsLikeGpt2() {
        QCOMPARE(piecesOf(byteLevel(true, true), "Hello  world's 42 ☃!"),
                 (QStringList{"ĠHello", "Ġ", "Ġworld", "'s", "Ġ42", "Ġâĺĥ!"}));
        QCOMPARE(piecesOf(byteLevel(false, false), "Hello  world"), (QStringList{"HelloĠĠworld"}));
        QCOMPARE(piecesOf(byteLevel(false, false), "\n\t\u00A0"), (QStringList{"ĊĉÂł"}));
    }

    void metaspaceReplacesSpaces() {
        const Json always = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
        QCOMPARE(piecesOf(always, "hello  world"), (QStringList{"▁hello", "▁", "▁world"}));
        const Json never = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}, {"split", false}};
        QCOMPARE(piecesOf(never, "hello world"), (QStringList{"hello▁world"}));
        // "first" prepends only to text that starts the input.
        const Json first = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
        QCOMPARE(piecesOf(first, "hi", true), (QStringList{"▁hi"}));
        QCOMPARE(piecesOf(first, "hi", false), (QStringList{"hi"}));
        // Older files say add_prefix_space instead of prepend_scheme.
        const Json legacy = {{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", true}};
        QCOMPARE(piecesOf(legacy, "a b", false), (QStringList{"▁a", "▁b"}));
    }

    void digits() {
        QCOMPARE(piecesOf(Json{{"type", "Digits"}, {"individual_digits", false}}, "ab123c4٣5"),
                 (QStringList{"ab", "123", "c", "4٣5"}));
        QCOMPARE(piecesOf(Json{{"type", "Digits"}, {"individual_digits", true}}, "ab123c"),
                 (QStringList{"ab", "1", "2", "3", "c"}));
    }

    void sequenceChainsPreTokenizers() {
        const Json sequence = {{"type", "Sequence"},
                               {"pretokenizers", {split(R"(\p{N}{1,3})", "Isolated"), {{"type", "Digits"}, {"individual_digits", true}}}}};
        QCOMPARE(piecesOf(sequence, "ab12345"), (QStringList{"ab", "1", "2", "3", "4", "5"}));
    }

    void byteLevelDecoder() {
        // "âĺ" is the start of "☃" only: U+FFFD. A token outside the alphabet keeps its own text.
        QCOMPARE(decoded(Json{{"type", "ByteLevel"}}, {"Ġa", "âĺ", "<｜x｜>", "Ġ"}), std::string(" a\uFFFD<｜x｜> "));
        QCOMPARE(decoded(Json{{"type", "ByteLevel"}}, {"âĺ", "ĥ", "Ċ"}), std::string("☃\n"));
    }

    void metaspaceDecoder() {
        QCOMPARE(decoded(Json{{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}}, {"▁▁h▁e", "▁x"}),
                 std::string("he x"));
        QCOMPARE(decoded(Json{{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "never"}}, {"▁▁h▁e", "▁x"}),
                 std::string("  h e x"));
    }

    void byteFallbackDecoder() {
        QCOMPARE(decoded(Json{{"type", "ByteFallback"}}, {"<0xE2>", "<0x98>", "<0x83>", "a"}), std::string("☃a"));
        QCOMPARE(decoded(Json{{"type", "ByteFallback"}}, {"<0xE2>", "<0x98>", "a", "<0xE2>", "<0x98>", "<0x83>", "<0xff>", "<0xFF>"}),
                 std::string("\uFFFD\uFFFDa\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD"));
    }

    void fuseStripReplaceAndSequence() {
        QCOMPARE(decoded(Json{{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 1}}, {"  a  ", " b "}),
                 std::string("a b"));
        QCOMPARE(decoded(Json{{"type", "Replace"}, {"pattern", {{"Regex", "o+"}}}, {"content", "0"}}, {"foo", "boo"}),
                 std::string("f0b0"));
        std::vector<std::string> tokens{"a", "b", "c"};
        makeDecoder(Json{{"type", "Fuse"}}, "test")->decodeChain(tokens);
        QCOMPARE(tokens, (std::vector<std::string>{"abc"}));
        // The Llama 2 / Mistral decoder.
        const Json llama = {{"type", "Sequence"},
                            {"decoders",
                             {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                              {{"type", "ByteFallback"}},
                              {{"type", "Fuse"}},
                              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
        QCOMPARE(decoded(llama, {"▁hello", "▁", "<0xE2>", "<0x98>", "<0x83>", "▁w", "<0xC3>"}), std::string("hello ☃ w\uFFFD"));
    }

    void templateProcessing() {
        const Json bos = {
            {"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
        std::vector<int> ids{5, 6};
        makePostProcessor(bos, "test")->process(ids);
        QCOMPARE(ids, (std::vector<int>{1, 5, 6}));
        std::vector<int> unchanged{5, 6};
        makePostProcessor(byteLevel(true, true), "test")->process(unchanged);
        QCOMPARE(unchanged, (std::vector<int>{5, 6}));
    }
};

QTEST_GUILESS_MAIN(TokenizerComponentsTest)
#include "tst_tokenizer_components.moc"
