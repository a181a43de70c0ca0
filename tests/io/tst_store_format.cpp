// The pieces of the packed store format: its checksum, its manifest and the safetensors writer.
#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <random>

#include "cpu/pool/thread_pool.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io/store_checksum.h"
#include "io/store_manifest.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

std::vector<std::byte> randomBytes(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> v(n);
    for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
    return v;
}

io::StoreManifest sampleManifest() {
    io::StoreManifest m;
    m.converter = "tandem test";
    m.sourcePath = "/models/DeepSeek-V3";
    m.sourceFingerprint = 0xfedcba9876543210ull;
    m.expertType = io::ExpertType::INT4;
    m.hidden = 7168;
    m.inter = 2048;
    m.experts = 256;
    m.expertBytes = 8253440;
    m.moeLayers = {3, 4, 5};
    m.dense = io::StoreFile{"model.safetensors", 123456789, 0x0123456789abcdefull, 64 << 20, 42};
    m.layers = {{3, {"experts-003.bin", 256ull * 8253440, 0xffffffffffffffffull, 8253440, 7}}};
    return m;
}

}  // namespace

class StoreFormatTest : public QObject {
    Q_OBJECT

private slots:
    void checksumSeesEveryByte() {
        auto bytes = randomBytes(1000, 1);
        const auto base = io::hashBytes(bytes);
        QCOMPARE(io::hashBytes(bytes), base);
        for (const std::size_t at : {std::size_t{0}, std::size_t{7}, std::size_t{31}, std::size_t{500}, std::size_t{999}}) {
            bytes[at] ^= std::byte{1};
            QVERIFY(io::hashBytes(bytes) != base);
            bytes[at] ^= std::byte{1};
        }
        // Length counts: trailing zeros are not the same data.
        auto longer = bytes;
        longer.push_back(std::byte{0});
        QVERIFY(io::hashBytes(longer) != base);
        QVERIFY(io::hashBytes(std::span(bytes).first(999)) != base);
        // Swapped words are other data.
        auto swapped = bytes;
        std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 32);
        QVERIFY(io::hashBytes(swapped) != base);
    }

    void piecesOnThreadsMatchOneThread() {
        const auto bytes = randomBytes(1 << 20, 2);
        cpu::ThreadPool pool(3);
        for (const std::size_t piece : {std::size_t{4096}, std::size_t{100000}, std::size_t{1} << 20, std::size_t{3} << 20}) {
            std::vector<std::uint64_t> progress;
            const auto parallel = io::checksumInPieces(bytes, piece, pool.asParallelFor(), [&](std::uint64_t n) { progress.push_back(n); });
            QCOMPARE(parallel, io::checksumInPieces(bytes, piece));
            QCOMPARE(progress.back(), std::uint64_t{bytes.size()});
            QVERIFY(std::is_sorted(progress.begin(), progress.end()));
        }
        // The piece size is part of the checksum, and the order of the pieces too.
        QVERIFY(io::checksumInPieces(bytes, 4096) != io::checksumInPieces(bytes, 8192));
        QVERIFY(io::foldPieceHashes({1, 2}) != io::foldPieceHashes({2, 1}));
        QCOMPARE(io::checksumText(0x00ab00000000cd01ull), std::string("00ab00000000cd01"));
    }

    void manifestRoundTrip() {
        const auto m = sampleManifest();
        const auto back = io::manifestFromJson(io::manifestToJson(m), "test");
        QVERIFY(back.sameConversion(m));
        QCOMPARE(back.converter, m.converter);
        QCOMPARE(back.complete, false);
        QVERIFY(back.dense.has_value());
        QCOMPARE(back.dense->bytes, m.dense->bytes);
        QCOMPARE(back.dense->checksum, m.dense->checksum);
        QCOMPARE(back.dense->headChecksum, std::uint64_t{42});
        QCOMPARE(back.layers.size(), std::size_t{1});
        QCOMPARE(back.findLayer(3)->file.checksum, 0xffffffffffffffffull);
        QCOMPARE(back.findLayer(3)->file.pieceBytes, std::uint64_t{8253440});
        QVERIFY(back.findLayer(4) == nullptr);
        QCOMPARE(io::layerFileName(7), std::string("experts-007.bin"));

        auto other = m;
        other.expertType = io::ExpertType::INT8;
        QVERIFY(!other.sameConversion(m));
        other = m;
        other.sourceFingerprint ^= 1;
        QVERIFY(!other.sameConversion(m));
        // convert --dense: another way of holding the dense weights is another conversion.
        other = m;
        other.denseType = "int8";
        QVERIFY(!other.sameConversion(m));
        QCOMPARE(io::manifestFromJson(io::manifestToJson(other), "test").denseType, std::string("int8"));
        // A manifest from before the field reads as "checkpoint".
        QString old = QString::fromStdString(io::manifestToJson(m));
        QVERIFY(old.contains("\"dense_type\": \"checkpoint\","));
        old.replace("\"dense_type\": \"checkpoint\",", "");
        QCOMPARE(io::manifestFromJson(old.toStdString(), "test").denseType, std::string("checkpoint"));
    }

    void manifestErrors_data() {
        QTest::addColumn<QString>("from");
        QTest::addColumn<QString>("to");
        QTest::addColumn<QString>("message");
        QTest::newRow("not json") << "\"format\"" << "\"format" << "not valid JSON";
        QTest::newRow("other format") << "tandem-packed-store" << "gguf" << "not a Tandem store manifest";
        QTest::newRow("newer version") << "\"format_version\": 1" << "\"format_version\": 9" << "convert the model again";
        QTest::newRow("bad type") << "\"int4\"" << "\"int3\"" << "experts.type";
        QTest::newRow("bad checksum") << "ffffffffffffffff" << "fffffffffffffff" << "16 hex digits";
        QTest::newRow("escaping file name") << "experts-003.bin" << "../x.bin" << "not a file of the store";
        QTest::newRow("missing field") << "\"complete\"" << "\"finished\"" << "complete is missing";
        QTest::newRow("bad dense type") << "\"dense_type\": \"checkpoint\"" << "\"dense_type\": \"int3\"" << "dense_type must be";
    }

    void manifestErrors() {
        QFETCH(QString, from);
        QFETCH(QString, to);
        QFETCH(QString, message);
        const QString json = QString::fromStdString(io::manifestToJson(sampleManifest()));
        QVERIFY(json.contains(from));
        try {
            io::manifestFromJson(QString(json).replace(from, to).toStdString(), "/store/tandem-store.json");
            QFAIL("a broken manifest was accepted");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains(message) && QString(e.what()).contains("/store/tandem-store.json"), e.what());
        }
    }

    void manifestFileIsReplacedAtomically() {
        QTemporaryDir tmp;
        auto m = sampleManifest();
        io::writeManifest(tmp.path().toStdString(), m);
        m.complete = true;
        io::writeManifest(tmp.path().toStdString(), m);
        QVERIFY(io::readManifest(tmp.path().toStdString()).complete);
        QVERIFY(!QFile::exists(tmp.filePath("tandem-store.json.tmp")));
        QVERIFY_THROWS_EXCEPTION(Error, io::readManifest((tmp.path() + "/none").toStdString()));
    }

    // Odd sizes: the file stays contiguous (as the format requires), reopens, and aligns what can be.
    void safetensorsWriterAlignsAndStreams() {
        const auto a = randomBytes(6, 3), b = randomBytes(256, 4), c = randomBytes(4, 5), d = randomBytes(96, 6),
                   e = randomBytes(1 << 16, 7);
        auto source = [](std::string name, io::DType type, std::vector<std::int64_t> shape, std::span<const std::byte> data) {
            io::TensorSource t;
            t.name = std::move(name);
            t.dtype = type;
            t.shape = std::move(shape);
            t.data = data;
            return t;
        };
        std::vector<io::TensorSource> tensors = {
            source("odd.u8", io::DType::U8, {6}, a),       source("aligned.bf16", io::DType::BF16, {2, 64}, b),
            source("scalar.f32", io::DType::F32, {}, c),   source("half.f32", io::DType::F32, {24}, d),
            source("big.bf16", io::DType::BF16, {256, 128}, e), source("empty.f32", io::DType::F32, {0}, {}),
        };
        const auto plan = io::planSafetensors(tensors, {{"format", "pt"}});
        QCOMPARE(plan.tensors.size(), tensors.size());
        QCOMPARE(plan.tensors.front().name, std::string("aligned.bf16"));  // stable within the 64-byte class
        QCOMPARE(plan.tensors.back().name, std::string("odd.u8"));

        QTemporaryDir tmp;
        const std::string path = tmp.filePath("x.safetensors").toStdString();
        std::vector<std::uint64_t> progress;
        const std::uint64_t sum = io::writeSafetensors(plan, path, 4096, [&](std::uint64_t n) { progress.push_back(n); });
        const QByteArray bytes = readFile(QString::fromStdString(path));
        QCOMPARE(static_cast<std::uint64_t>(bytes.size()), plan.fileBytes);
        QCOMPARE(progress.back(), plan.fileBytes);
        QVERIFY(progress.size() > 10);
        QCOMPARE(sum, io::checksumInPieces(std::as_bytes(std::span(bytes.constData(), bytes.size())), 4096));

        const io::SafetensorsFile file(path);
        QCOMPARE(file.metadata().at("format"), std::string("pt"));
        const std::uint64_t dataStart = 8 + plan.header.size();
        QCOMPARE(dataStart % 64, std::uint64_t{0});
        std::uint64_t end = 0;
        for (const auto& t : tensors) {
            const auto& info = file.get(t.name);
            QCOMPARE(info.dtype, t.dtype);
            QCOMPARE(info.shape, t.shape);
            const auto data = file.data(info);
            QVERIFY(data.size() == t.data.size() && std::equal(data.begin(), data.end(), t.data.begin()));
            QCOMPARE((dataStart + info.begin) % io::dtypeSize(t.dtype), std::uint64_t{0});
            if (t.data.size() % 64 == 0) QCOMPARE((dataStart + info.begin) % 64, std::uint64_t{0});
            end = std::max(end, info.end);
        }
        QCOMPARE(dataStart + end, plan.fileBytes);  // no gaps, no trailing bytes
    }
};

QTEST_GUILESS_MAIN(StoreFormatTest)
#include "tst_store_format.moc"
