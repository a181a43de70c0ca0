#pragma once
// Shared helpers of the test suites: where the fixtures are, golden references, and writers for
// hand-made (often deliberately broken) checkpoint files.
#include <QByteArray>
#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::test {

// TANDEM_FIXTURES, or tests/fixtures of the source tree. Fails the calling test when absent.
QString fixturesDir();
QString fixturePath(const QString& name);
// The fixture folders (tiny-*), sorted.
QStringList fixtureNames();
// Path of the built tandem-cli.
QString cliPath();

// One tensor of a hand-made safetensors file.
struct RawTensor {
    std::string name;
    std::string dtype;  // "F32", "BF16", ...
    std::vector<std::int64_t> shape;
    QByteArray data;
};
// A well-formed safetensors file; `headerPatch` entries replace fields of the generated header so a
// test can corrupt exactly one thing.
QByteArray makeSafetensors(const std::vector<RawTensor>& tensors, const QJsonObject& headerPatch = {});
RawTensor f32Tensor(const std::string& name, std::vector<std::int64_t> shape, float start = 0.0f);

bool writeFile(const QString& path, const QByteArray& bytes);
QByteArray readFile(const QString& path);
// Copies every file of a fixture into `dir` (writable copies).
bool copyFixture(const QString& name, const QString& dir);

// One golden reference of a fixture: golden.safetensors' "<prompt>.*" tensors.
struct Golden {
    std::vector<int> promptIds;
    std::vector<int> genIds;
    std::vector<float> prefillLogits;  // [promptIds.size(), vocab]
    std::vector<float> genLogits;      // [genIds.size(), vocab]
    int vocab = 0;
};
Golden loadGolden(const QString& fixture, const QString& prompt);

// ‖a − b‖ / ‖b‖ over n values.
double relativeL2(const float* a, const float* b, std::size_t n);
// Largest minus second-largest value.
double topMargin(const float* row, std::size_t n);

}  // namespace tandem::test
