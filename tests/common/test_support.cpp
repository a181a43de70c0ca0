#include "test_support.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "io/safetensors.h"

namespace tandem::test {

QString fixturesDir() {
    const QString env = qEnvironmentVariable("TANDEM_FIXTURES");
    const QString dir = env.isEmpty() ? QStringLiteral(TANDEM_FIXTURES_DEFAULT) : env;
    if (!QDir(dir).exists())
        qFatal("fixture folder %s does not exist; set TANDEM_FIXTURES to a folder of fixture models (the repository has tests/fixtures)", qPrintable(dir));
    return QDir(dir).absolutePath();
}

QString fixturePath(const QString& name) { return fixturesDir() + "/" + name; }

QStringList fixtureNames() {
    QStringList names = QDir(fixturesDir()).entryList({"tiny-*"}, QDir::Dirs, QDir::Name);
    if (names.isEmpty()) qFatal("no tiny-* fixtures in %s", qPrintable(fixturesDir()));
    return names;
}

QString cliPath() { return QStringLiteral(TANDEM_CLI_PATH); }

QByteArray makeSafetensors(const std::vector<RawTensor>& tensors, const QJsonObject& headerPatch) {
    QJsonObject header;
    QByteArray data;
    for (const auto& t : tensors) {
        QJsonArray shape;
        for (const auto d : t.shape) shape.append(static_cast<qint64>(d));
        QJsonObject entry{{"dtype", QString::fromStdString(t.dtype)},
                          {"shape", shape},
                          {"data_offsets", QJsonArray{data.size(), data.size() + t.data.size()}}};
        header[QString::fromStdString(t.name)] = entry;
        data += t.data;
    }
    for (auto it = headerPatch.begin(); it != headerPatch.end(); ++it) header[it.key()] = it.value();
    QByteArray json = QJsonDocument(header).toJson(QJsonDocument::Compact);
    while (json.size() % 8) json += ' ';
    QByteArray out(8, '\0');
    const quint64 n = static_cast<quint64>(json.size());
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + json + data;
}

RawTensor f32Tensor(const std::string& name, std::vector<std::int64_t> shape, float start) {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    QByteArray data(static_cast<qsizetype>(n * 4), '\0');
    for (std::int64_t i = 0; i < n; ++i) {
        const float v = start + static_cast<float>(i);
        std::memcpy(data.data() + i * 4, &v, 4);
    }
    return {name, "F32", std::move(shape), data};
}

bool writeFile(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(bytes) == bytes.size();
}

QByteArray readFile(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

bool copyFixture(const QString& name, const QString& dir) {
    const QDir source(fixturePath(name));
    for (const QString& file : source.entryList(QDir::Files)) {
        const QString target = dir + "/" + file;
        QFile::remove(target);
        if (!QFile::copy(source.filePath(file), target)) return false;
        QFile::setPermissions(target, QFile::ReadOwner | QFile::WriteOwner);
    }
    return true;
}

Golden loadGolden(const QString& fixture, const QString& prompt) {
    const io::SafetensorsFile file((fixturePath(fixture) + "/golden.safetensors").toStdString());
    const std::string p = prompt.toStdString();
    auto ints = [&](const std::string& name) {
        const auto& t = file.get(p + "." + name);
        std::vector<int> v(static_cast<std::size_t>(t.numel()));
        std::memcpy(v.data(), file.data(t).data(), v.size() * 4);
        return v;
    };
    auto floats = [&](const std::string& name, int& cols) {
        const auto& t = file.get(p + "." + name);
        cols = static_cast<int>(t.shape.back());
        std::vector<float> v(static_cast<std::size_t>(t.numel()));
        std::memcpy(v.data(), file.data(t).data(), v.size() * 4);
        return v;
    };
    Golden g;
    g.promptIds = ints("prompt_ids");
    g.genIds = ints("gen_ids");
    g.prefillLogits = floats("prefill_logits", g.vocab);
    g.genLogits = floats("gen_logits", g.vocab);
    return g;
}

double relativeL2(const float* a, const float* b, std::size_t n) {
    double diff = 0, ref = 0;
    for (std::size_t i = 0; i < n; ++i) {
        diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
        ref += static_cast<double>(b[i]) * b[i];
    }
    return std::sqrt(diff) / std::sqrt(ref);
}

double topMargin(const float* row, std::size_t n) {
    std::vector<float> v(row, row + n);
    std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<>());
    return static_cast<double>(v[0]) - v[1];
}

}  // namespace tandem::test
