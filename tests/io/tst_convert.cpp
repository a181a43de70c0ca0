// `convert` on every fixture and expert type: the packed store loads, its experts are the packed source
// experts, model.safetensors is the source minus routed experts and MTP layers, byte for byte.
#include <QFile>
#include <QRegularExpression>
#include <QDir>
#include <QTemporaryDir>
#include <QTest>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "cpu/expert_pack.h"
#include "cpu/int4_repack.h"
#include "io/checkpoint.h"
#include "io/packed_store.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "convert/convert_model.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

struct Source {
    model::ModelConfig config;
    std::unique_ptr<io::Checkpoint> checkpoint;
    model::ModelWeights weights;

    explicit Source(const QString& fixture) {
        const std::string dir = fixturePath(fixture).toStdString();
        config = model::loadModelConfig(dir);
        checkpoint = std::make_unique<io::Checkpoint>(dir);
        weights = model::loadWeights(*checkpoint, config);
    }
};

// Which source tensors a store must leave out: routed experts and layers past num_hidden_layers.
bool leftOut(const QString& name, int layers) {
    // Per-expert tensors, and gpt-oss's fused MXFP4 experts (their biases stay).
    static const QRegularExpression expert(
        R"(^model\.layers\.\d+\.(mlp|block_sparse_moe)\.experts\.(\d+\.|(gate_up|down)_proj_(blocks|scales)$))");
    static const QRegularExpression layer(R"(^model\.layers\.(\d+)\.)");
    const auto m = layer.match(name);
    return expert.match(name).hasMatch() || (m.hasMatch() && m.captured(1).toInt() >= layers);
}

std::uint64_t headerEnd(const QString& safetensors) {
    const QByteArray head = readFile(safetensors).left(8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(head[i]);
    return 8 + n;
}

double rowError(const float* a, const float* b, int n) { return relativeL2(a, b, static_cast<std::size_t>(n)); }

}  // namespace

class ConvertTest : public QObject {
    Q_OBJECT

private slots:
    void everyFixtureAndType_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("type");
        for (const QString& f : fixtureNames())
            for (const char* t : {"bf16", "int8", "int4"}) QTest::newRow(qPrintable(f + "/" + t)) << f << QString(t);
    }

    void everyFixtureAndType() {
        QFETCH(QString, fixture);
        QFETCH(QString, type);
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        convert::ConvertOptions o;
        o.model = fixturePath(fixture).toStdString();
        o.out = out.toStdString();
        o.experts = *io::parseExpertType(type.toStdString());
        o.threads = 2;
        int reports = 0;
        const auto result = convert::convertModel(o, [&](const convert::ConvertProgress& p) {
            ++reports;
            QVERIFY(p.bytesWritten <= p.bytesTotal);
        });
        const Source source(fixture);
        std::vector<int> moeLayers;
        for (int l = 0; l < source.config.numLayers; ++l)
            if (source.config.isMoeLayer(l)) moeLayers.push_back(l);
        QCOMPARE(result.packedLayers, static_cast<int>(moeLayers.size()));
        QCOMPARE(result.resumedLayers, 0);
        QVERIFY(reports > static_cast<int>(moeLayers.size()));
        QVERIFY(!QFile::exists(out + ".partial"));

        const io::PackedStore store(out.toStdString());
        QCOMPARE(store.expertType(), o.experts);
        QCOMPARE(store.experts(), source.config.numExperts);
        QCOMPARE(store.layout().hidden, source.config.hiddenSize);
        QCOMPARE(store.layout().inter, source.config.moeIntermediateSize);
        QCOMPARE(store.moeLayers(), moeLayers);
        QVERIFY(store.manifest().complete);
        QCOMPARE(QString::fromStdString(store.manifest().sourcePath), fixturePath(fixture));
        for (int l = 0; l < source.config.numLayers; ++l) QCOMPARE(store.hasLayer(l), source.config.isMoeLayer(l));
        QVERIFY(!store.hasLayer(source.config.numLayers));
        QVERIFY_THROWS_EXCEPTION(Error, store.layerExperts(source.config.numLayers));
        QVERIFY(store.verify());

        const auto& layout = store.layout();
        auto* packed = static_cast<std::byte*>(std::aligned_alloc(4096, layout.expertBytes));
        std::unique_ptr<std::byte, decltype(&std::free)> own(packed, &std::free);
        std::vector<float> stored(static_cast<std::size_t>(layout.hidden + layout.inter));
        std::vector<float> original(stored.size());
        const double tolerance = type == "bf16" ? 1e-2 : type == "int8" ? 2e-2 : 0.2;
        for (const int layer : moeLayers) {
            const std::byte* experts = store.layerExperts(layer);
            QCOMPARE(reinterpret_cast<std::uintptr_t>(experts) % 4096, std::uintptr_t{0});
            for (const int e : {0, store.experts() / 2, store.experts() - 1}) {
                const auto& w = source.weights.layers[static_cast<std::size_t>(layer)].moe->experts[static_cast<std::size_t>(e)];
                const std::byte* mine = experts + static_cast<std::size_t>(e) * layout.expertBytes;
                cpu::packCheckpointExpert(layout, w.gate, w.up, w.down, packed);  // as the converter packs
                QVERIFY2(std::memcmp(packed, mine, layout.expertBytes) == 0, qPrintable(QString("layer %1 expert %2").arg(layer).arg(e)));
                for (const int row : {0, layout.inter - 1}) {
                    cpu::unpackExpertRow(layout, mine, cpu::ExpertMatrix::Gate, row, stored.data());
                    w.gate.dequantRow(row, original.data());
                    QVERIFY(rowError(stored.data(), original.data(), layout.hidden) < tolerance);
                    cpu::unpackExpertRow(layout, mine, cpu::ExpertMatrix::Up, row, stored.data());
                    w.up.dequantRow(row, original.data());
                    QVERIFY(rowError(stored.data(), original.data(), layout.hidden) < tolerance);
                }
                for (const int row : {0, layout.hidden - 1}) {
                    cpu::unpackExpertRow(layout, mine, cpu::ExpertMatrix::Down, row, stored.data());
                    w.down.dequantRow(row, original.data());
                    QVERIFY(rowError(stored.data(), original.data(), layout.inter) < tolerance);
                }
            }
        }

        // model.safetensors: every kept tensor byte for byte, nothing else, in a single-file checkpoint.
        QVERIFY(!QFile::exists(out + "/model.safetensors.index.json"));
        const io::Checkpoint dense(out.toStdString());
        int kept = 0;
        for (const auto& name : source.checkpoint->tensorNames()) {
            const QString qname = QString::fromStdString(name);
            if (leftOut(qname, source.config.numLayers)) {
                QVERIFY2(!dense.has(name), name.c_str());
                continue;
            }
            ++kept;
            QVERIFY2(dense.has(name), name.c_str());
            const auto a = source.checkpoint->get(name);
            const auto b = dense.get(name);
            QCOMPARE(b.info->dtype, a.info->dtype);
            QCOMPARE(b.info->shape, a.info->shape);
            QVERIFY2(b.data.size() == a.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size()) == 0, name.c_str());
        }
        QCOMPARE(static_cast<int>(dense.tensorNames().size()), kept);
        QVERIFY(kept > 10);
        if (fixture.contains("fp8")) {
            QVERIFY(dense.has("model.layers.1.mlp.shared_experts.gate_proj.weight_scale_inv"));
            QCOMPARE(dense.get("model.layers.0.mlp.gate_proj.weight").info->dtype, io::DType::F8_E4M3);
        }
        // Aligned data: the data section and every tensor whose size is a multiple of 64 bytes.
        const std::uint64_t dataStart = headerEnd(out + "/model.safetensors");
        QCOMPARE(dataStart % 64, std::uint64_t{0});
        for (const auto& name : dense.tensorNames()) {
            const auto t = dense.get(name);
            if (t.data.size() % 64 == 0) QVERIFY2((dataStart + t.info->begin) % 64 == 0, name.c_str());
            QCOMPARE((dataStart + t.info->begin) % io::dtypeSize(t.info->dtype), std::uint64_t{0});
        }

        for (const char* file : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
            QCOMPARE(readFile(out + "/" + file), readFile(fixturePath(fixture) + "/" + file));
        // The engine's config reader takes the store folder as it would the source.
        QCOMPARE(model::loadModelConfig(out.toStdString()).numExperts, source.config.numExperts);
    }

    // Kimi-K2's tokenizer is a tiktoken.model beside tokenizer_config.json: the store keeps it.
    void tiktokenVocabularyIsCopied() {
        QTemporaryDir tmp;
        const QString model = tmp.filePath("kimi");
        QVERIFY(QDir().mkpath(model) && copyFixture("tiny-deepseekv3-fp8", model));
        QVERIFY(QFile::copy(fixturesDir() + "/tiktoken-kimi/tiktoken.model", model + "/tiktoken.model"));
        const QString out = tmp.filePath("store");
        convert::convertModel({model.toStdString(), out.toStdString(), io::ExpertType::INT4, 2}, {});
        QCOMPARE(readFile(out + "/tiktoken.model"), readFile(model + "/tiktoken.model"));
    }

    // Damage after conversion: opening catches size and first-page changes, verify every byte.
    void damagedStore() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        convert::convertModel({fixturePath("tiny-qwen3moe").toStdString(), out.toStdString(), io::ExpertType::INT4, 2}, {});
        const QString layer = out + "/experts-001.bin";
        QVERIFY(io::PackedStore(out.toStdString()).verify());

        QByteArray bytes = readFile(layer);
        bytes[bytes.size() - 100] = static_cast<char>(bytes[bytes.size() - 100] ^ 1);
        QVERIFY(writeFile(layer, bytes));
        {
            const io::PackedStore store(out.toStdString());  // one flipped bit past the first page: opens
            std::vector<double> fractions;
            const auto damage = store.findDamage([&](double f) { fractions.push_back(f); });
            QCOMPARE(damage.size(), std::size_t{1});
            QVERIFY2(QString::fromStdString(damage[0]).contains("experts-001.bin"), damage[0].c_str());
            QVERIFY(!fractions.empty());
            QCOMPARE(fractions.back(), 1.0);
        }
        bytes[10] = static_cast<char>(bytes[10] ^ 1);
        QVERIFY(writeFile(layer, bytes));
        try {
            io::PackedStore store(out.toStdString());
            QFAIL("opened a store whose expert file starts with other bytes");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("experts-001.bin") && QString(e.what()).contains("first page"), e.what());
        }
        QVERIFY(writeFile(layer, bytes.left(bytes.size() - 4096)));
        try {
            io::PackedStore store(out.toStdString());
            QFAIL("opened a store with a truncated expert file");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("experts-001.bin") && QString(e.what()).contains("truncated"), e.what());
        }
        QVERIFY(QFile::remove(layer));
        try {
            io::PackedStore store(out.toStdString());
            QFAIL("opened a store with a missing expert file");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("experts-001.bin") && QString(e.what()).contains("missing"), e.what());
        }
        QVERIFY(!io::PackedStore::isStore(tmp.path().toStdString()));
        QVERIFY_THROWS_EXCEPTION(Error, io::PackedStore(tmp.path().toStdString()));
    }
};

QTEST_GUILESS_MAIN(ConvertTest)
#include "tst_convert.moc"
