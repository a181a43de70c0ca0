// The file parsers against damaged input: a fixed-seed loop of random mutations (flipped bits,
// boundary values, cut and spliced bytes) over a small valid GGUF and a small safetensors file. Each
// mutation must parse or fail with tandem::Error -- never crash, hang, read out of bounds (run it
// under -fsanitize=address to see those) or throw anything else.
#include <QTemporaryDir>
#include <QTest>
#include <random>

#include "gguf_quantize.h"
#include "gguf_writer.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

constexpr int kMutations = 3000;

QByteArray mutate(QByteArray f, std::mt19937_64& rng) {
    auto pick = [&](std::uint64_t n) { return static_cast<qsizetype>(rng() % std::max<std::uint64_t>(n, 1)); };
    const int edits = 1 + pick(3);
    for (int e = 0; e < edits && !f.isEmpty(); ++e) {
        const qsizetype at = pick(static_cast<std::uint64_t>(f.size()));
        switch (pick(6)) {
        case 0: f[at] = static_cast<char>(f[at] ^ (1 << pick(8))); break;
        case 1: f[at] = static_cast<char>(rng()); break;
        case 2: {  // a boundary value over an integer field
            static const std::uint64_t values[] = {0, 1, 0x7f, 0xff, 0xffff, 0x7fffffff, 0xffffffff,
                                                   0x7fffffffffffffffull, 0xffffffffffffffffull, 1ull << 32};
            const QByteArray v = GgufWriter::le(values[pick(std::size(values))]);
            f.replace(at, std::min<qsizetype>(8, f.size() - at), v.left(std::min<qsizetype>(8, f.size() - at)));
            break;
        }
        case 3: f.truncate(at); break;
        case 4: f.remove(at, pick(16) + 1); break;
        default: f.insert(at, QByteArray(pick(16) + 1, static_cast<char>(rng()))); break;
        }
    }
    return f;
}

// Touches every byte range a parsed file hands out, so an out-of-bounds span shows under ASan.
std::uint64_t touch(std::span<const std::byte> data) {
    return data.empty() ? 0 : static_cast<std::uint64_t>(data.front()) + static_cast<std::uint64_t>(data.back());
}

}  // namespace

class ParserFuzzTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;

    // Runs `parse` over kMutations mutations of `valid`; returns how many parsed.
    template <class Parse>
    int fuzz(const QByteArray& valid, const QString& name, Parse parse) {
        std::mt19937_64 rng(20240611);
        const QString path = tmp_.filePath(name);
        int parsed = 0, refused = 0;
        for (int i = 0; i < kMutations; ++i) {
            const QByteArray bytes = mutate(valid, rng);
            if (!writeFile(path, bytes)) qFatal("cannot write %s", qPrintable(path));
            try {
                parse(path.toStdString());
                ++parsed;
            } catch (const Error& e) {
                ++refused;
                if (QString::fromUtf8(e.what()).isEmpty()) qFatal("mutation %d: an empty error message", i);
            }
        }
        qInfo("%s: %d mutations parsed, %d refused with an error", qPrintable(name), parsed, refused);
        return refused;
    }

private slots:
    void ggufParserSurvivesMutations() {
        GgufWriter w;
        w.string("general.architecture", "qwen3moe");
        w.u32("qwen3moe.block_count", 2);
        w.f32("qwen3moe.rope.freq_base", 1e6f);
        w.boolean("tokenizer.ggml.add_bos_token", false);
        w.strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
        w.i32s("tokenizer.ggml.token_type", {1, 1, 3});
        std::vector<float> values(64, 0.5f);
        w.tensor("blk.0.ffn_down.weight", kQ8_0, {32, 2}, quantize(kQ8_0, values));
        w.tensor("output_norm.weight", kF32, {8}, quantize(kF32, std::span(values).first(8)));
        const QByteArray valid = w.bytes();
        const io::GgufModel base(writeAndPath(valid, "valid.gguf"));
        QCOMPARE(base.tensors().size(), std::size_t{2});
        const int refused = fuzz(valid, "mutated.gguf", [](const std::string& path) {
            const io::GgufModel model(path);
            std::uint64_t sum = 0;
            for (const auto& [name, t] : model.tensors()) sum += touch(t->data);
            return sum;
        });
        QVERIFY(refused > kMutations / 4);  // the mutations do reach the checks
    }

    void safetensorsParserSurvivesMutations() {
        const QByteArray valid = makeSafetensors({f32Tensor("a.weight", {4, 4}), f32Tensor("b.bias", {4}, 3.0f)});
        const io::SafetensorsFile base(writeAndPath(valid, "valid.safetensors"));
        QCOMPARE(base.tensors().size(), std::size_t{2});
        const int refused = fuzz(valid, "mutated.safetensors", [](const std::string& path) {
            const io::SafetensorsFile file(path);
            std::uint64_t sum = 0;
            for (const auto& t : file.tensors()) sum += touch(file.data(t));
            return sum;
        });
        QVERIFY(refused > kMutations / 4);
    }

private:
    std::string writeAndPath(const QByteArray& bytes, const QString& name) {
        const QString path = tmp_.filePath(name);
        writeFile(path, bytes);
        return path.toStdString();
    }
};

QTEST_GUILESS_MAIN(ParserFuzzTest)
#include "tst_parser_fuzz.moc"
