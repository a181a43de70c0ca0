// The verification record of a packed store (io/store_verification.h): written by a conversion and by a
// full read, checked at every load against the files' sizes and times and a few sampled windows, and what
// loading does with a store that is verified, unverified or known to be damaged.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>

#include "io/packed_store.h"
#include "io/store_checksum.h"
#include "io/store_verification.h"
#include "convert/convert_model.h"
#include "tandem/engine.h"
#include "tandem/error.h"
#include "tandem/store_check.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

// tiny-qwen3moe as an int4 store: model.safetensors and three expert files.
QString convertFixture(const QTemporaryDir& tmp, const QString& name = "store") {
    const QString out = tmp.filePath(name);
    convert::convertModel({fixturePath("tiny-qwen3moe").toStdString(), out.toStdString(), io::ExpertType::INT4, 2}, {});
    return out;
}

struct timespec mtimeOf(const QString& path) {
    struct stat st {};
    ::stat(path.toLocal8Bit().constData(), &st);
    return st.st_mtim;
}

void setMtime(const QString& path, struct timespec mtime) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, mtime};
    QCOMPARE(::utimensat(AT_FDCWD, path.toLocal8Bit().constData(), times, 0), 0);
}

// Flips one bit at `offset`; with keepTime the file keeps its modification time (as a copy that kept
// the times, or bit rot, would).
void flipByte(const QString& path, qint64 offset, bool keepTime) {
    const struct timespec before = mtimeOf(path);
    QByteArray bytes = readFile(path);
    QVERIFY(offset < bytes.size());
    bytes[offset] = static_cast<char>(bytes[offset] ^ 0x08);
    QVERIFY(writeFile(path, bytes));
    if (keepTime) {
        setMtime(path, before);
    } else if (const struct timespec after = mtimeOf(path); after.tv_sec == before.tv_sec && after.tv_nsec == before.tv_nsec) {
        // Written within the file system's clock tick of the conversion: move on as a later write would.
        setMtime(path, {before.tv_sec + 1, before.tv_nsec});
    }
}

io::VerificationRecord record(const QString& store) {
    const auto r = io::readRecord(store.toStdString());
    if (!r) throw Error("no record in " + store.toStdString());
    return *r;
}

io::VerificationState stateAtOpen(const QString& store) {
    return io::PackedStore(store.toStdString()).verification().state;
}

}  // namespace

class StoreVerificationTest : public QObject {
    Q_OBJECT

private slots:
    void pieceHasherIsHashBytesInParts() {
        std::mt19937 rng(5);
        std::vector<std::byte> bytes(100000);
        for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
        for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{33},
                                    std::size_t{4096}, bytes.size()}) {
            const auto whole = io::hashBytes(std::span(bytes).first(n));
            for (const std::size_t part : {std::size_t{1}, std::size_t{7}, std::size_t{32}, std::size_t{1000}}) {
                io::PieceHasher h;
                for (std::size_t at = 0; at < n; at += part) h.update(std::span(bytes).subspan(at, std::min(part, n - at)));
                QCOMPARE(h.finish(), whole);
            }
        }
    }

    // Windows: inside the file, page aligned, spread over it, the same every time.
    void sampleWindowsAreSpreadAndDeterministic() {
        const io::StoreFile big{"experts-003.bin", 256ull * 8253440, 0x1234, 8253440, 0};
        const auto windows = io::sampleWindows(big, 59);  // DeepSeek-V3: 1 dense + 58 expert files
        QCOMPARE(windows.size(), std::size_t{io::kMinSamplesPerFile});
        for (std::size_t i = 0; i < windows.size(); ++i) {
            QCOMPARE(windows[i].bytes, io::kSampleWindowBytes);
            QCOMPARE(windows[i].offset % 4096, std::uint64_t{0});
            QVERIFY(windows[i].offset + windows[i].bytes <= big.bytes);
            QVERIFY(windows[i].offset >= big.bytes / windows.size() * i);  // one per stretch
        }
        QCOMPARE(io::sampleWindows(big, 59).back().offset, windows.back().offset);
        auto other = big;
        other.checksum ^= 1;
        QVERIFY(io::sampleWindows(other, 59).back().offset != windows.back().offset);
        QCOMPARE(io::sampleWindows(big, 3).size(), std::size_t{io::kMaxSamplesPerFile});
        const io::StoreFile tiny{"experts-001.bin", 5000, 1, 5000, 0};
        const auto small = io::sampleWindows(tiny, 3);
        QCOMPARE(small.size(), std::size_t{1});
        QCOMPARE(small[0].offset, std::uint64_t{0});
        QCOMPARE(small[0].bytes, std::uint64_t{5000});
    }

    // The conversion records what it wrote: no second read of the store, and it loads verified.
    void conversionWritesTheRecord() {
        QTemporaryDir tmp;
        const QString out = convertFixture(tmp);
        QVERIFY(QFile::exists(out + "/tandem-verified.json"));
        const auto manifest = io::readManifest(out.toStdString());
        const auto r = record(out);
        QVERIFY(r.intact);
        QVERIFY(r.method == io::VerifiedBy::Conversion);
        QVERIFY(QString::fromStdString(r.program).startsWith("tandem "));
        QVERIFY(!r.verifiedAt.empty());
        const auto files = io::checkedFiles(manifest);
        QCOMPARE(files.size(), std::size_t{1 + manifest.moeLayers.size()});
        QCOMPARE(r.files.size(), files.size());
        for (const auto& f : files) {
            const auto* v = r.find(f.name);
            QVERIFY2(v, f.name.c_str());
            QCOMPARE(v->checksum, f.checksum);
            QCOMPARE(v->stamp.bytes, static_cast<std::uint64_t>(QFileInfo(out + "/" + QString::fromStdString(f.name)).size()));
            QVERIFY(*io::stampFile(out.toStdString() + "/" + f.name) == v->stamp);
            QVERIFY(!v->samples.empty());
        }
        const io::PackedStore store(out.toStdString());
        QVERIFY(store.verification().state == io::VerificationState::Verified);
        QVERIFY2(QString::fromStdString(store.verification().message).contains("by its conversion"),
                 store.verification().message.c_str());
        QVERIFY(checkStore(out.toStdString()).state == StoreState::Verified);
        const auto engine = Engine::load(out.toStdString(), {1});
        QVERIFY(engine->info().store == StoreState::Verified);
        // A Hugging Face folder is not a store.
        QVERIFY(checkStore(fixturePath("tiny-qwen3moe").toStdString()).state == StoreState::NotAStore);
    }

    // One byte in the middle of an expert file, the file's time kept: the size and first page match,
    // so opening alone loads it; the sampled window it falls in does not, so the store is unverified,
    // and the full read names the file. Nothing is deleted; the record says damaged, and loading refuses.
    void damageInASampledWindowIsCaughtAtLoad() {
        QTemporaryDir tmp;
        const QString out = convertFixture(tmp);
        const auto r = record(out);
        const io::VerifiedFile* target = r.find("experts-001.bin");
        QVERIFY(target);
        const io::SampleHash* window = nullptr;
        for (const auto& s : target->samples)
            if (s.offset >= 4096) window = &s;  // past the first page, which opening checks anyway
        QVERIFY(window);
        const QString layer = out + "/experts-001.bin";
        flipByte(layer, static_cast<qint64>(window->offset + window->bytes / 2), true);

        {
            const io::PackedStore store(out.toStdString());  // size and first page are fine
            QVERIFY(store.verification().state == io::VerificationState::Unverified);
            QVERIFY2(QString::fromStdString(store.verification().message).contains("experts-001.bin"),
                     store.verification().message.c_str());
        }
        const auto engine = Engine::load(out.toStdString(), {1});  // unverified still loads
        QVERIFY(engine->info().store == StoreState::Unverified);
        QVERIFY(!engine->info().storeNotice.empty());

        std::vector<double> fractions;
        const StoreCheck result = verifyStore(out.toStdString(), [&](double f) {
            fractions.push_back(f);
            return true;
        });
        QVERIFY(result.state == StoreState::Damaged);
        QCOMPARE(result.damage.size(), std::size_t{1});
        const QString message = QString::fromStdString(result.message);
        QVERIFY2(message.contains(layer) && message.contains("convert the model again", Qt::CaseInsensitive) &&
                     message.contains("Nothing was deleted"),
                 qPrintable(message));
        QVERIFY(!fractions.empty());
        QCOMPARE(fractions.back(), 1.0);
        QVERIFY(QFile::exists(layer));  // nothing deleted

        QVERIFY(!record(out).intact);
        QVERIFY(stateAtOpen(out) == io::VerificationState::Damaged);
        try {
            Engine::load(out.toStdString(), {1});
            QFAIL("loaded a store its verification found damaged");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains(layer) && QString(e.what()).contains("convert", Qt::CaseInsensitive), e.what());
        }
    }

    // A damaged byte written the ordinary way: the file's time changed, so the record no longer matches
    // (whatever the sampled windows say) and the full read finds the damage.
    void changedFileMakesTheRecordStale() {
        QTemporaryDir tmp;
        const QString out = convertFixture(tmp);
        const qint64 offset = QFileInfo(out + "/experts-002.bin").size() / 2 + 123;
        QVERIFY(offset >= 4096);
        flipByte(out + "/experts-002.bin", offset, false);
        const StoreCheck check = checkStore(out.toStdString());
        QVERIFY(check.state == StoreState::Unverified);
        QVERIFY2(QString::fromStdString(check.message).contains("experts-002.bin") &&
                     QString::fromStdString(check.message).contains("changed"),
                 check.message.c_str());
        const StoreCheck result = verifyStore(out.toStdString());
        QVERIFY(result.state == StoreState::Damaged);
        QVERIFY2(QString::fromStdString(result.message).contains("experts-002.bin"), result.message.c_str());
    }

    // A new modification time (the bytes as they were): unverified until read again, then verified.
    void touchedFileIsVerifiedAgain() {
        QTemporaryDir tmp;
        const QString out = convertFixture(tmp);
        struct timespec later = mtimeOf(out + "/model.safetensors");
        later.tv_sec += 10;
        setMtime(out + "/model.safetensors", later);
        QVERIFY(stateAtOpen(out) == io::VerificationState::Unverified);
        const StoreCheck result = verifyStore(out.toStdString());
        QVERIFY2(result.state == StoreState::Verified, result.message.c_str());
        QVERIFY(result.recordProblem.empty());
        QVERIFY(record(out).method == io::VerifiedBy::FullRead);
        QVERIFY(stateAtOpen(out) == io::VerificationState::Verified);
        QVERIFY(checkStore(out.toStdString()).state == StoreState::Verified);
    }

    void missingOrBrokenRecordMeansUnverified() {
        QTemporaryDir tmp;
        const QString out = convertFixture(tmp);
        QVERIFY(QFile::remove(out + "/tandem-verified.json"));
        StoreCheck check = checkStore(out.toStdString());
        QVERIFY(check.state == StoreState::Unverified);
        QVERIFY2(QString::fromStdString(check.message).contains("has not been verified"), check.message.c_str());
        QVERIFY(check.bytes > 0);

        QVERIFY(writeFile(out + "/tandem-verified.json", "{\"format\": \"tandem-store-verification\""));
        check = checkStore(out.toStdString());
        QVERIFY(check.state == StoreState::Unverified);
        QVERIFY2(QString::fromStdString(check.message).contains("cannot be used"), check.message.c_str());
        QVERIFY(verifyStore(out.toStdString()).state == StoreState::Verified);  // replaces it
        QVERIFY(checkStore(out.toStdString()).state == StoreState::Verified);
    }

    // Stopping a verification records nothing.
    void stoppedVerificationRecordsNothing() {
        QTemporaryDir tmp;
        const QString out = convertFixture(tmp);
        QVERIFY(QFile::remove(out + "/tandem-verified.json"));
        const StoreCheck result = verifyStore(out.toStdString(), [](double) { return false; });
        QVERIFY(result.state == StoreState::Unverified);
        QVERIFY(!QFile::exists(out + "/tandem-verified.json"));
    }

    // A folder that cannot be written: the result holds for now and says why it was not recorded.
    void unwritableFolderIsReported() {
        QTemporaryDir tmp;
        const QString out = convertFixture(tmp);
        QVERIFY(QFile::remove(out + "/tandem-verified.json"));
        // A folder in the way of the record's temporary file: it cannot be written, even by root (who
        // writes into read-only folders).
        QVERIFY(QDir(out).mkdir("tandem-verified.json.tmp"));
        const StoreCheck result = verifyStore(out.toStdString());
        QVERIFY(result.state == StoreState::Verified);
        QVERIFY2(QString::fromStdString(result.recordProblem).contains("could not be recorded"), result.recordProblem.c_str());
        QVERIFY(checkStore(out.toStdString()).state == StoreState::Unverified);
    }

    // Converting again into a store found damaged replaces it (it is not "up to date").
    void convertingAgainReplacesADamagedStore() {
        QTemporaryDir tmp;
        const QString out = convertFixture(tmp);
        flipByte(out + "/experts-001.bin", QFileInfo(out + "/experts-001.bin").size() / 2, false);
        QVERIFY(verifyStore(out.toStdString()).state == StoreState::Damaged);
        const auto result = convert::convertModel(
            {fixturePath("tiny-qwen3moe").toStdString(), out.toStdString(), io::ExpertType::INT4, 2}, {});
        QVERIFY(!result.upToDate);
        QVERIFY(checkStore(out.toStdString()).state == StoreState::Verified);
        QVERIFY(io::PackedStore(out.toStdString()).verify());
    }
};

QTEST_GUILESS_MAIN(StoreVerificationTest)
#include "tst_store_verification.moc"
