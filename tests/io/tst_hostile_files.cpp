// Model folders are downloaded from anywhere: a FIFO where a file should be must not block a reader, and
// JSON nested thousands of levels deep must be refused before code that walks it recursively sees it.
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtEndian>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <tuple>
#include <sys/stat.h>

#include "io/checkpoint.h"
#include "io/text_file.h"
#include "model/config.h"
#include "tandem/chat.h"
#include "tandem/engine.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

QByteArray nested(int depth, const QByteArray& open, const QByteArray& inner, const QByteArray& close) {
    return open.repeated(depth) + inner + close.repeated(depth);
}

// What `run` threw, or empty when it threw nothing.
template <class F>
QString errorOf(F run) {
    try {
        run();
    } catch (const Error& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

// Writes a bf16 NaN over value `index` of tensor `name` in a copied checkpoint folder.
bool poison(const QString& dir, const QString& name, qint64 index) {
    const QJsonObject map = QJsonDocument::fromJson(readFile(dir + "/model.safetensors.index.json")).object()["weight_map"].toObject();
    QFile shard(dir + "/" + map[name].toString());
    if (!shard.open(QIODevice::ReadWrite)) return false;
    const QByteArray head = shard.read(8);
    const qint64 headerLength = qFromLittleEndian<qint64>(head.constData());
    const QJsonObject entry = QJsonDocument::fromJson(shard.read(headerLength)).object()[name].toObject();
    if (entry["dtype"].toString() != "BF16") return false;
    const qint64 offset = 8 + headerLength + entry["data_offsets"].toArray()[0].toInteger() + 2 * index;
    const char nan[2] = {'\xc0', '\x7f'};  // 0x7fc0, little-endian
    return shard.seek(offset) && shard.write(nan, 2) == 2;
}

}  // namespace

class HostileFilesTest : public QObject {
    Q_OBJECT

    // A copy of tiny-qwen3moe with `file` replaced by a FIFO (nothing ever writes to it).
    QString folderWithFifo(const QTemporaryDir& tmp, const QString& file) {
        const QString dir = tmp.filePath("model");
        if (!QDir().mkpath(dir) || !copyFixture("tiny-qwen3moe", dir)) return {};
        QFile::remove(dir + "/" + file);
        if (::mkfifo(QFile::encodeName(dir + "/" + file).constData(), 0644) != 0) return {};
        return dir;
    }

private slots:
    void aFifoIsNotOpenedForReading_data() {
        QTest::addColumn<QString>("file");
        for (const char* f : {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                              "tokenizer.json", "tokenizer_config.json"})
            QTest::newRow(f) << f;
    }
    void aFifoIsNotOpenedForReading() {
        // open() of a FIFO waits for a writer; the loaders open without waiting and refuse what is not a
        // regular file (ctest's timeout would catch a hang).
        QFETCH(QString, file);
        QTemporaryDir tmp;
        const QString dir = folderWithFifo(tmp, file);
        QVERIFY(!dir.isEmpty());
        const std::string path = dir.toStdString();
        const QString error = errorOf([&] {
            if (file.startsWith("tokenizer")) {
                Chat(path, "qwen3_moe");  // the tokenizer and the chat template
            } else {
                EngineOptions o;
                o.device = Device::Cpu;
                Engine::load(path, o);
            }
        });
        QVERIFY2(error.contains("not a regular file"), qPrintable(error));
        QVERIFY2(error.contains(file), qPrintable(error));
    }

    void deepJsonIsRefusedWithTheFileNamed() {
        QTemporaryDir tmp;
        // tokenizer.json with a Sequence normalizer 30,000 deep (it crashed the loader's recursion).
        const QByteArray sequence = nested(30000, R"({"type":"Sequence","normalizers":[)", R"({"type":"NFC"})", "]}");
        const QString tokenizer = errorOf([&] { text::Tokenizer::fromJson(QByteArray(R"({"normalizer":)" + sequence + "}").toStdString(), "deep/tokenizer.json"); });
        QVERIFY2(tokenizer.startsWith("deep/tokenizer.json nests JSON more than"), qPrintable(tokenizer));

        const QString dir = tmp.filePath("model");
        QVERIFY(QDir().mkpath(dir) && copyFixture("tiny-qwen3moe", dir));
        QVERIFY(writeFile(dir + "/config.json", "{\"x\":" + nested(20000, "[", "1", "]") + "}"));
        const QString config = errorOf([&] { model::loadModelConfig(dir.toStdString()); });
        QVERIFY2(config.contains("config.json nests JSON more than"), qPrintable(config));

        // At the limit a file still reads; one more level is refused.
        for (const auto& [open, inner, close] : {std::tuple{"[", "[1, \"b\"]", "]"}, std::tuple{"{\"a\":", "{}", "}"}}) {
            const auto levels = [&](int n) { return nested(n - 1, open, inner, close).toStdString(); };
            QVERIFY(!io::parseJson<nlohmann::json>(levels(io::kMaxJsonDepth), "x").is_null());
            QVERIFY(!errorOf([&] { (void)io::parseJson<nlohmann::json>(levels(io::kMaxJsonDepth + 1), "x"); }).isEmpty());
        }
    }

    void nanWeightsAreNamedNotRun_data() {
        QTest::addColumn<QString>("tensor");
        QTest::addColumn<qint64>("index");
        QTest::addColumn<QString>("expected");
        // Small tensors are checked as they load, naming the tensor; anything else shows in the logits.
        QTest::newRow("norm") << "model.norm.weight" << qint64(5) << "tensor 'model.norm.weight'";
        QTest::newRow("router") << "model.layers.1.mlp.gate.weight" << qint64(300) << "tensor 'model.layers.1.mlp.gate.weight'";
        QTest::newRow("embedding") << "model.embed_tokens.weight" << qint64(9 * 128 + 7) << "NaN or infinite logits";
    }
    void nanWeightsAreNamedNotRun() {
        QFETCH(QString, tensor);
        QFETCH(qint64, index);
        QFETCH(QString, expected);
        QTemporaryDir tmp;
        const QString dir = tmp.filePath("model");
        QVERIFY(QDir().mkpath(dir) && copyFixture("tiny-qwen3moe", dir));
        QVERIFY(poison(dir, tensor, index));
        const QString error = errorOf([&] {
            EngineOptions o;
            o.threads = 2;
            o.device = Device::Cpu;
            auto engine = Engine::load(dir.toStdString(), o);
            const std::vector<int> prompt{3, 9, 12};  // token 9's embedding row holds the NaN
            engine->newSession()->generate(prompt, {}, [](int) { return true; });
        });
        QVERIFY2(error.contains(expected) && error.contains("download or convert the model again"), qPrintable(error));
    }

    void theRealFilesAreFarFromTheLimit() {
        // The fixtures' own JSON files, with the depth each nests to: a small fraction of the limit.
        for (const QString& fixture : fixtureNames())
            for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors.index.json"}) {
                const QString path = fixturePath(fixture) + "/" + file;
                if (!QFile::exists(path)) continue;
                int deepest = 0;
                (void)nlohmann::json::parse(readFile(path).toStdString(), [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
                    deepest = std::max(deepest, depth);
                    return true;
                });
                QVERIFY2(deepest * 8 < io::kMaxJsonDepth, qPrintable(path));
            }
    }
};

QTEST_GUILESS_MAIN(HostileFilesTest)
#include "tst_hostile_files.moc"
