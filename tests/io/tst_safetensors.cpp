// The safetensors reader: a valid file, and every way a header can be broken.
#include <QJsonArray>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <cstring>

#include "io/safetensors.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

class SafetensorsTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;

    QString write(const QByteArray& bytes) {
        static int n = 0;
        const QString path = tmp_.filePath(QString("t%1.safetensors").arg(n++));
        writeFile(path, bytes);
        return path;
    }

    // Opening must fail with an Error whose message contains every fragment.
    void expectError(const QByteArray& bytes, const QStringList& fragments) {
        const QString path = write(bytes);
        try {
            io::SafetensorsFile file(path.toStdString());
            QFAIL("opened a broken file without an error");
        } catch (const Error& e) {
            const QString message = e.what();
            QVERIFY2(message.contains(path), qPrintable("message does not name the file: " + message));
            for (const auto& f : fragments) QVERIFY2(message.contains(f), qPrintable(message));
        }
    }

    static std::vector<RawTensor> twoTensors() { return {f32Tensor("a", {2, 3}), f32Tensor("b", {4}, 10.0f)}; }

private slots:
    void readsTensors() {
        const QString path = write(makeSafetensors(twoTensors(), {{"__metadata__", QJsonObject{{"format", "pt"}}}}));
        const io::SafetensorsFile file(path.toStdString());
        QCOMPARE(file.tensors().size(), std::size_t(2));
        QCOMPARE(file.metadata().at("format"), std::string("pt"));
        const auto& b = file.get("b");
        QCOMPARE(b.dtype, io::DType::F32);
        QCOMPARE(b.shape, std::vector<std::int64_t>{4});
        float values[4];
        std::memcpy(values, file.data(b).data(), sizeof values);
        QCOMPARE(values[0], 10.0f);
        QCOMPARE(values[3], 13.0f);
        QVERIFY(file.find("missing") == nullptr);
        QVERIFY_THROWS_EXCEPTION(Error, file.get("missing"));
    }

    void tooShort() { expectError("abc", {"not a safetensors file"}); }

    void headerLengthPastEnd() {
        QByteArray bytes = makeSafetensors(twoTensors());
        bytes[0] = '\xff';
        bytes[1] = '\xff';
        expectError(bytes, {"header length", "runs past the end"});
    }

    void headerNotJson() {
        QByteArray bytes = makeSafetensors(twoTensors());
        bytes[8] = '[';
        bytes[9] = '{';
        expectError(bytes, {"not valid JSON"});
    }

    void unknownDtype() {
        expectError(makeSafetensors(twoTensors(), {{"a", QJsonObject{{"dtype", "Q4"}, {"shape", QJsonArray{1}},
                                                                     {"data_offsets", QJsonArray{0, 1}}}}}),
                    {"'a'", "unsupported dtype 'Q4'"});
    }

    void shapeDisagreesWithOffsets() {
        expectError(makeSafetensors(twoTensors(), {{"a", QJsonObject{{"dtype", "F32"}, {"shape", QJsonArray{2, 4}},
                                                                     {"data_offsets", QJsonArray{0, 24}}}}}),
                    {"'a'", "needs 32 bytes", "span 24"});
    }

    void offsetsPastEnd() {
        // A shard cut short by an interrupted download: the header is intact, the data is not.
        QByteArray bytes = makeSafetensors(twoTensors());
        bytes.chop(8);
        expectError(bytes, {"'b'", "truncated"});
    }

    void overlappingTensors() {
        expectError(makeSafetensors(twoTensors(), {{"b", QJsonObject{{"dtype", "F32"}, {"shape", QJsonArray{4}},
                                                                     {"data_offsets", QJsonArray{8, 24}}}}}),
                    {"overlap"});
    }

    void reversedOffsets() {
        expectError(makeSafetensors(twoTensors(), {{"b", QJsonObject{{"dtype", "F32"}, {"shape", QJsonArray{0}},
                                                                     {"data_offsets", QJsonArray{24, 8}}}}}),
                    {"end before they begin"});
    }

    void negativeDimension() {
        expectError(makeSafetensors(twoTensors(), {{"b", QJsonObject{{"dtype", "F32"}, {"shape", QJsonArray{-4}},
                                                                     {"data_offsets", QJsonArray{24, 40}}}}}),
                    {"non-negative"});
    }

    void missingFile() {
        QVERIFY_THROWS_EXCEPTION(Error, io::SafetensorsFile(tmp_.filePath("nope.safetensors").toStdString()));
    }
};

QTEST_GUILESS_MAIN(SafetensorsTest)
#include "tst_safetensors.moc"
