// The GGUF reader: metadata of every type, tensors, alignment and split files read back as written;
// the block types dequantized as llama.cpp's reference does (data/ggml_blocks.bin); and one malformed
// file per kind of damage, each refused with a tandem::Error that names the file and the problem.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

#include "gguf_quantize.h"
#include "gguf_writer.h"
#include "io/gguf.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

QByteArray floats(std::initializer_list<float> v) {
    return QByteArray(reinterpret_cast<const char*>(std::data(v)), static_cast<qsizetype>(v.size() * 4));
}

// A small valid file: a few metadata entries and two F32 tensors.
GgufWriter smallFile() {
    GgufWriter w;
    w.string("general.architecture", "qwen3moe");
    w.u32("qwen3moe.block_count", 2);
    w.strings("tokenizer.ggml.tokens", {"a", "b", "c"});
    w.tensor("first", kF32, {4}, floats({1, 2, 3, 4}));
    w.tensor("second", kF32, {2, 2}, floats({5, 6, 7, 8}));
    return w;
}

// The byte offset of the tensor info field that follows `name`'s dims (its type, then its offset).
qsizetype tensorTypeField(const QByteArray& file, const std::string& name, int dims) {
    const qsizetype at = file.indexOf(GgufWriter::str(name));
    return at + 8 + static_cast<qsizetype>(name.size()) + 4 + 8 * dims;
}

void patch(QByteArray& file, qsizetype at, const QByteArray& bytes) { file.replace(at, bytes.size(), bytes); }

}  // namespace

class GgufTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;

    QString write(const QByteArray& bytes, const QString& name = "model.gguf") {
        const QString path = tmp_.filePath(name);
        writeFile(path, bytes);
        return path;
    }

    // Opening the file fails with an Error that names it and contains `expected`.
    void expectError(const QByteArray& bytes, const char* expected) {
        const QString path = write(bytes, "broken.gguf");
        try {
            io::GgufModel model(path.toStdString());
            QFAIL(qPrintable(QString("no error; expected one containing '%1'").arg(expected)));
        } catch (const Error& e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.contains(path) && message.contains(expected), qPrintable(message));
        }
    }

private slots:
    void readsMetadataAndTensors() {
        GgufWriter w = smallFile();
        w.i32("k.i32", -5);
        w.u64("k.u64", 1ull << 40);
        w.f32("k.f32", 0.25f);
        w.boolean("k.bool", true);
        w.i32s("k.ints", {3, -1, 7});
        w.raw("k.u8", GgufWriter::U8, QByteArray(1, char(200)));
        w.raw("k.i16", GgufWriter::I16, GgufWriter::le<std::uint16_t>(0xfffe));
        w.raw("k.f64", GgufWriter::F64, GgufWriter::le<std::uint64_t>(0x4000000000000000ull));
        w.version = 2;  // v2 has the same layout
        const io::GgufModel model(write(w.bytes()).toStdString());
        QCOMPARE(model.find("general.architecture")->string, std::string("qwen3moe"));
        QCOMPARE(model.find("qwen3moe.block_count")->integer, std::int64_t{2});
        QCOMPARE(model.find("k.i32")->integer, std::int64_t{-5});
        QCOMPARE(model.find("k.u64")->integer, std::int64_t{1} << 40);
        QCOMPARE(model.find("k.f32")->real, 0.25);
        QVERIFY(model.find("k.bool")->boolean);
        QCOMPARE(model.find("k.ints")->items.size(), std::size_t{3});
        QCOMPARE(model.find("k.ints")->items[1].integer, std::int64_t{-1});
        QCOMPARE(model.find("k.u8")->integer, std::int64_t{200});
        QCOMPARE(model.find("k.i16")->integer, std::int64_t{-2});
        QCOMPARE(model.find("k.f64")->real, 2.0);
        QCOMPARE(model.find("tokenizer.ggml.tokens")->items[2].string, std::string("c"));
        const auto* second = model.tensor("second");
        QVERIFY(second);
        QCOMPARE(second->dims, (std::vector<std::int64_t>{2, 2}));
        QCOMPARE(second->bytes, std::uint64_t{16});
        float v[4];
        std::memcpy(v, second->data.data(), 16);
        QCOMPARE(v[3], 8.0f);
    }

    void honoursAlignment() {
        GgufWriter w = smallFile();
        w.alignment = 64;
        const io::GgufModel model(write(w.bytes()).toStdString());
        QCOMPARE(model.files().front()->alignment(), 64u);
        QCOMPARE(reinterpret_cast<std::uintptr_t>(model.tensor("second")->data.data()) % 64, std::uintptr_t{0});
        float v;
        std::memcpy(&v, model.tensor("second")->data.data(), 4);
        QCOMPARE(v, 5.0f);
    }

    void opensSplitFilesAsOne() {
        GgufWriter w = smallFile();
        const QString dir = tmp_.filePath("split");
        QDir().mkpath(dir);
        const auto paths = w.writeSplit(dir.toStdString(), "model", 2);
        QCOMPARE(paths.size(), std::size_t{2});
        for (const auto& path : paths) {  // any part opens the whole model
            const io::GgufModel model(path);
            QCOMPARE(model.files().size(), std::size_t{2});
            QVERIFY(model.tensor("first") && model.tensor("second"));
            QCOMPARE(model.tensor("first")->file->filename().string(), std::string("model-00001-of-00002.gguf"));
            QCOMPARE(model.tensor("second")->file->filename().string(), std::string("model-00002-of-00002.gguf"));
            QCOMPARE(model.find("qwen3moe.block_count")->integer, std::int64_t{2});
        }
        // The extension's case does not matter, for one file or the parts of a split one.
        QVERIFY(io::GgufModel::isGgufPath("models/MODEL.GGUF") && !io::GgufModel::isGgufPath("models/gguf"));
        const QString upper = dir + "/MODEL-00001-of-00002.GGUF";
        QVERIFY(QFile::copy(QString::fromStdString(paths[0]), upper));
        QVERIFY(QFile::copy(QString::fromStdString(paths[1]), dir + "/MODEL-00002-of-00002.GGUF"));
        QCOMPARE(io::GgufModel(upper.toStdString()).files().size(), std::size_t{2});
        QFile::remove(QString::fromStdString(paths[1]));
        try {
            io::GgufModel model(paths[0]);
            QFAIL("a model with a missing part opened");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("model-00002-of-00002.gguf is missing"), e.what());
        }
    }

    // Reference output of llama.cpp's dequantization (the gguf Python package) for random blocks.
    void dequantizesLikeTheReference() {
        const QByteArray data = readFile(QStringLiteral(TANDEM_IO_TEST_DATA "/ggml_blocks.bin"));
        QVERIFY(!data.isEmpty());
        qsizetype at = 0;
        int types = 0;
        while (at < data.size()) {
            std::uint32_t head[3];
            std::memcpy(head, data.data() + at, 12);
            at += 12;
            const auto* type = io::ggmlType(head[0]);
            QVERIFY(type && type->dtype);
            const auto blockBytes = static_cast<qsizetype>(type->blockBytes * head[1]);
            std::vector<float> expected(head[2]), got(head[2]);
            std::memcpy(expected.data(), data.data() + at + blockBytes, head[2] * 4);
            io::dequantizeBlocks(*type->dtype, reinterpret_cast<const std::byte*>(data.data() + at), head[2], got.data());
            at += blockBytes + static_cast<qsizetype>(head[2] * 4);
            for (std::size_t i = 0; i < got.size(); ++i)
                QVERIFY2(got[i] == expected[i] || std::fabs(got[i] - expected[i]) <= 1e-6f * std::fabs(expected[i]),
                         qPrintable(QString("%1 value %2: %3, expected %4").arg(type->name.data()).arg(i).arg(got[i]).arg(expected[i])));
            ++types;
        }
        QCOMPARE(types, 7);  // Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, IQ4_XS, MXFP4 (E8M0 exponents 0 to 140)
    }

    // Our test quantizers and the reader agree: quantized rows come back within each type's error.
    void quantizedRowsComeBackClose() {
        std::vector<float> row(512);
        for (std::size_t i = 0; i < row.size(); ++i) row[i] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + 0.01f * static_cast<float>(i % 50));
        for (const auto& [type, bound] : {std::pair{kQ8_0, 0.01}, {kQ4_0, 0.15}, {kQ4_K, 0.1}, {kQ5_K, 0.05}, {kQ6_K, 0.03}, {kIQ4_XS, 0.1}}) {
            const QByteArray q = quantize(type, row);
            std::vector<float> back(row.size());
            io::dequantizeBlocks(*io::ggmlType(type)->dtype, reinterpret_cast<const std::byte*>(q.data()), static_cast<std::int64_t>(row.size()), back.data());
            const double error = relativeL2(back.data(), row.data(), row.size());
            qInfo("%s: relative error %.4f", ggmlTypeName(type), error);
            QVERIFY2(error < bound, qPrintable(QString("%1: relative error %2").arg(ggmlTypeName(type)).arg(error)));
        }
    }

    void refusesBadMagic() {
        QByteArray f = smallFile().bytes();
        f[0] = 'X';
        expectError(f, "not a GGUF file");
    }
    void refusesUnknownVersion() {
        for (const std::uint32_t version : {1u, 4u}) {
            GgufWriter w = smallFile();
            w.version = version;
            expectError(w.bytes(), ("GGUF version " + std::to_string(version) + " is not supported").c_str());
        }
    }
    void refusesCountsPastTheEnd() {
        QByteArray f = smallFile().bytes();
        patch(f, 8, GgufWriter::le<std::uint64_t>(1ull << 40));  // tensor count
        expectError(f, "more than the file can hold");
    }
    void refusesStringsPastTheEnd() {
        QByteArray f = smallFile().bytes();
        patch(f, 24, GgufWriter::le<std::uint64_t>(1ull << 33));  // the first key's length
        expectError(f, "runs past the end");
    }
    void refusesArraysPastTheEnd() {
        QByteArray f = smallFile().bytes();
        const qsizetype at = f.indexOf(GgufWriter::str("tokenizer.ggml.tokens")) + 8 + 21 + 4 + 4;  // its length
        patch(f, at, GgufWriter::le<std::uint64_t>(1ull << 50));
        expectError(f, "more than the rest of the file holds");
    }
    void refusesUnknownValueType() {
        QByteArray f = smallFile().bytes();
        patch(f, 24 + 8 + 20, GgufWriter::le<std::uint32_t>(77));  // general.architecture's type
        expectError(f, "unknown value type 77");
    }
    void refusesUnknownTensorType() {
        QByteArray f = smallFile().bytes();
        patch(f, tensorTypeField(f, "second", 2), GgufWriter::le<std::uint32_t>(99));
        expectError(f, "has ggml type 99, which Tandem does not know");
    }
    void refusesTensorDataPastTheEnd() {
        const QByteArray f = smallFile().bytes();
        expectError(f.left(f.size() - 24), "ends past the end of the file");
    }
    void refusesOverlappingTensors() {
        QByteArray f = smallFile().bytes();
        patch(f, tensorTypeField(f, "second", 2) + 4, GgufWriter::le<std::uint64_t>(0));  // second's offset
        expectError(f, "overlap");
    }
    void refusesMisalignedOffsets() {
        QByteArray f = smallFile().bytes();
        patch(f, tensorTypeField(f, "second", 2) + 4, GgufWriter::le<std::uint64_t>(36));
        expectError(f, "is not a multiple of the alignment");
    }
    void refusesDimensionsThatOverflow() {
        GgufWriter w;
        w.tensor("huge", kF32, {1ull << 32, 1ull << 32, 1ull << 8}, floats({1}));
        expectError(w.bytes(), "is too large");
        // The first dimension alone, times the bytes of a value, overflows.
        GgufWriter wide;
        wide.tensor("wide", kF32, {1ull << 62}, floats({1}));
        expectError(wide.bytes(), "is too large");
        GgufWriter zero;
        zero.tensor("empty", kF32, {0}, {});
        expectError(zero.bytes(), "has a dimension of 0");
    }
    void refusesRowsOfPartialBlocks() {
        GgufWriter w;
        w.tensor("odd", kQ8_0, {48}, QByteArray(51, '\0'));
        expectError(w.bytes(), "not a multiple of its block of 32");
        GgufWriter mx;  // gpt-oss's experts: an MXFP4 row of 48 values
        mx.tensor("blk.0.ffn_down_exps.weight", kMXFP4, {48, 2, 2}, QByteArray(4 * 26, '\0'));
        expectError(mx.bytes(), "not a multiple of its block of 32");
    }
    void refusesDuplicates() {
        GgufWriter w = smallFile();
        w.u32("qwen3moe.block_count", 3);
        expectError(w.bytes(), "appears twice");
        GgufWriter t = smallFile();
        t.tensor("first", kF32, {1}, floats({1}));
        expectError(t.bytes(), "appears twice");
    }
    void refusesBadAlignment() {
        GgufWriter w = smallFile();
        w.u32("general.alignment", 24);
        expectError(w.bytes(), "general.alignment must be a power of two");
    }
};

QTEST_GUILESS_MAIN(GgufTest)
#include "tst_gguf.moc"
