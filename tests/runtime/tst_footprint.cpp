// The public conversion API (tandem/convert.h): footprints worked out from config.json against what
// converting the fixtures really produces, the parameter counts of the wizard's curated models against
// their published figures, and convertModel's cancel and resume.
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "tandem/convert.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

std::uint64_t sizeOfFiles(const QString& dir, const QString& pattern) {
    std::uint64_t total = 0;
    for (const QFileInfo& f : QDir(dir).entryInfoList({pattern}, QDir::Files)) total += static_cast<std::uint64_t>(f.size());
    return total;
}

double relativeDifference(std::uint64_t estimate, std::uint64_t actual) {
    return std::abs(static_cast<double>(estimate) - static_cast<double>(actual)) / static_cast<double>(actual);
}

QJsonObject curatedModel(const QString& name) {
    QFile file(QStringLiteral(TANDEM_CURATED_MODELS));
    if (!file.open(QIODevice::ReadOnly)) return {};
    for (const auto& m : QJsonDocument::fromJson(file.readAll()).object()["models"].toArray())
        if (m.toObject()["name"].toString() == name) return m.toObject();
    return {};
}

Footprint curatedFootprint(const QString& name, ExpertPrecision experts = ExpertPrecision::INT4, int context = 4096) {
    const QJsonObject model = curatedModel(name);
    return estimateFootprintFromJson(QJsonDocument(model["config"].toObject()).toJson().toStdString(), experts, context,
                                     name.toStdString());
}

}  // namespace

class TestFootprint : public QObject {
    Q_OBJECT

private slots:
    void estimatesMatchTheConvertedFixtures_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<int>("experts");
        for (const QString& name : fixtureNames())
            for (const auto& [label, p] : {std::pair{"bf16", ExpertPrecision::BF16}, std::pair{"int8", ExpertPrecision::INT8},
                                          std::pair{"int4", ExpertPrecision::INT4}})
                QTest::addRow("%s %s", qPrintable(name), label) << name << static_cast<int>(p);
    }

    void estimatesMatchTheConvertedFixtures() {
        QFETCH(QString, fixture);
        QFETCH(int, experts);
        const auto precision = static_cast<ExpertPrecision>(experts);
        const QString source = fixturePath(fixture);
        QTemporaryDir dir;
        const QString store = dir.filePath("store");
        const ConvertOutcome outcome = convertModel({source.toStdString(), store.toStdString(), precision, 2});
        QVERIFY(!outcome.cancelled);

        const Footprint f = estimateFootprint(source.toStdString(), precision);
        // The expert files are sized by the packed layout itself: exact.
        QCOMPARE(f.routedExpertBytes, sizeOfFiles(store, "experts-*.bin"));
        // The rest counts tensors from the config; headers are estimated and the FP8 fixture keeps one
        // projection in bf16 that the real DeepSeek-V3 stores as FP8.
        const std::uint64_t storeBytes = sizeOfFiles(store, "experts-*.bin") + sizeOfFiles(store, "model.safetensors");
        QVERIFY2(relativeDifference(f.storeBytes, storeBytes) < 0.02,
                 qPrintable(QString("store: estimated %1, converted %2").arg(f.storeBytes).arg(storeBytes)));
        const std::uint64_t shards = sizeOfFiles(source, "*.safetensors") - sizeOfFiles(source, "golden.safetensors");
        QVERIFY2(relativeDifference(f.downloadBytes, shards) < 0.02,
                 qPrintable(QString("download: estimated %1, published %2").arg(f.downloadBytes).arg(shards)));
        QCOMPARE(f.ramBytes, f.routedExpertBytes + f.kvCacheBytes);
        QCOMPARE(f.vramBytes, f.denseBytes + f.kvCacheBytes);
        QVERIFY(f.activeParameters < f.totalParameters);
    }

    void theKvCacheGrowsWithTheContextUpToTheModelsLimit() {
        const QString config = fixturePath("tiny-qwen3moe") + "/config.json";
        // 3 layers x (keys + values of 2 heads x 32) float32 per position.
        const Footprint short_ = estimateFootprint(config.toStdString(), ExpertPrecision::BF16, 1000);
        QCOMPARE(short_.kvCacheBytes, std::uint64_t{3} * 2 * 2 * 32 * 4 * 1000);
        QCOMPARE(short_.contextLength, 1000);
        const Footprint capped = estimateFootprint(config.toStdString(), ExpertPrecision::BF16, 1 << 20);
        QCOMPARE(capped.contextLength, 40960);  // max_position_embeddings
        // MLA caches the latent and the rotary key: 32 + 16 per position and layer.
        const Footprint mla = estimateFootprint(fixturePath("tiny-deepseekv2").toStdString(), ExpertPrecision::BF16, 100);
        QCOMPARE(mla.kvCacheBytes, std::uint64_t{3} * (32 + 16) * 4 * 100);
    }

    // The int8 cache (KvCacheType::Int8): a byte a value and a float32 scale per key head (GQA) or per
    // stream (MLA's latent and rotary key); withInt8KvCache puts it in the RAM figure and, with one layer's
    // float32 rows, in the GPU's.
    void anInt8KvCacheTakesAByteAValueAndItsScales() {
        const QString config = fixturePath("tiny-qwen3moe") + "/config.json";
        const Footprint f = estimateFootprint(config.toStdString(), ExpertPrecision::BF16, 1000);
        // 3 layers x (keys + values: 2 heads x 32 codes and 2 scales).
        QCOMPARE(f.kvCacheInt8Bytes, std::uint64_t{3} * 2 * (2 * 32 + 2 * 4) * 1000);
        const Footprint g = withInt8KvCache(f);
        QCOMPARE(g.kvCacheBytes, f.kvCacheInt8Bytes);
        QCOMPARE(g.ramBytes, f.routedExpertBytes + f.kvCacheInt8Bytes);
        QCOMPARE(f.kvCacheLayerBytes, f.kvCacheBytes / 3);
        QCOMPARE(g.vramBytes, f.denseBytes + f.kvCacheInt8Bytes + f.kvCacheBytes / 3);
        const Footprint mla = estimateFootprint(fixturePath("tiny-deepseekv2").toStdString(), ExpertPrecision::BF16, 100);
        QCOMPARE(mla.kvCacheInt8Bytes, std::uint64_t{3} * (32 + 16 + 2 * 4) * 100);
        // Qwen3-30B-A3B at 32K: 6.4 GB in float32, about a quarter in int8.
        const Footprint qwen = curatedFootprint("Qwen3-30B-A3B", ExpertPrecision::INT4, 32768);
        QCOMPARE(qwen.kvCacheBytes, std::uint64_t{48} * 2 * 512 * 4 * 32768);
        QCOMPARE(qwen.kvCacheInt8Bytes, std::uint64_t{48} * 2 * (512 + 4 * 4) * 32768);
    }

    void theCuratedModelsHaveTheirPublishedSizes_data() {
        QTest::addColumn<QString>("name");
        QTest::addColumn<double>("totalBillions");
        QTest::addColumn<double>("activeBillions");
        // The figures on the model cards.
        QTest::newRow("DeepSeek-V3") << "DeepSeek-V3" << 671.0 << 37.0;
        QTest::newRow("DeepSeek-R1") << "DeepSeek-R1" << 671.0 << 37.0;
        QTest::newRow("Kimi-K2") << "Kimi-K2" << 1040.0 << 32.0;
        QTest::newRow("Kimi-K2-Thinking") << "Kimi-K2-Thinking" << 1040.0 << 32.0;
        QTest::newRow("Qwen3-235B-A22B") << "Qwen3-235B-A22B" << 235.0 << 22.0;
        QTest::newRow("Qwen3-30B-A3B") << "Qwen3-30B-A3B" << 30.5 << 3.3;
        // DeepSeek-V2's card counts 2.4 B active without the 0.2 B embedding table; the others include it.
        QTest::newRow("DeepSeek-V2-Lite") << "DeepSeek-V2-Lite" << 15.7 << 2.6;
        QTest::newRow("Mixtral-8x7B") << "Mixtral-8x7B" << 46.7 << 12.9;
        // GLM-4.5-Air's card counts 12 B active without its 1.2 B embedding and output head.
        QTest::newRow("GLM-4.5-Air") << "GLM-4.5-Air" << 106.0 << 13.2;
        QTest::newRow("GLM-4.5") << "GLM-4.5" << 355.0 << 32.0;
        QTest::newRow("GLM-4.6") << "GLM-4.6" << 355.0 << 32.0;
        // gpt-oss's card counts 5.13 B / 3.61 B active without its 0.58 B embedding table.
        QTest::newRow("gpt-oss-120b") << "gpt-oss-120b" << 116.8 << 5.13 + 0.58;
        QTest::newRow("gpt-oss-20b") << "gpt-oss-20b" << 20.9 << 3.61 + 0.58;
    }

    void theCuratedModelsHaveTheirPublishedSizes() {
        QFETCH(QString, name);
        QFETCH(double, totalBillions);
        QFETCH(double, activeBillions);
        QVERIFY2(!curatedModel(name).isEmpty(), qPrintable(name + " is missing from " TANDEM_CURATED_MODELS));
        const Footprint f = curatedFootprint(name);
        const double total = static_cast<double>(f.totalParameters) / 1e9;
        const double active = static_cast<double>(f.activeParameters) / 1e9;
        QVERIFY2(std::abs(total - totalBillions) / totalBillions < 0.02, qPrintable(QString("total %1 B").arg(total)));
        QVERIFY2(std::abs(active - activeBillions) / activeBillions < 0.06, qPrintable(QString("active %1 B").arg(active)));
    }

    // Kimi-K2-Thinking ships its routed experts as compressed-tensors int4 (a nibble a weight, a bf16 scale per
    // 32 and a shape per matrix) and everything else in bf16: the release's 594 GB. Packed as INT4 (576 bytes
    // per 16 x 64 weights) they take their size in the checkpoint, less the shapes.
    void anInt4ReleaseIsCountedAsPublished() {
        const Footprint f = curatedFootprint("Kimi-K2-Thinking");
        const double download = static_cast<double>(f.downloadBytes) / 1e9;
        QVERIFY2(std::abs(download - 594.0) / 594.0 < 0.01, qPrintable(QString("download %1 GB").arg(download)));
        const double experts = 60.0 * 384 * 3 * 7168 * 2048 * (0.5 + 2.0 / 32);
        QVERIFY2(std::abs(static_cast<double>(f.routedExpertBytes) - experts) / experts < 1e-6,
                 qPrintable(QString("int4 experts %1 GB").arg(static_cast<double>(f.routedExpertBytes) / 1e9)));
        // The FP8 Kimi-K2 of the same shape downloads a byte a weight.
        QVERIFY(curatedFootprint("Kimi-K2").downloadBytes > f.downloadBytes + (400ull << 30));
    }

    // With int8 dense weights the projections and the output head take a byte per weight (and a float32
    // scale per row); the embedding, norms and routers stay bf16. Qwen3-30B-A3B: the embedding and the
    // head are 151936 x 2048 each, the attention 48 x 18.9 M weights.
    void int8DenseHalvesTheProjections() {
        const Footprint f = curatedFootprint("Qwen3-30B-A3B");
        const double bf16 = static_cast<double>(f.denseBytes) / 1e9, int8 = static_cast<double>(f.denseInt8Bytes) / 1e9;
        QVERIFY2(bf16 > 3.0 && bf16 < 3.15, qPrintable(QString("bf16 dense %1 GB").arg(bf16)));
        QVERIFY2(int8 > 1.82 && int8 < 1.9, qPrintable(QString("int8 dense %1 GB").arg(int8)));
        const Footprint g = withInt8Dense(f);
        QCOMPARE(g.denseBytes, f.denseInt8Bytes);
        QCOMPARE(g.vramBytes, g.denseBytes + g.kvCacheBytes);
        QCOMPARE(g.ramBytes, f.ramBytes);
        // The store too, when the wizard converts with int8 dense weights (StoreDense::Int8).
        QCOMPARE(g.storeBytes, f.storeBytes - f.storeDenseBytes + f.denseInt8Bytes);
        QVERIFY(g.storeBytes < f.storeBytes);
        // The fit then has more room for experts.
        QVERIFY(estimateExpertFit(g, 16'000'000'000ull).layersOnGpu >= estimateExpertFit(f, 16'000'000'000ull).layersOnGpu);
    }

    // The wizard's fit check (estimateExpertFit): the engine's placement rule for a GPU of a given size.
    void theFitPlacesWholeLayersByTheGpusMemory() {
        const Footprint qwen = curatedFootprint("Qwen3-30B-A3B", ExpertPrecision::INT4);
        QCOMPARE(qwen.moeLayers, 48);
        QCOMPARE(qwen.expertsPerLayer, 128);
        QCOMPARE(qwen.expertsPerToken, 8);
        // An H200: every layer; nothing read from RAM per token.
        const ExpertFit big = estimateExpertFit(qwen, 141'000'000'000ull);
        QCOMPARE(big.layersOnGpu, 48);
        QVERIFY(!big.promptsStream);
        QCOMPARE(big.ramBytesPerToken, std::uint64_t{0});
        // 16 GB: about half the layers, the others streamed for prompts and read from RAM in decode (8 of
        // 128 experts of each, ~21 MB a layer).
        const ExpertFit mid = estimateExpertFit(qwen, 16'000'000'000ull);
        QVERIFY2(mid.layersOnGpu > 15 && mid.layersOnGpu < 30, qPrintable(QString::number(mid.layersOnGpu)));
        QVERIFY(mid.promptsStream);
        const std::uint64_t perLayer = qwen.routedExpertBytes / 48 / 128 * 8;
        // The budget beyond whole layers holds single experts of the next one: less than a layer more.
        QVERIFY(mid.ramBytesPerToken <= perLayer * static_cast<std::uint64_t>(48 - mid.layersOnGpu));
        QVERIFY(mid.ramBytesPerToken > perLayer * static_cast<std::uint64_t>(47 - mid.layersOnGpu));
        // No GPU: every token reads the dense part and the chosen experts from RAM.
        const ExpertFit none = estimateExpertFit(qwen, 0);
        QCOMPARE(none.layersOnGpu, 0);
        QCOMPARE(none.ramBytesPerToken, qwen.denseBytes + perLayer * 48);
        // DeepSeek-V3's dense part (~34 GB) does not leave a 24 GB GPU room for any expert.
        const ExpertFit v3 = estimateExpertFit(curatedFootprint("DeepSeek-V3", ExpertPrecision::INT4), 24'000'000'000ull);
        QCOMPARE(v3.layersOnGpu, 0);
        QVERIFY(!v3.promptsStream);
    }

    void deepSeekV3NeedsWhatItsReleaseSays() {
        const Footprint int4 = curatedFootprint("DeepSeek-V3", ExpertPrecision::INT4);
        const Footprint bf16 = curatedFootprint("DeepSeek-V3", ExpertPrecision::BF16);
        // The FP8 release with its MTP layer: 163 shards, 688.6 GB.
        QVERIFY2(std::abs(static_cast<double>(int4.downloadBytes) / 1e9 - 688.6) < 688.6 * 0.02,
                 qPrintable(QString::number(int4.downloadBytes)));
        // 58 MoE layers x 256 experts x 44 M weights: 4.5 bits each in int4, 16 in bf16.
        QVERIFY(int4.routedExpertBytes > 360'000'000'000ull && int4.routedExpertBytes < 380'000'000'000ull);
        QVERIFY(bf16.routedExpertBytes > 1'300'000'000'000ull && bf16.routedExpertBytes < 1'340'000'000'000ull);
        // What is not a routed expert, in bf16: ~17 G weights.
        QVERIFY(int4.denseBytes > 30'000'000'000ull && int4.denseBytes < 40'000'000'000ull);
        QCOMPARE(int4.denseBytes, bf16.denseBytes);
    }

    void aBadConfigIsAClearError() {
        QTemporaryDir dir;
        QVERIFY_THROWS_EXCEPTION(Error, estimateFootprint(dir.path().toStdString(), ExpertPrecision::INT4));
        try {
            estimateFootprintFromJson(R"({"model_type": "llama"})", ExpertPrecision::INT4);
            QFAIL("an unsupported model was accepted");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("not supported"), e.what());
        }
        QVERIFY_THROWS_EXCEPTION(Error, estimateFootprint(fixturePath("tiny-qwen3moe").toStdString(), ExpertPrecision::Reference));
    }

    void aCancelledConversionResumesWhereItStopped() {
        QTemporaryDir dir;
        const QString out = dir.filePath("store");
        const auto source = fixturePath("tiny-qwen3moe").toStdString();
        int calls = 0;
        ConvertOutcome first = convertModel({source, out.toStdString(), ExpertPrecision::INT4, 2}, [&](const ConvertProgress& p) {
            ++calls;
            return p.layer < 1;  // stop once the first MoE layer is done
        });
        QVERIFY(first.cancelled);
        QVERIFY(calls > 0);
        QVERIFY(!QFileInfo::exists(out));
        QVERIFY(QFileInfo::exists(out + ".partial/tandem-store.json"));

        ConvertProgress last;
        const ConvertOutcome second = convertModel({source, out.toStdString(), ExpertPrecision::INT4, 2}, [&](const ConvertProgress& p) {
            last = p;
            return true;
        });
        QVERIFY(!second.cancelled);
        QCOMPARE(second.resumedLayers, 1);
        QCOMPARE(second.packedLayers, 2);
        QCOMPARE(last.layer, last.layers);
        QVERIFY(QFileInfo::exists(out + "/tandem-store.json"));
        QVERIFY(!QFileInfo::exists(out + ".partial"));

        const ConvertOutcome third = convertModel({source, out.toStdString(), ExpertPrecision::INT4, 2});
        QVERIFY(third.upToDate);
    }

    void onlyPackedTypesConvert() {
        QTemporaryDir dir;
        QVERIFY_THROWS_EXCEPTION(Error, convertModel({fixturePath("tiny-qwen3moe").toStdString(),
                                                      dir.filePath("store").toStdString(), ExpertPrecision::Reference}));
    }
};

QTEST_GUILESS_MAIN(TestFootprint)
#include "tst_footprint.moc"
