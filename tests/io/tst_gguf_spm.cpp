// A SentencePiece ("llama") vocabulary in a GGUF, as Mistral and Mixtral files carry it, imported as a
// Hugging Face tokenizer.json: a vocabulary made here (pieces with random scores, byte pieces, <unk>,
// <s>, </s>, one user-defined token) encodes every sentence to the ids of a plain SentencePiece BPE
// encoder written below (join the adjacent pair whose result is the highest-scoring piece, bytes for
// characters the vocabulary lacks) and decodes back to the text.
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "gguf_writer.h"
#include "io/gguf.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"
#include "test_support.h"
#include "text/gguf_tokenizer.h"

using namespace tandem;
using namespace tandem::test;

namespace {

const std::string kSpace = "\xE2\x96\x81";  // "▁"
const std::string kTemplate = "{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}";

const std::vector<std::string> kCorpus = {
    "the quick brown fox jumps over the lazy dog",
    "a mixture of experts routes every token to a few of its experts",
    "tandem runs large models on one machine with the experts in memory",
    "there is nothing in the world that the other one does not know",
    "reading and writing are the oldest things the machine does",
};

std::vector<std::string> characters(const std::string& s) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size();) {
        std::size_t n = 1;
        while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}

std::string spaced(const std::string& text) {
    std::string out = kSpace;
    for (const char c : text) out += c == ' ' ? kSpace : std::string(1, c);
    return out;
}

struct Vocab {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<std::int32_t> types;
    std::map<std::string, int> normal;  // piece -> id of the normal pieces

    int add(const std::string& piece, float score, std::int32_t type) {
        tokens.push_back(piece);
        scores.push_back(score);
        types.push_back(type);
        const int id = static_cast<int>(tokens.size()) - 1;
        if (type == 1) normal.emplace(piece, id);
        return id;
    }
};

// Llama's layout: <unk>, <s>, </s>, the 256 byte pieces, then the pieces. Characters the corpus uses
// except 'z' and 'v' (so that they fall back to bytes), then ~450 of the corpus's substrings with
// distinct random scores, so that many pieces can be built in several ways and the order matters.
Vocab makeVocab() {
    Vocab v;
    v.add("<unk>", 0, 2);
    v.add("<s>", 0, 3);
    v.add("</s>", 0, 3);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        v.add(name, 0, 6);
    }
    std::set<std::string> chars = {kSpace, "."};
    std::set<std::string> substrings;
    for (const auto& sentence : kCorpus) {
        const auto c = characters(spaced(sentence));
        for (const auto& ch : c)
            if (ch != "z" && ch != "v") chars.insert(ch);
        for (std::size_t i = 0; i < c.size(); ++i) {
            std::string s = c[i];
            for (std::size_t j = i + 1; j < c.size() && j < i + 7; ++j) substrings.insert(s += c[j]);
        }
    }
    for (const auto& ch : chars) v.add(ch, -1000.0f - static_cast<float>(v.tokens.size()), 1);
    std::vector<std::string> pool(substrings.begin(), substrings.end());
    std::mt19937 rng(20240611);
    std::shuffle(pool.begin(), pool.end(), rng);
    pool.resize(450);
    std::vector<int> ranks(pool.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int>(i);
    std::shuffle(ranks.begin(), ranks.end(), rng);
    for (std::size_t i = 0; i < pool.size(); ++i)
        if (pool[i].find('z') == std::string::npos && pool[i].find('v') == std::string::npos)
            v.add(pool[i], -0.25f * static_cast<float>(ranks[i]), 1);
    v.add("<|tool|>", 0, 4);
    return v;
}

// SentencePiece's BPE on one text: the text with "▁" for spaces and in front, split into characters,
// then the adjacent pair making the highest-scoring piece is joined (the leftmost among equals) until
// none makes a piece; what is not a piece becomes its UTF-8 bytes. `lowestFirst` turns the order
// around, to show that the order matters for the test's sentences.
std::vector<int> referenceEncode(const Vocab& v, const std::string& text, bool lowestFirst = false) {
    auto symbols = characters(spaced(text));
    for (;;) {
        std::size_t best = symbols.size();
        float bestScore = 0;
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
            const auto it = v.normal.find(symbols[i] + symbols[i + 1]);
            if (it == v.normal.end()) continue;
            const float score = (lowestFirst ? -1.0f : 1.0f) * v.scores[static_cast<std::size_t>(it->second)];
            if (best == symbols.size() || score > bestScore) best = i, bestScore = score;
        }
        if (best == symbols.size()) break;
        symbols[best] += symbols[best + 1];
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
    std::vector<int> ids;
    for (const auto& s : symbols) {
        if (const auto it = v.normal.find(s); it != v.normal.end()) {
            ids.push_back(it->second);
            continue;
        }
        for (const unsigned char b : s) ids.push_back(3 + b);
    }
    return ids;
}

QByteArray f32Array(const std::vector<float>& values) {
    QByteArray b = GgufWriter::le<std::uint32_t>(GgufWriter::F32) + GgufWriter::le<std::uint64_t>(values.size());
    const auto start = b.size();
    b.resize(start + static_cast<qsizetype>(values.size() * sizeof(float)));
    std::memcpy(b.data() + start, values.data(), values.size() * sizeof(float));
    return b;
}

GgufWriter spmGguf(const Vocab& v, bool addBos = true) {
    GgufWriter w;
    w.string("general.architecture", "llama");
    w.string("tokenizer.ggml.model", "llama");
    w.strings("tokenizer.ggml.tokens", v.tokens);
    w.raw("tokenizer.ggml.scores", GgufWriter::Array, f32Array(v.scores));
    w.i32s("tokenizer.ggml.token_type", v.types);
    w.u32("tokenizer.ggml.bos_token_id", 1);
    w.u32("tokenizer.ggml.eos_token_id", 2);
    w.u32("tokenizer.ggml.unknown_token_id", 0);
    w.boolean("tokenizer.ggml.add_bos_token", addBos);
    w.boolean("tokenizer.ggml.add_eos_token", false);
    w.string("tokenizer.chat_template", kTemplate);
    return w;
}

}  // namespace

class GgufSpmTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    Vocab vocab_ = makeVocab();

    text::GgufTokenizerFiles import(const GgufWriter& w) {
        const QString path = tmp_.filePath("spm.gguf");
        writeFile(path, w.bytes());
        return text::ggufTokenizerFiles(io::GgufModel(path.toStdString()));
    }

private slots:
    void encodesAsSentencePiece_data() {
        QTest::addColumn<QString>("text");
        for (const auto& s : kCorpus) QTest::newRow(s.c_str()) << QString::fromStdString(s);
        QTest::newRow("unknown characters") << QString::fromUtf8("zebras in Zürich pay 5 € for 日本 tea");
        QTest::newRow("leading spaces") << QString(" the  experts");
        QTest::newRow("several spaces") << QString("the   other    one ");
        QTest::newRow("newlines") << QString("one line\nthe next\n\nand the last\n");
        QTest::newRow("one character") << QString("a");
        QTest::newRow("nothing but bytes") << QString::fromUtf8("\t\xF0\x9F\x98\x80");
    }
    void encodesAsSentencePiece() {
        QFETCH(QString, text);
        const std::string s = text.toStdString();
        const auto files = import(spmGguf(vocab_));
        const auto tokenizer = text::Tokenizer::fromJson(files.tokenizerJson, "tokenizer.json from GGUF");
        const auto expected = referenceEncode(vocab_, s);
        QCOMPARE(tokenizer.encode(s, false), expected);
        auto withBos = expected;
        withBos.insert(withBos.begin(), 1);
        QCOMPARE(tokenizer.encode(s, true), withBos);
        QCOMPARE(QString::fromStdString(tokenizer.decode(expected, false)), text);
        QCOMPARE(QString::fromStdString(tokenizer.decode(withBos, true)), text);
    }

    // The vocabulary is not trivial: the corpus needs far fewer pieces than characters, and joining the
    // lowest-scoring pieces first would give other ids, so the merges' order is tested too.
    void piecesAreJoined() {
        std::size_t chars = 0, pieces = 0, reordered = 0;
        for (const auto& s : kCorpus) {
            chars += characters(spaced(s)).size();
            pieces += referenceEncode(vocab_, s).size();
            reordered += referenceEncode(vocab_, s) != referenceEncode(vocab_, s, true);
        }
        QVERIFY2(pieces * 2 < chars, qPrintable(QString("%1 pieces for %2 characters").arg(pieces).arg(chars)));
        QCOMPARE(reordered, kCorpus.size());
    }

    void specialTokensAndConfig() {
        const auto files = import(spmGguf(vocab_));
        const auto tokenizer = text::Tokenizer::fromJson(files.tokenizerJson, "tokenizer.json from GGUF");
        const int tool = static_cast<int>(vocab_.tokens.size()) - 1;
        QCOMPARE(tokenizer.encode("<|tool|>", false), std::vector<int>{tool});
        QCOMPARE(tokenizer.encode("</s>", false), std::vector<int>{2});
        QVERIFY(tokenizer.isSpecial(0) && tokenizer.isSpecial(1) && tokenizer.isSpecial(2));
        QVERIFY(!tokenizer.isSpecial(tool) && !tokenizer.isSpecial(3 + 'a'));
        QCOMPARE(tokenizer.idToToken(3 + 0x0A), std::optional<std::string>("<0x0A>"));
        QCOMPARE(tokenizer.vocabSize(), static_cast<int>(vocab_.tokens.size()));

        const auto json = QJsonDocument::fromJson(QByteArray::fromStdString(files.tokenizerJson)).object();
        const auto model = json["model"].toObject();
        QCOMPARE(model["unk_token"].toString(), QString("<unk>"));
        QVERIFY(model["byte_fallback"].toBool() && model["fuse_unk"].toBool());
        QVERIFY(json["pre_tokenizer"].isNull());

        const auto config = QJsonDocument::fromJson(QByteArray::fromStdString(files.tokenizerConfigJson)).object();
        QCOMPARE(config["bos_token"].toString(), QString("<s>"));
        QCOMPARE(config["eos_token"].toString(), QString("</s>"));
        QCOMPARE(config["add_bos_token"].toBool(), true);
        QCOMPARE(config["chat_template"].toString(), QString::fromStdString(kTemplate));
    }

    void withoutBosOrSpacePrefix() {
        GgufWriter w = spmGguf(vocab_, false);
        w.boolean("tokenizer.ggml.add_space_prefix", false);
        const auto files = import(w);
        const auto tokenizer = text::Tokenizer::fromJson(files.tokenizerJson, "tokenizer.json from GGUF");
        const auto ids = tokenizer.encode("the fox", true);
        QVERIFY(!ids.empty() && ids.front() != 1);
        QVERIFY(tokenizer.tokenToId(kSpace + "the") != std::optional<int>(ids.front()));
        QCOMPARE(QString::fromStdString(tokenizer.decode(ids, false)), QString("the fox"));
    }

    void refusesIncompleteVocabularies() {
        GgufWriter noScores;
        noScores.string("tokenizer.ggml.model", "llama");
        noScores.strings("tokenizer.ggml.tokens", vocab_.tokens);
        noScores.i32s("tokenizer.ggml.token_type", vocab_.types);
        try {
            import(noScores);
            QFAIL("a SentencePiece vocabulary without scores was imported");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("'tokenizer.ggml.scores' is missing"), e.what());
        }

        Vocab noBytes = vocab_;
        for (auto& t : noBytes.types) t = t == 6 ? 1 : t;
        try {
            import(spmGguf(noBytes));
            QFAIL("a SentencePiece vocabulary without byte pieces was imported");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("marks no byte pieces"), e.what());
        }
    }
};

QTEST_GUILESS_MAIN(GgufSpmTest)
#include "tst_gguf_spm.moc"
