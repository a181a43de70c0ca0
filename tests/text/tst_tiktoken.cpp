// Kimi-K2's tiktoken tokenizer (tiktoken.model + tokenizer_config.json): every case of the
// tests/fixtures/tiktoken-kimi goldens, which the reference library tiktoken produced with Kimi's pattern
// (scripts/make_tiktoken_fixture.py); every character class of the translated pattern against tiktoken's
// regex engine on every code point; the merges against tiktoken's merge loop written out here; special
// tokens, decoding, streaming, Kimi's long-run cuts, and the errors of broken files.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <unordered_map>

#include "tandem/stream_decoder.h"
#include "tandem/tokenizer.h"
#include "expect_error.h"
#include "test_support.h"
#include "text/chat_template.h"
#include "text/onig_syntax.h"
#include "text/regex.h"
#include "text/text_chunks.h"
#include "text/tiktoken_loader.h"
#include "text/tiktoken_pattern.h"
#include "text/utf8.h"

using tandem::text::Tokenizer;
using namespace tandem::test;
namespace text = tandem::text;

namespace {

QString fixture() { return fixturePath("tiktoken-kimi"); }

// Read with nlohmann::json: Qt's JSON parser drops a U+FEFF inside a string.
const nlohmann::json& golden() {
    static const nlohmann::json g = nlohmann::json::parse(readFile(fixture() + "/golden.json").toStdString());
    return g;
}

// A golden encode case: its text and ids (long cases give the text as [text, repeat] parts and the ids
// as [id, count] runs).
struct EncodeCase {
    std::string text;
    std::vector<int> ids;
};

std::vector<EncodeCase> encodeCases() {
    std::vector<EncodeCase> cases;
    for (const auto& c : golden()["encode"]) {
        EncodeCase e;
        if (c.contains("parts")) {
            for (const auto& part : c["parts"])
                for (int k = 0; k < part[1].get<int>(); ++k) e.text += part[0].get<std::string>();
            for (const auto& run : c["ids_rle"]) e.ids.insert(e.ids.end(), run[1].get<std::size_t>(), run[0].get<int>());
        } else {
            e.text = c["text"].get<std::string>();
            e.ids = c["ids"].get<std::vector<int>>();
        }
        cases.push_back(std::move(e));
    }
    return cases;
}

// The raw bytes of every rank, read from the fixture with Qt's base64 (independently of the loader).
std::vector<std::string> fixtureRanks() {
    std::vector<std::string> ranks;
    for (const QByteArray& line : readFile(fixture() + "/tiktoken.model").split('\n')) {
        if (line.isEmpty()) continue;
        const QList<QByteArray> fields = line.split(' ');
        const auto rank = static_cast<std::size_t>(fields[1].toInt());
        if (rank >= ranks.size()) ranks.resize(rank + 1);
        ranks[rank] = QByteArray::fromBase64(fields[0]).toStdString();
    }
    return ranks;
}

// tiktoken's byte_pair_merge, as its Rust core writes it: parts start as single bytes; the adjacent pair
// whose concatenation has the lowest rank (the leftmost on a tie) joins, until none is a token. A piece
// that is a token itself is that token.
std::vector<int> tiktokenPiece(const std::string& piece, const std::unordered_map<std::string, int>& rankOf) {
    if (const auto it = rankOf.find(piece); it != rankOf.end()) return {it->second};
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i <= piece.size(); ++i) starts.push_back(i);
    for (;;) {
        int best = -1;
        std::size_t at = 0;
        for (std::size_t i = 0; i + 2 < starts.size(); ++i) {
            const auto it = rankOf.find(piece.substr(starts[i], starts[i + 2] - starts[i]));
            if (it != rankOf.end() && (best < 0 || it->second < best)) {
                best = it->second;
                at = i;
            }
        }
        if (best < 0) break;
        starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    std::vector<int> ids;
    for (std::size_t i = 0; i + 1 < starts.size(); ++i) ids.push_back(rankOf.at(piece.substr(starts[i], starts[i + 1] - starts[i])));
    return ids;
}

// The code points a one-character class of Rust regex syntax matches, translated and run by PCRE2, as
// [first, last] ranges.
std::vector<std::pair<char32_t, char32_t>> pcre2Members(const std::string& rustClass) {
    static const std::string everything = [] {
        std::string s;
        for (char32_t c = 0; c < 0x110000; ++c)
            if (c < 0xD800 || c > 0xDFFF) text::utf8::append(s, c);
        return s;
    }();
    const text::Regex regex(text::tiktokenPatternToPcre2(rustClass, "test"), "test");
    std::vector<std::pair<char32_t, char32_t>> ranges;
    std::size_t from = 0;
    while (const auto m = regex.find(everything, from)) {
        std::size_t pos = m->start;
        const char32_t c = text::utf8::decode(everything, pos);
        if (pos != m->end) qFatal("a class matched more than one character");
        if (!ranges.empty() && (ranges.back().second + 1 == c || (ranges.back().second == 0xD7FF && c == 0xE000)))
            ranges.back().second = c;
        else
            ranges.emplace_back(c, c);
        from = m->end;
    }
    return ranges;
}

// Surrogates are no characters: tiktoken's ranges skip them, so a range over them is two.
std::vector<std::pair<char32_t, char32_t>> referenceMembers(const QJsonArray& list) {
    std::vector<std::pair<char32_t, char32_t>> ranges;
    for (const QJsonValue& r : list) {
        const auto first = static_cast<char32_t>(r.toArray()[0].toInt()), last = static_cast<char32_t>(r.toArray()[1].toInt());
        if (!ranges.empty() && ranges.back().second == 0xD7FF && first == 0xE000)
            ranges.back().second = last;
        else
            ranges.emplace_back(first, last);
    }
    return ranges;
}

QString describe(const std::vector<std::pair<char32_t, char32_t>>& ranges) {
    QStringList parts;
    for (const auto& [a, b] : ranges)
        parts << (a == b ? QString::number(a, 16) : QString::number(a, 16) + "-" + QString::number(b, 16));
    return parts.join(' ');
}

// Ranges in `a` but not in `b`.
std::vector<std::pair<char32_t, char32_t>> minus(const std::vector<std::pair<char32_t, char32_t>>& a,
                                                 const std::vector<std::pair<char32_t, char32_t>>& b) {
    std::vector<bool> inB(0x110000);
    for (const auto& [x, y] : b)
        for (char32_t c = x; c <= y; ++c) inB[c] = true;
    std::vector<std::pair<char32_t, char32_t>> out;
    for (const auto& [x, y] : a)
        for (char32_t c = x; c <= y; ++c) {
            if (inB[c]) continue;
            if (!out.empty() && out.back().second + 1 == c)
                out.back().second = c;
            else
                out.emplace_back(c, c);
        }
    return out;
}

// A model folder made of the fixture's files with some replaced.
class Folder {
public:
    Folder() {
        if (!copyFixture("tiktoken-kimi", dir_.path())) qFatal("cannot copy the fixture");
    }
    QString path() const { return dir_.path(); }
    void write(const QString& name, const QByteArray& bytes) const {
        if (!writeFile(dir_.path() + "/" + name, bytes)) qFatal("cannot write %s", qPrintable(name));
    }
    void remove(const QString& name) const { QFile::remove(dir_.path() + "/" + name); }
    QByteArray read(const QString& name) const { return readFile(dir_.path() + "/" + name); }
    Tokenizer load() const { return Tokenizer::load(dir_.path().toStdString()); }

private:
    QTemporaryDir dir_;
};


const std::string kKimiCode = R"PY(
class TikTokenTokenizer(PreTrainedTokenizer):
    num_reserved_special_tokens = 256

    pat_str = "|".join(
        [
            r"""[\p{Han}]+""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    )

    def __init__(self, vocab_file, **kwargs):
        self.model = tiktoken.Encoding(name=Path(vocab_file).name, pat_str=self.pat_str)
)PY";

const std::string kKimiCodeWrapped = R"PY(
    pat_str = '|'.join([
        r"""[\p{Han}]+""",
        (
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"""
            r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""  # lower case first
        ),
        (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"""
         r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""),
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+"""
    ])
)PY";

}  // namespace

class TestTiktoken : public QObject {
    Q_OBJECT

private slots:
    void patternIsTheGoldensPattern() { QCOMPARE(std::string(text::kKimiPattern), golden()["pattern"].get<std::string>()); }

    // Every golden of tiktoken, byte for byte; decode gives the text back.
    void encodesAsTiktoken() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        const auto cases = encodeCases();
        QVERIFY(cases.size() > 300);
        for (const EncodeCase& c : cases) {
            const auto ids = tokenizer.encode(c.text, false);
            if (ids != c.ids) {
                QString got, want;
                for (const int id : ids) got += QString::number(id) + " ";
                for (const int id : c.ids) want += QString::number(id) + " ";
                QFAIL(qPrintable(QString("'%1': got %2, tiktoken %3").arg(QString::fromStdString(c.text.substr(0, 200)), got.left(400), want.left(400))));
            }
            // Kimi adds no BOS of its own.
            QCOMPARE(tokenizer.encode(c.text, true), c.ids);
            QCOMPARE(tokenizer.decode(ids, false), c.text);
        }
    }

    void decodesAsTiktoken() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        for (const auto& c : golden()["decode"])
            QCOMPARE(tokenizer.decode(c["ids"].get<std::vector<int>>(), false), c["text"].get<std::string>());
    }

    // Each id alone: its bytes, or U+FFFD where they are not UTF-8 on their own.
    void decodesEveryRank() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        const auto ranks = fixtureRanks();
        int partial = 0;
        for (std::size_t r = 0; r < ranks.size(); ++r) {
            const std::string decoded = tokenizer.decode(std::vector<int>{static_cast<int>(r)}, false);
            QCOMPARE(decoded, text::utf8::toValidLossy(ranks[r]));
            if (text::utf8::firstInvalidOffset(ranks[r]) != text::utf8::kValid) {
                QVERIFY(decoded.find(text::utf8::kReplacementCharacter) != std::string::npos);
                ++partial;
            }
        }
        QVERIFY(partial > 100);
    }

    // The rendered Kimi template, and its ids.
    void chatTemplateAsTransformers() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        const auto chat = text::ChatTemplate::load(fixture().toStdString(), "kimi_k2");
        QVERIFY(!chat.isFallback());
        QCOMPARE(chat.specialToken("eos_token"), std::optional<std::string>("[EOS]"));
        for (const auto& c : golden()["chat"]) {
            const std::string rendered = chat.render(nlohmann::ordered_json::parse(c["messages"].dump()), true);
            QCOMPARE(rendered, c["text"].get<std::string>());
            QCOMPARE(tokenizer.encode(rendered, false), c["ids"].get<std::vector<int>>());
        }
    }

    // The vocabulary as Kimi's TikTokenTokenizer sees it: ranks, then 256 special ids.
    void vocabulary() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        const int base = golden()["num_base_tokens"].get<int>();
        QCOMPARE(tokenizer.vocabSize(), base + 256);
        QCOMPARE(tokenizer.tokenToId("[BOS]"), std::optional<int>(base));
        QCOMPARE(tokenizer.tokenToId("[EOS]"), std::optional<int>(base + 1));
        QCOMPARE(tokenizer.tokenToId("<|im_end|>"), std::optional<int>(base + 2));
        QCOMPARE(tokenizer.tokenToId("<|im_middle|>"), std::optional<int>(base + 17));
        QCOMPARE(tokenizer.tokenToId("[PAD]"), std::optional<int>(base + 255));
        // Unnamed ids of the reserved block get Kimi's names.
        const std::string reserved = "<|reserved_token_" + std::to_string(base + 5) + "|>";
        QCOMPARE(tokenizer.tokenToId(reserved), std::optional<int>(base + 5));
        QCOMPARE(tokenizer.idToToken(base + 5), std::optional<std::string>(reserved));
        QVERIFY(tokenizer.isSpecial(base) && tokenizer.isSpecial(base + 5) && tokenizer.isSpecial(base + 255));
        // K2-Thinking's think tags are not "special": decode(skipSpecialTokens) keeps them.
        const int think = *tokenizer.tokenToId("<think>");
        QVERIFY(!tokenizer.isSpecial(think));
        QCOMPARE(tokenizer.decode(std::vector<int>{base, think, base + 2}, true), std::string("<think>"));
        QCOMPARE(tokenizer.idToToken(base + 256), std::nullopt);
        // Ranks are named in the byte-level alphabet, as Kimi's convert_ids_to_tokens names them.
        const auto the = tokenizer.encode(" the", false);
        QCOMPARE(the.size(), std::size_t{1});
        QCOMPARE(tokenizer.idToToken(the[0]), std::optional<std::string>("\xC4\xA0the"));  // "Ġthe"
        QCOMPARE(tokenizer.tokenToId("\xC4\xA0the"), std::optional<int>(the[0]));
        expectError([&] { tokenizer.decode(std::vector<int>{base + 256}, false); }, {"cannot decode token id"});
    }

    // A special token is its text, even one of Latin-1 letters that the byte-level alphabet also has.
    void specialTokensDecodeAsTheirText() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        const std::string cafe = "<|«café»|>";
        const auto id = tokenizer.tokenToId(cafe);
        QVERIFY(id.has_value());
        QCOMPARE(tokenizer.encode(cafe, false), std::vector<int>{*id});
        QCOMPARE(tokenizer.decode(std::vector<int>{*id}, false), cafe);
        QCOMPARE(tokenizer.decode(std::vector<int>{*id}, true), std::string());
    }

    // Characters split over several tokens come out whole, and only once complete.
    void streamDecoding() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        const std::string original = "魑魅魍魉 👋🏽 中文和English混合 ẞẞẞ 🦜<|im_end|>";
        const auto ids = tokenizer.encode(original, false);
        text::StreamDecoder stream(tokenizer);
        std::string shown;
        for (const int id : ids)
            for (const auto& piece : stream.push(id)) {
                QVERIFY(text::utf8::firstInvalidOffset(piece.text) == text::utf8::kValid);
                QVERIFY(piece.text.find(text::utf8::kReplacementCharacter) == std::string::npos);
                shown += piece.text;
            }
        for (const auto& piece : stream.finish()) shown += piece.text;
        QCOMPARE(shown, std::string("魑魅魍魉 👋🏽 中文和English混合 ẞẞẞ 🦜"));
        // The first byte of "中" alone is held back.
        const auto ranks = fixtureRanks();
        const auto lead = std::find(ranks.begin(), ranks.end(), std::string("\xE4"));
        QVERIFY(lead != ranks.end());
        text::StreamDecoder partial(tokenizer);
        QVERIFY(partial.push(static_cast<int>(lead - ranks.begin())).empty());
        QCOMPARE(partial.finish().at(0).text, std::string(text::utf8::kReplacementCharacter));
    }

    // Every class of Kimi's pattern holds, on every code point, what it holds in tiktoken's regex engine.
    void classesMatchTiktokenOnEveryCodePoint() {
        const QJsonObject classes = QJsonDocument::fromJson(readFile(fixture() + "/classes.json")).object();
        QCOMPARE(classes.size(), 9);
        for (auto it = classes.begin(); it != classes.end(); ++it) {
            const auto reference = referenceMembers(it.value().toArray());
            const auto ours = pcre2Members(it.key().toStdString());
            if (ours != reference)
                QFAIL(qPrintable(QString("%1: PCRE2 lacks [%2] and has in excess [%3]")
                                     .arg(it.key(), describe(minus(reference, ours)), describe(minus(ours, reference)))));
        }
    }

    // Each "[A&&[^B]]" becomes a lookahead and a class; the original's intersection is exactly that.
    void intersectionsBecomeLookaheads() {
        const std::string translated = text::tiktokenPatternToPcre2(R"([\p{Lt}\p{M}&&[^\p{Han}]]+)", "test");
        QVERIFY(translated.starts_with("(?:(?=[^\\x{2E80}-"));
        QVERIFY(translated.find("])[\\p{Lt}\\p{M}\\x{897}") != std::string::npos);
        QVERIFY(translated.ends_with("])+"));
        // The Han class is the script, not PCRE2's script extension: the ideographic comma is no Han.
        const text::Regex han(text::tiktokenPatternToPcre2(R"([\p{Han}]+)", "test"), "test");
        QVERIFY(!han.find("、", 0));
        QVERIFY(han.find("々", 0));
        // \s is White_Space: no U+180E.
        const text::Regex space(text::tiktokenPatternToPcre2(R"(\s+)", "test"), "test");
        QVERIFY(!space.find("\u180E", 0));
        QVERIFY(space.find("\u3000\u0085", 0));
        // The whole pattern compiles, and translating it again changes nothing.
        const std::string kimi = text::tiktokenPatternToPcre2(text::kKimiPattern, "test");
        QCOMPARE(text::oniguramaToPcre2(kimi, "test"), kimi);
        const text::Regex whole(kimi, "test");
        QVERIFY(whole.find("Hello", 0));
    }

    void untranslatableConstructsAreRefused() {
        for (const char* pattern : {R"(\w+)", R"(\bword)", R"(\d)", R"(\p{Greek})", R"(\p{Nd})", R"([\P{L}])",
                                    R"([^\S])", R"([[:alpha:]])", R"([a[bc]])", R"([abc)"}) {
            expectError([&] { text::tiktokenPatternToPcre2(pattern, "tokenizer X"); }, {"tokenizer X", "regex"});
        }
        QCOMPARE(text::tiktokenPatternToPcre2(R"(\x{41}[\r\n\-]'s)", "test"), std::string(R"(\x{41}[\r\n\-]'s)"));
    }

    // The merges reproduce tiktoken's merge loop (written out above) on many words, including pieces of
    // characters the vocabulary lacks, runs of one letter (rank ties) and whole-piece tokens no merge builds.
    void mergesMatchTiktokensLoop() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        const auto ranks = fixtureRanks();
        std::unordered_map<std::string, int> rankOf;
        for (std::size_t r = 0; r < ranks.size(); ++r) rankOf.emplace(ranks[r], static_cast<int>(r));
        const text::Regex pattern(text::tiktokenPatternToPcre2(text::kKimiPattern, "test"), "test");
        const std::vector<std::string> fragments = {
            "the", " the", "中", "文", "模型", "专家", "魑", "魅", "魍魉", "龘", "a", "aa", "aaa", "ing", "tion", "🦜",
            "👋", "🏽", "é", "ẞ", "Zyzzyva", " qwxzq", "2025", "。", "，", " ", "\n", "'s", "'LL", "ſ", "x", "Σ", "λ",
            "ka", "mo", "str", "Привет", "東京", "한국", "\u0301", "\U00031350", "\U00010D50"};
        QRandomGenerator rng(12345);
        int words = 0;
        for (int n = 0; n < 3000; ++n) {
            std::string s;
            const int count = rng.bounded(1, 10);
            for (int k = 0; k < count; ++k) s += fragments[static_cast<std::size_t>(rng.bounded(static_cast<int>(fragments.size())))];
            std::vector<int> expected;
            std::size_t from = 0;
            while (const auto m = pattern.find(s, from)) {
                const auto piece = tiktokenPiece(s.substr(m->start, m->end - m->start), rankOf);
                expected.insert(expected.end(), piece.begin(), piece.end());
                from = m->end;
                ++words;
            }
            QCOMPARE(tokenizer.encode(s, false), expected);
        }
        QVERIFY(words > 5000);
    }

    // decode(encode(s)) == s for random text of many scripts, marks, whitespace and special tokens.
    void roundTripsRandomText() {
        const Tokenizer tokenizer = Tokenizer::load(fixture().toStdString());
        const std::vector<std::pair<char32_t, char32_t>> blocks = {
            {0x20, 0x7E}, {0x9, 0xD}, {0xA0, 0x24F}, {0x300, 0x36F}, {0x370, 0x3FF}, {0x400, 0x4FF}, {0x590, 0x6FF},
            {0x900, 0x97F}, {0x1680, 0x1680}, {0x180E, 0x180E}, {0x2000, 0x206F}, {0x3000, 0x30FF}, {0x4E00, 0x9FFF},
            {0xAC00, 0xD7A3}, {0xFF00, 0xFFEF}, {0x10D40, 0x10D8F}, {0x1F300, 0x1FAFF}, {0x20000, 0x2A6DF},
            {0x31350, 0x323AF}, {0xE0000, 0xE007F}};
        QRandomGenerator rng(7);
        for (int n = 0; n < 2000; ++n) {
            std::string s;
            const int length = rng.bounded(1, 40);
            for (int k = 0; k < length; ++k) {
                if (rng.bounded(20) == 0) {
                    s += rng.bounded(2) ? "<|im_end|>" : "[BOS]";
                    continue;
                }
                const auto& [lo, hi] = blocks[static_cast<std::size_t>(rng.bounded(static_cast<int>(blocks.size())))];
                text::utf8::append(s, lo + static_cast<char32_t>(rng.bounded(static_cast<int>(hi - lo + 1))));
            }
            QCOMPARE(tokenizer.decode(tokenizer.encode(s, false), false), s);
        }
    }

    // Kimi's cuts with small limits: chunks of 5 characters, runs of at most 3.
    void longRunsAreCutAsKimiCutsThem() {
        const auto pieces = [](std::string_view s, text::ChunkLimits limits) {
            std::vector<std::string> out;
            text::forEachChunk(s, limits, [&](std::string_view piece, bool atStart) {
                QCOMPARE(atStart, out.empty());
                out.emplace_back(piece);
            });
            return out;
        };
        using V = std::vector<std::string>;
        QCOMPARE(pieces("", {5, 3}), V{});
        QCOMPARE(pieces("abcd", {100, 3}), (V{"abc", "d"}));
        QCOMPARE(pieces("abc  de", {100, 3}), (V{"abc  de"}));
        QCOMPARE(pieces("ab    cdefgh", {100, 3}), (V{"ab   ", " cde", "fgh"}));
        QCOMPARE(pieces("abcdefghijk", {5, 100}), (V{"abcde", "fghij", "k"}));
        // Runs start afresh in each chunk.
        QCOMPARE(pieces("abcdefg", {5, 3}), (V{"abc", "de", "fg"}));
        // Characters, not bytes; U+001C is whitespace to Python, U+180E is not.
        QCOMPARE(pieces("中中中中", {100, 3}), (V{"中中中", "中"}));
        QCOMPARE(pieces("aa\x1c\x1c\x1c\x1c", {100, 3}), (V{"aa\x1c\x1c\x1c", "\x1c"}));
        QCOMPARE(pieces("aa\u180Ebb", {100, 3}), (V{"aa\u180E", "bb"}));
        for (char32_t c = 0; c < 0x110000; ++c) {
            const bool expected = c == 0x1C || c == 0x1D || c == 0x1E || c == 0x1F || c == 0x85 || c == 0xA0 ||
                                  (c >= 9 && c <= 13) || c == 0x20 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
                                  c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
            QCOMPARE(text::isPythonSpace(c), expected);
        }
    }

    void loadsFromTheFileToo() {
        const Tokenizer tokenizer = Tokenizer::load((fixture() + "/tiktoken.model").toStdString());
        QCOMPARE(tokenizer.encode("你好，世界！", false), Tokenizer::load(fixture().toStdString()).encode("你好，世界！", false));
    }

    // A tokenizer.json, when the folder has one, is what the folder's tokenizer is.
    void tokenizerJsonComesFirst() {
        const Folder folder;
        folder.write("tokenizer.json", readFile(fixturePath("tiny-qwen3moe") + "/tokenizer.json"));
        QCOMPARE(folder.load().vocabSize(), Tokenizer::load(fixturePath("tiny-qwen3moe").toStdString()).vocabSize());
    }

    void missingFilesAreNamed() {
        const QTemporaryDir empty;
        expectError([&] { Tokenizer::load(empty.path().toStdString()); }, {"cannot read", "tokenizer.json", "tiktoken.model with tokenizer_config.json", "has neither"});
        const Folder folder;
        folder.remove("tokenizer_config.json");
        expectError([&] { folder.load(); }, {"tiktoken.model", "no tokenizer_config.json"});
    }

    void malformedRankFilesNameTheLine_data() {
        QTest::addColumn<QByteArray>("replacement");  // of line 3 ("Iw== 2")
        QTest::addColumn<QString>("message");
        QTest::newRow("one field") << QByteArray("Iw==") << "line 3: expected a base64 token and its rank";
        QTest::newRow("three fields") << QByteArray("Iw== 2 7") << "line 3: expected a base64 token and its rank";
        QTest::newRow("not base64") << QByteArray("I*== 2") << "line 3: 'I*==' is not a base64 token";
        QTest::newRow("bad padding") << QByteArray("Iw= 2") << "line 3: 'Iw=' is not a base64 token";
        QTest::newRow("rank not a number") << QByteArray("Iw== two") << "line 3: the rank 'two' is not a whole number";
        QTest::newRow("negative rank") << QByteArray("Iw== -2") << "line 3: the rank '-2'";
        QTest::newRow("huge rank") << QByteArray("Iw== 99999999999") << "line 3: the rank '99999999999'";
        QTest::newRow("duplicate rank") << QByteArray("Iw== 1") << "line 3: the rank 1 was already given on line 2";
        QTest::newRow("duplicate token") << QByteArray("Ig== 2") << "line 3: the token '\"' was already given on line 2";
        QTest::newRow("binary") << QByteArray("\xff\xfe 2") << "line 3: '\\xFF\\xFE' is not a base64 token";
    }

    void malformedRankFilesNameTheLine() {
        QFETCH(QByteArray, replacement);
        QFETCH(QString, message);
        const Folder folder;
        QList<QByteArray> lines = folder.read("tiktoken.model").split('\n');
        QCOMPARE(lines[2], QByteArray("Iw== 2"));
        lines[2] = replacement;
        folder.write("tiktoken.model", lines.join('\n'));
        expectError([&] { folder.load(); }, {"tiktoken.model", qPrintable(message)});
    }

    // Blank lines and CRLF line ends are what Python's splitlines() allows; line numbers still count them.
    void lineEndsAsPython() {
        const std::string ranks = "IQ==\r\n\r\nIg== 1\rIw== 1\n";
        expectError([&] { text::parseTiktokenRanks(ranks, "f"); }, {"f line 1: expected a base64 token"});
        const auto parsed = text::parseTiktokenRanks("IQ== 0\r\n\r\nIg== 1\rIw== 2\n\n", "f");
        QCOMPARE(parsed, (std::vector<std::string>{"!", "\"", "#"}));
        expectError([&] { text::parseTiktokenRanks("IQ== 0\r\n\r\nIg== 1\rIw== 1\n", "f"); }, {"f line 4: the rank 1 was already given on line 3"});
        expectError([&] { text::parseTiktokenRanks("\n\n", "f"); }, {"f holds no tokens"});
    }

    void aMissingByteIsAnError() {
        const Folder folder;
        QList<QByteArray> lines = folder.read("tiktoken.model").split('\n');
        lines.removeAt(2);  // the byte '#'
        folder.write("tiktoken.model", lines.join('\n'));
        expectError([&] { folder.load(); }, {"tiktoken.model", "no token for the single byte #"});
    }

    void specialIdsMustNotBeRanks() {
        const Folder folder;
        auto config = nlohmann::json::parse(folder.read("tokenizer_config.json").toStdString());
        config["added_tokens_decoder"]["7"] = {{"content", "<|bad|>"}, {"special", true}};
        folder.write("tokenizer_config.json", QByteArray::fromStdString(config.dump()));
        expectError([&] { folder.load(); }, {"tokenizer_config.json", "'<|bad|>'", "id 7", "the files do not belong together"});

        // A gap in the ranks moves the reserved block onto the last rank.
        const Folder gap;
        QList<QByteArray> lines = gap.read("tiktoken.model").split('\n');
        lines.removeAt(300);
        gap.write("tiktoken.model", lines.join('\n'));
        expectError([&] { gap.load(); }, {"tiktoken.model", "gaps between its ranks"});
    }

    void otherTokenizerClassesAreRefused() {
        const Folder folder;
        auto config = nlohmann::json::parse(folder.read("tokenizer_config.json").toStdString());
        config["tokenizer_class"] = "Qwen2Tokenizer";
        folder.write("tokenizer_config.json", QByteArray::fromStdString(config.dump()));
        expectError([&] { folder.load(); }, {"tokenizer_class", "Qwen2Tokenizer", "TikTokenTokenizer"});
        config["tokenizer_class"] = "TikTokenTokenizer";
        config["added_tokens_decoder"] = {{"x1", {{"content", "<|x|>"}}}};
        folder.write("tokenizer_config.json", QByteArray::fromStdString(config.dump()));
        expectError([&] { folder.load(); }, {"added_tokens_decoder[\"x1\"]", "token id"});
        folder.write("tokenizer_config.json", "{\"added_tokens_decoder\": ");
        expectError([&] { folder.load(); }, {"tokenizer_config.json is not valid JSON"});
    }

    // tokenization_kimi.py, when the folder has it, must hold the pattern Tandem knows.
    void theTokenizerCodeMustHoldKimisPattern() {
        QCOMPARE(text::pythonPatternOf(kKimiCode), std::optional<std::string>(std::string(text::kKimiPattern)));
        // Newer releases wrap a long alternative in parentheses, as adjacent literals.
        QCOMPARE(text::pythonPatternOf(kKimiCodeWrapped), std::optional<std::string>(std::string(text::kKimiPattern)));
        QCOMPARE(text::pythonPatternOf("pat_str = compute()"), std::nullopt);
        QCOMPARE(text::pythonPatternOf("x = self.pat_str"), std::nullopt);

        const Folder folder;
        folder.write("tokenization_kimi.py", QByteArray::fromStdString(kKimiCode));
        QCOMPARE(folder.load().encode("Hello 世界", false), Tokenizer::load(fixture().toStdString()).encode("Hello 世界", false));
        std::string changed = kKimiCode;
        const std::string digits = R"(\p{N}{1,3})";
        changed.replace(changed.find(digits), digits.size(), R"(\p{N}{1,4})");
        folder.write("tokenization_kimi.py", QByteArray::fromStdString(changed));
        expectError([&] { folder.load(); }, {"tokenization_kimi.py", "pat_str", "Kimi-K2"});
        // auto_map names the module, perhaps of another repository ("owner/repo--module.Class").
        auto config = nlohmann::json::parse(folder.read("tokenizer_config.json").toStdString());
        config["auto_map"]["AutoTokenizer"] = {"moonshotai/Kimi-K2-Instruct--tokenization_moonshot.TikTokenTokenizer", nullptr};
        folder.write("tokenizer_config.json", QByteArray::fromStdString(config.dump()));
        QVERIFY(folder.load().vocabSize() > 0);  // tokenization_kimi.py is not its code
        folder.write("tokenization_moonshot.py", QByteArray::fromStdString(changed));
        expectError([&] { folder.load(); }, {"tokenization_moonshot.py", "pat_str"});
    }
};

QTEST_GUILESS_MAIN(TestTiktoken)
#include "tst_tiktoken.moc"
