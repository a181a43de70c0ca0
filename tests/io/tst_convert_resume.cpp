// The converter's life cycle: resuming an interrupted run, refusing what it must not overwrite, and
// leaving nothing behind when the input is damaged.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include "io/checkpoint.h"
#include "io/packed_store.h"
#include "io/store_manifest.h"
#include "convert/convert_model.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

struct Interrupt {};

struct Run {
    convert::ConvertResult result;
    int packed = 0;   // layers finished that were not kept from an earlier run, counted by the progress calls
    int resumed = 0;
};

Run runConvert(const QString& model, const QString& out, io::ExpertType type = io::ExpertType::INT8,
            int stopAfterLayers = -1) {
    Run run;
    int lastLayer = 0, lastResumed = 0;
    run.result = convert::convertModel({model.toStdString(), out.toStdString(), type, 2}, [&](const convert::ConvertProgress& p) {
        if (p.layer != lastLayer) {
            run.packed += (p.layer - lastLayer) - (p.resumedLayers - lastResumed);
            run.resumed = p.resumedLayers;
        }
        lastLayer = p.layer;
        lastResumed = p.resumedLayers;
        if (p.layer == stopAfterLayers) throw Interrupt{};
    });
    return run;
}

QString fixture() { return fixturePath("tiny-qwen3moe"); }

// Turns a finished store into the .partial folder of an interrupted run of the same conversion.
void makeUnfinished(const QString& out) {
    QVERIFY(QDir().rename(out, out + ".partial"));
    const QString manifest = out + ".partial/tandem-store.json";
    QJsonObject j = QJsonDocument::fromJson(readFile(manifest)).object();
    j["complete"] = false;
    QVERIFY(writeFile(manifest, QJsonDocument(j).toJson()));
}

std::map<int, std::uint64_t> layerChecksums(const QString& store) {
    std::map<int, std::uint64_t> sums;
    for (const auto& l : io::readManifest(store.toStdString()).layers) sums[l.layer] = l.file.checksum;
    return sums;
}

template <typename F>
QString errorOf(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

// Where a tensor's bytes start in its shard.
qint64 fileOffset(const QString& dir, const std::string& tensor) {
    const io::Checkpoint c(dir.toStdString());
    const auto t = c.get(tensor);
    const QByteArray head = readFile(QString::fromStdString(t.file->path().string())).left(8);
    qint64 n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(head[i]);
    return 8 + n + static_cast<qint64>(t.info->begin);
}

}  // namespace

class ConvertResumeTest : public QObject {
    Q_OBJECT

private slots:
    void interruptedRunResumes() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        bool interrupted = false;
        try {
            runConvert(fixture(), out, io::ExpertType::INT8, 1);
        } catch (const Interrupt&) {
            interrupted = true;
        }
        QVERIFY(interrupted);
        QVERIFY(!QFile::exists(out));
        QVERIFY(io::PackedStore::isStore((out + ".partial").toStdString()));
        const QString error = errorOf([&] { io::PackedStore s((out + ".partial").toStdString()); });
        QVERIFY2(error.contains("unfinished") && error.contains("--out " + out + " --experts int8"), qPrintable(error));

        const Run second = runConvert(fixture(), out);
        QCOMPARE(second.result.resumedLayers, 1);
        QCOMPARE(second.result.packedLayers, 2);
        QCOMPARE(second.resumed, 1);
        QCOMPARE(second.packed, 2);
        QVERIFY(second.result.denseResumed);
        QVERIFY(!QFile::exists(out + ".partial"));
        QVERIFY(io::PackedStore(out.toStdString()).verify());

        QTemporaryDir fresh;
        runConvert(fixture(), fresh.filePath("store"));
        QCOMPARE(layerChecksums(out), layerChecksums(fresh.filePath("store")));
        QCOMPARE(readFile(out + "/model.safetensors"), readFile(fresh.filePath("store") + "/model.safetensors"));
    }

    void missingLastLayerIsRedone() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        runConvert(fixture(), out);
        makeUnfinished(out);
        QVERIFY(QFile::remove(out + ".partial/experts-002.bin"));
        const Run run = runConvert(fixture(), out);
        QCOMPARE(run.packed, 1);
        QCOMPARE(run.resumed, 2);
        QVERIFY(run.result.denseResumed);
        QVERIFY(io::PackedStore(out.toStdString()).verify());
    }

    void truncatedOrCorruptLayerIsRedone() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        runConvert(fixture(), out);
        makeUnfinished(out);
        QFile truncated(out + ".partial/experts-000.bin");
        QVERIFY(truncated.resize(truncated.size() / 3));
        QByteArray bytes = readFile(out + ".partial/experts-001.bin");
        bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);  // same size, other bytes
        QVERIFY(writeFile(out + ".partial/experts-001.bin", bytes));
        const Run run = runConvert(fixture(), out);
        QCOMPARE(run.packed, 2);
        QCOMPARE(run.resumed, 1);
        QVERIFY(io::PackedStore(out.toStdString()).verify());
    }

    void unfinishedRunOfAnotherTypeStartsAfresh() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        runConvert(fixture(), out, io::ExpertType::BF16);
        makeUnfinished(out);
        const Run run = runConvert(fixture(), out, io::ExpertType::INT4);
        QCOMPARE(run.packed, 3);
        QCOMPARE(run.resumed, 0);
        QVERIFY(!run.result.denseResumed);
        QCOMPARE(io::PackedStore(out.toStdString()).expertType(), io::ExpertType::INT4);
    }

    void finishedStoreIsUpToDateOrReplaced() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        runConvert(fixture(), out, io::ExpertType::INT8);
        const Run again = runConvert(fixture(), out, io::ExpertType::INT8);
        QVERIFY(again.result.upToDate);
        QCOMPARE(again.result.packedLayers, 0);
        QCOMPARE(again.packed, 0);

        const Run other = runConvert(fixture(), out, io::ExpertType::INT4);
        QVERIFY(!other.result.upToDate);
        QCOMPARE(other.packed, 3);
        QCOMPARE(io::PackedStore(out.toStdString()).expertType(), io::ExpertType::INT4);
        QVERIFY(!QFile::exists(out + ".replaced"));
        QVERIFY(!QFile::exists(out + ".partial"));
    }

    void emptyOutputFolderIsUsed() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("store");
        QVERIFY(QDir().mkdir(out));
        runConvert(fixture(), out + "/");
        QVERIFY(io::PackedStore(out.toStdString()).verify());
    }

    void refusesAFolderThatIsNotAStore() {
        QTemporaryDir tmp;
        const QString out = tmp.filePath("photos");
        QVERIFY(QDir().mkdir(out));
        QVERIFY(writeFile(out + "/keep.txt", "mine"));
        const QString error = errorOf([&] { runConvert(fixture(), out); });
        QVERIFY2(error.contains(out) && error.contains("not a Tandem store"), qPrintable(error));
        QCOMPARE(readFile(out + "/keep.txt"), QByteArray("mine"));
        QVERIFY(!QFile::exists(out + ".partial"));

        QVERIFY(writeFile(tmp.filePath("file"), "x"));
        QVERIFY(!errorOf([&] { runConvert(fixture(), tmp.filePath("file")); }).isEmpty());
        QCOMPARE(readFile(tmp.filePath("file")), QByteArray("x"));

        QVERIFY(QDir().mkdir(tmp.filePath("next.partial")));
        QVERIFY(writeFile(tmp.filePath("next.partial/notes"), "mine"));
        const QString partialError = errorOf([&] { runConvert(fixture(), tmp.filePath("next")); });
        QVERIFY2(partialError.contains("next.partial") && partialError.contains("not an unfinished"), qPrintable(partialError));
        QCOMPARE(readFile(tmp.filePath("next.partial/notes")), QByteArray("mine"));
    }

    void truncatedShardLeavesNothing() {
        QTemporaryDir tmp;
        const QString model = tmp.filePath("model");
        QVERIFY(QDir().mkdir(model));
        QVERIFY(copyFixture("tiny-deepseekv3-fp8", model));
        QFile shard(model + "/model-00002-of-00002.safetensors");
        QVERIFY(shard.resize(shard.size() - 1000));
        const QString out = tmp.filePath("store");
        const QString error = errorOf([&] { runConvert(model, out); });
        QVERIFY2(error.contains("model-00002-of-00002.safetensors") && error.contains("truncated"), qPrintable(error));
        QVERIFY(!QFile::exists(out));
        QVERIFY(!QFile::exists(out + ".partial"));
    }

    void corruptHeaderLeavesNothing() {
        QTemporaryDir tmp;
        const QString model = tmp.filePath("model");
        QVERIFY(QDir().mkdir(model));
        QVERIFY(copyFixture("tiny-mixtral", model));
        const QString path = model + "/model-00001-of-00002.safetensors";
        QByteArray bytes = readFile(path);
        bytes[9] = '#';
        QVERIFY(writeFile(path, bytes));
        const QString out = tmp.filePath("store");
        const QString error = errorOf([&] { runConvert(model, out); });
        QVERIFY2(error.contains("model-00001-of-00002.safetensors") && error.contains("not valid JSON"), qPrintable(error));
        QVERIFY(!QFile::exists(out));
        QVERIFY(!QFile::exists(out + ".partial"));
    }

    // A NaN in the last layer's experts shows only while packing, after the first layers were written:
    // the unfinished store goes too, rather than waiting to be resumed from a damaged input.
    void damagedWeightMidwayRemovesTheUnfinishedStore() {
        QTemporaryDir tmp;
        const QString model = tmp.filePath("model");
        QVERIFY(QDir().mkdir(model));
        QVERIFY(copyFixture("tiny-qwen3moe", model));
        const std::string tensor = "model.layers.2.mlp.experts.5.up_proj.weight";
        const qint64 offset = fileOffset(model, tensor);
        const QString shard = QString::fromStdString(io::Checkpoint(model.toStdString()).get(tensor).file->path().string());
        QByteArray bytes = readFile(shard);
        bytes[offset + 130] = static_cast<char>(0xc0);  // bf16 0x7fc0: NaN
        bytes[offset + 131] = static_cast<char>(0x7f);
        QVERIFY(writeFile(shard, bytes));

        const QString out = tmp.filePath("store");
        int layersDone = 0;
        QString error;
        try {
            convert::convertModel({model.toStdString(), out.toStdString(), io::ExpertType::INT4, 2},
                                  [&](const convert::ConvertProgress& p) { layersDone = p.layer; });
        } catch (const Error& e) {
            error = e.what();
        }
        QCOMPARE(layersDone, 2);
        QVERIFY2(error.contains("layer 2, expert 5") && error.contains("NaN") && error.contains("Removed"), qPrintable(error));
        QVERIFY(!QFile::exists(out));
        QVERIFY(!QFile::exists(out + ".partial"));
    }

    void aStoreIsNotAnInput() {
        QTemporaryDir tmp;
        runConvert(fixture(), tmp.filePath("store"));
        const QString error = errorOf([&] { runConvert(tmp.filePath("store"), tmp.filePath("again")); });
        QVERIFY2(error.contains("packed Tandem store already") && error.contains(fixture()), qPrintable(error));
        QVERIFY(!QFile::exists(tmp.filePath("again.partial")));
    }

    void missingModelFolder() {
        QTemporaryDir tmp;
        const QString error = errorOf([&] { runConvert(tmp.filePath("nothing"), tmp.filePath("store")); });
        QVERIFY2(error.contains("does not exist"), qPrintable(error));
        QVERIFY(!QFile::exists(tmp.filePath("store.partial")));
    }
};

QTEST_GUILESS_MAIN(ConvertResumeTest)
#include "tst_convert_resume.moc"
