// Checkpoint folders: sharded with an index, single-file, and the errors of broken folders.
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "io/checkpoint.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

class CheckpointTest : public QObject {
    Q_OBJECT

    static void expectError(const QString& dir, const QStringList& fragments) {
        try {
            io::Checkpoint c(dir.toStdString());
            QFAIL("opened a broken checkpoint without an error");
        } catch (const Error& e) {
            for (const auto& f : fragments) QVERIFY2(QString(e.what()).contains(f), e.what());
        }
    }

private slots:
    void shardedFixture() {
        const io::Checkpoint c(fixturePath("tiny-deepseekv3-fp8").toStdString());
        QVERIFY(c.has("model.embed_tokens.weight"));
        QVERIFY(c.has("model.layers.3.eh_proj.weight"));  // the MTP layer is there, just unused
        const auto t = c.get("model.layers.1.mlp.experts.7.gate_proj.weight");
        QCOMPARE(t.info->dtype, io::DType::F8_E4M3);
        QCOMPARE(t.data.size(), std::size_t(64 * 128));
        QVERIFY(c.totalBytes() > 2'000'000);
        QVERIFY_THROWS_EXCEPTION(Error, c.get("model.layers.9.mlp.gate.weight"));
    }

    void singleFile() {
        QTemporaryDir tmp;
        writeFile(tmp.filePath("model.safetensors"), makeSafetensors({f32Tensor("x", {3})}));
        const io::Checkpoint c(tmp.path().toStdString());
        QVERIFY(c.has("x"));
        QCOMPARE(c.tensorNames(), std::vector<std::string>{"x"});
    }

    void missingFolder() { expectError("/nonexistent/model", {"does not exist"}); }

    void emptyFolder() {
        QTemporaryDir tmp;
        expectError(tmp.path(), {"neither model.safetensors nor model.safetensors.index.json"});
    }

    void indexNamesMissingShard() {
        QTemporaryDir tmp;
        QVERIFY(copyFixture("tiny-qwen3moe", tmp.path()));
        QFile::remove(tmp.filePath("model-00002-of-00002.safetensors"));
        expectError(tmp.path(), {"model-00002-of-00002.safetensors", "missing"});
    }

    void indexPlacesTensorInWrongShard() {
        QTemporaryDir tmp;
        QVERIFY(copyFixture("tiny-qwen3moe", tmp.path()));
        QJsonObject index = QJsonDocument::fromJson(readFile(tmp.filePath("model.safetensors.index.json"))).object();
        QJsonObject map = index["weight_map"].toObject();
        map["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
        index["weight_map"] = map;
        writeFile(tmp.filePath("model.safetensors.index.json"), QJsonDocument(index).toJson());
        expectError(tmp.path(), {"model.embed_tokens.weight", "does not contain it"});
    }

    void malformedIndex() {
        QTemporaryDir tmp;
        QVERIFY(copyFixture("tiny-qwen3moe", tmp.path()));
        writeFile(tmp.filePath("model.safetensors.index.json"), "{\"weight_map\": ");
        expectError(tmp.path(), {"model.safetensors.index.json", "not valid JSON"});
    }

    void truncatedShard() {
        QTemporaryDir tmp;
        QVERIFY(copyFixture("tiny-qwen3moe", tmp.path()));
        const QString shard = tmp.filePath("model-00001-of-00002.safetensors");
        QFile f(shard);
        QVERIFY(f.resize(f.size() / 2));
        expectError(tmp.path(), {shard, "truncated"});
    }
};

QTEST_GUILESS_MAIN(CheckpointTest)
#include "tst_checkpoint.moc"
