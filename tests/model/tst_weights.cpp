// Weight loading: every tensor found and checked against config.json, with clear errors otherwise.
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

// Rewrites one shard of a copied fixture with `edit` applied to its header. Data offsets stay valid
// because only names, dtypes (of equal size) or shapes (of equal byte count) change.
void editShard(const QString& path, const std::function<void(QJsonObject&)>& edit) {
    QByteArray bytes = readFile(path);
    quint64 n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<quint8>(bytes[i]);
    QJsonObject header = QJsonDocument::fromJson(bytes.mid(8, static_cast<qsizetype>(n))).object();
    edit(header);
    QByteArray json = QJsonDocument(header).toJson(QJsonDocument::Compact);
    while (json.size() % 8) json += ' ';
    QByteArray out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<quint64>(json.size()) >> (8 * i)) & 0xff);
    QVERIFY(writeFile(path, out + json + bytes.mid(8 + static_cast<qsizetype>(n))));
}

// Keeps the index consistent with an edited shard: entries of tensors the shard no longer has are
// dropped. A shard the reader rejects is left for the load under test to report.
void dropFromIndexUnlessIn(const QString& dir, const QString& shard) {
    std::unique_ptr<io::SafetensorsFile> opened;
    try {
        opened = std::make_unique<io::SafetensorsFile>(shard.toStdString());
    } catch (const Error&) {
        return;
    }
    const io::SafetensorsFile& file = *opened;
    const QString indexPath = dir + "/model.safetensors.index.json";
    QJsonObject index = QJsonDocument::fromJson(readFile(indexPath)).object();
    QJsonObject map = index["weight_map"].toObject();
    const QString shardName = QFileInfo(shard).fileName();
    for (const QString& key : map.keys())
        if (map[key].toString() == shardName && !file.find(key.toStdString())) map.remove(key);
    index["weight_map"] = map;
    QVERIFY(writeFile(indexPath, QJsonDocument(index).toJson()));
}

// The shard of a copied fixture that holds `tensor`.
QString shardOf(const QString& dir, const QString& tensor) {
    const auto index = QJsonDocument::fromJson(readFile(dir + "/model.safetensors.index.json")).object();
    return dir + "/" + index["weight_map"].toObject()[tensor].toString();
}

}  // namespace

class WeightsTest : public QObject {
    Q_OBJECT

    // Loads a fixture copy after `edit` and expects an Error containing every fragment.
    static void expectLoadError(const QString& fixture, const QString& tensor,
                                const std::function<void(QJsonObject&)>& edit, const QStringList& fragments) {
        QTemporaryDir tmp;
        QVERIFY(copyFixture(fixture, tmp.path()));
        const QString shard = shardOf(tmp.path(), tensor);
        editShard(shard, edit);
        dropFromIndexUnlessIn(tmp.path(), shard);
        try {
            const auto config = model::loadModelConfig(tmp.path().toStdString());
            const io::Checkpoint ckpt(tmp.path().toStdString());
            model::loadWeights(ckpt, config);
            QFAIL("loaded broken weights without an error");
        } catch (const Error& e) {
            for (const auto& f : fragments) QVERIFY2(QString(e.what()).contains(f), e.what());
        }
    }

private slots:
    void loadsEveryFixture_data() {
        QTest::addColumn<QString>("fixture");
        for (const auto& f : fixtureNames()) QTest::newRow(qPrintable(f)) << f;
    }
    void loadsEveryFixture() {
        QFETCH(QString, fixture);
        const auto config = model::loadModelConfig(fixturePath(fixture).toStdString());
        const io::Checkpoint ckpt(fixturePath(fixture).toStdString());
        const auto w = model::loadWeights(ckpt, config);
        QCOMPARE(static_cast<int>(w.layers.size()), config.numLayers);
        for (int l = 0; l < config.numLayers; ++l) {
            const auto& layer = w.layers[static_cast<std::size_t>(l)];
            QCOMPARE(layer.moe.has_value(), config.isMoeLayer(l));
            QCOMPARE(layer.dense.has_value(), !config.isMoeLayer(l));
            if (layer.moe) QCOMPARE(static_cast<int>(layer.moe->experts.size()), config.numExperts);
        }
        // The weights point into the mapped files: nothing large was copied.
        QVERIFY(w.embed.data != nullptr);
    }

    void fp8RowsAreScaledPerBlock() {
        const QString dir = fixturePath("tiny-deepseekv3-fp8");
        const auto config = model::loadModelConfig(dir.toStdString());
        const io::Checkpoint ckpt(dir.toStdString());
        const auto w = model::loadWeights(ckpt, config);
        // kv_b_proj is [256, 32]: two row blocks, one partial column block.
        const auto& kvB = w.layers[0].mla.kvB;
        QCOMPARE(kvB.dtype, io::DType::F8_E4M3);
        QCOMPARE(kvB.scaleCols, std::int64_t(1));
        const auto raw = ckpt.get("model.layers.0.self_attn.kv_b_proj.weight");
        const auto scales = ckpt.get("model.layers.0.self_attn.kv_b_proj.weight_scale_inv");
        float scale[2];
        std::memcpy(scale, scales.data.data(), sizeof scale);
        std::vector<float> row(32);
        for (const int r : {0, 127, 128, 255}) {
            kvB.dequantRow(r, row.data());
            for (int c = 0; c < 32; c += 7) {
                const float expected = io::f8e4m3ToFloat(static_cast<std::uint8_t>(raw.data[static_cast<std::size_t>(r * 32 + c)])) * scale[r / 128];
                QCOMPARE(row[static_cast<std::size_t>(c)], expected);
            }
        }
    }

    void missingTensor() {
        const QString name = "model.layers.1.mlp.experts.3.up_proj.weight";
        expectLoadError("tiny-qwen3moe", name, [&](QJsonObject& h) {
            const QJsonValue entry = h.take(name);
            h["model.layers.1.mlp.experts.3.up_proj.renamed"] = entry;
        }, {name, "the checkpoint has no tensor"});
    }

    void wrongShape() {
        const QString name = "model.layers.0.self_attn.q_proj.weight";
        expectLoadError("tiny-mixtral", name, [&](QJsonObject& h) {
            auto t = h[name].toObject();
            t["shape"] = QJsonArray{64, 256};
            h[name] = t;
        }, {name, "has shape [64, 256], expected [128, 128]"});
    }

    void wrongDtype() {
        const QString name = "model.layers.0.input_layernorm.weight";
        expectLoadError("tiny-qwen3moe", name, [&](QJsonObject& h) {
            auto t = h[name].toObject();
            t["dtype"] = "I16";  // unknown to us: rejected already by the reader
            h[name] = t;
        }, {name, "unsupported dtype"});
        expectLoadError("tiny-qwen3moe", name, [&](QJsonObject& h) {
            auto t = h[name].toObject();
            t["dtype"] = "I32";
            t["shape"] = QJsonArray{64};
            h[name] = t;
        }, {name, "has type I32"});
        const QString matrix = "model.layers.0.self_attn.k_proj.weight";
        expectLoadError("tiny-qwen3moe", matrix, [&](QJsonObject& h) {
            auto t = h[matrix].toObject();
            t["dtype"] = "I32";  // I8 is a matrix type now (convert --dense int8, with row scales)
            t["shape"] = QJsonArray{64, 64};
            h[matrix] = t;
        }, {matrix, "has type I32"});
    }

    void fp8WithoutScale() {
        const QString scale = "model.layers.1.mlp.experts.0.gate_proj.weight_scale_inv";
        expectLoadError("tiny-deepseekv3-fp8", scale, [&](QJsonObject& h) {
            const QJsonValue entry = h.take(scale);
            h["unused.scale"] = entry;
        }, {"model.layers.1.mlp.experts.0.gate_proj.weight", "has no", "weight_scale_inv"});
    }
};

QTEST_GUILESS_MAIN(WeightsTest)
#include "tst_weights.moc"
