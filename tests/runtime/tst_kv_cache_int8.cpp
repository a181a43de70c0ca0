// The 8-bit KV cache (EngineOptions::kvCache = Int8, issue 28): its rows quantized per key head (MLA: per
// latent and rope row) with a float scale, its bytes about a quarter of float32's, the AVX-512 and AVX2
// attention kernels and the plain loops reading it as the softmax over the dequantized rows, the logits of a
// few hundred tokens close to the float32 cache's, a decode batch of int8 caches equal to its sessions alone,
// a GPU engine asked for the same cache, and MLA rows wider than the GPU's 8-bit writes kept in float32. The float32 cache's logits are the golden tests' (and
// unchanged bit for bit: docs/BENCHMARKS.md, "8-bit KV cache").
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cpu/cpu_features.h"
#include "cpu/dense/gqa_attention.h"
#include "cpu/pool/thread_pool.h"
#include "flaky_gpu.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "runtime/gpu_backend.h"
#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

std::unique_ptr<Engine> load(const QString& fixture, KvCacheType kv, Device device = Device::Cpu) {
    EngineOptions o;
    o.threads = 2;
    o.device = device;
    o.kvCache = kv;
    // gpt-oss's MXFP4 experts on bf16 kernels, as the golden checks run them (any type would do: both
    // engines of a comparison share it).
    if (fixture == "tiny-gpt-oss") o.experts = ExpertPrecision::BF16;
    return Engine::load(fixturePath(fixture).toStdString(), o);
}

std::vector<int> randomIds(int count, int vocab, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> id(0, vocab - 1);
    std::vector<int> ids(static_cast<std::size_t>(count));
    for (int& t : ids) t = id(rng);
    return ids;
}

int argmax(const float* row, std::size_t n) { return static_cast<int>(std::max_element(row, row + n) - row); }

// The largest difference between out[0, dim) and the softmax over positions [first, last] of score(j) (and
// a sink logit, if any) weighting value(j, d), all in double.
template <class Score, class Value>
double worstAgainstSoftmax(int first, int last, int dim, Score score, Value value, const float* out, const float* sink = nullptr) {
    std::vector<double> w;
    double m = sink ? *sink : -1e300;
    for (int j = first; j <= last; ++j) {
        w.push_back(score(j));
        m = std::max(m, w.back());
    }
    double l = sink ? std::exp(*sink - m) : 0.0;
    for (double& x : w) l += (x = std::exp(x - m));
    double worst = 0;
    for (int d = 0; d < dim; ++d) {
        double want = 0;
        for (int j = first; j <= last; ++j) want += w[j - first] / l * value(j, d);
        worst = std::max(worst, std::abs(want - out[d]));
    }
    return worst;
}

// n rows of `width` floats quantized in groups of `group` (model::quantizeKvGroup), group-major as
// model::KvCache holds them (group g of row p: codes at (g * n + p) * group, scale at g * n + p), and the
// values they stand for (row-major, as `rows`).
struct Quantized {
    std::vector<std::int8_t> codes;
    std::vector<float> scales;
    std::vector<float> values;  // codes times scales
};
Quantized quantize(const std::vector<float>& rows, int width, int group) {
    Quantized q;
    const std::size_t n = rows.size() / static_cast<std::size_t>(width), groups = static_cast<std::size_t>(width / group);
    q.codes.resize(rows.size());
    q.scales.resize(n * groups);
    q.values.resize(rows.size());
    for (std::size_t p = 0; p < n; ++p)
        for (std::size_t g = 0; g < groups; ++g) {
            const std::size_t from = p * width + g * group, to = (g * n + p) * group;
            model::quantizeKvGroup(rows.data() + from, group, q.codes.data() + to, &q.scales[g * n + p]);
            for (int i = 0; i < group; ++i) q.values[from + i] = static_cast<float>(q.codes[to + i]) * q.scales[g * n + p];
        }
    return q;
}

struct CliRun {
    int exitCode;
    QString err;
};

CliRun runCli(const QStringList& args, const QProcessEnvironment& env) {
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(cliPath(), args);
    p.closeWriteChannel();
    if (!p.waitForFinished(300000)) qFatal("tandem-cli did not finish");
    return {p.exitCode(), QString::fromUtf8(p.readAllStandardError())};
}

std::vector<float> readFloats(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
    const QByteArray bytes = f.readAll();
    std::vector<float> out(static_cast<std::size_t>(bytes.size()) / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
}

}  // namespace

class KvCacheInt8Test : public QObject {
    Q_OBJECT
private slots:
    // Each value within half a step of its group's scale, the group's largest magnitude exactly 127 steps, a
    // zero group all zeros with scale 0, a NaN making its group's scale NaN (so the logits turn NaN, as with
    // a float cache, and the session reports it); dot and axpy read the dequantized values.
    void rowsAreQuantizedPerGroup() {
        model::KvCache cache(2, {64, 48}, 300, KvCacheType::Int8, {32, 48});
        QVERIFY(cache.quantized());
        QCOMPARE(cache.groups(0), 2);
        QCOMPARE(cache.groups(1), 1);
        cache.reserve(300);
        std::mt19937 rng(3);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> row(64), q(64);
        for (float& x : q) x = normal(rng);
        for (int p = 0; p < 300; p += 7) {
            for (float& x : row) x = normal(rng);
            row[5] = 40.0f;  // an outlier: the first group's scale is coarse, the second's not
            cache.write(1, 0, p, row.data());
            for (int g = 0; g < 2; ++g) {
                const float scale = *cache.scale(1, 0, g, p);
                float largest = 0;
                for (int i = 0; i < 32; ++i) largest = std::max(largest, std::abs(row[g * 32 + i]));
                QCOMPARE(scale, largest / 127.0f);
                int widest = 0;
                double dot = 0;
                for (int i = 0; i < 32; ++i) {
                    const int code = cache.codes(1, 0, g, p)[i];
                    widest = std::max(widest, std::abs(code));
                    QVERIFY(std::abs(code * scale - row[g * 32 + i]) <= 0.5f * scale * (1 + 1e-5f));
                    dot += double(q[i]) * code * scale;
                }
                QCOMPARE(widest, 127);
                QVERIFY(std::abs(cache.dot(1, 0, p, g * 32, q.data(), 32) - dot) < 1e-4 * (1 + std::abs(dot)));
                std::vector<float> y(32, 1.0f);
                cache.axpy(0.5f, 1, 0, p, g * 32, y.data(), 32);
                for (int i = 0; i < 32; ++i)
                    QVERIFY(std::abs(y[i] - (1.0f + 0.5f * cache.codes(1, 0, g, p)[i] * scale)) < 1e-5f * (1 + std::abs(y[i])));
            }
        }
        std::vector<float> zero(48, 0.0f);
        cache.write(0, 1, 3, zero.data());
        QCOMPARE(*cache.scale(0, 1, 0, 3), 0.0f);
        QVERIFY(std::all_of(cache.codes(0, 1, 0, 3), cache.codes(0, 1, 0, 3) + 48, [](std::int8_t c) { return c == 0; }));
        zero[7] = std::numeric_limits<float>::quiet_NaN();
        cache.write(0, 1, 4, zero.data());
        QVERIFY(std::isnan(*cache.scale(0, 1, 0, 4)));
        QVERIFY(std::isnan(cache.dot(0, 1, 4, 0, q.data(), 48)));

        // Group-major rows move when the cache grows: what was written reads back the same.
        model::KvCache growing(1, {64, 64}, 5000, KvCacheType::Int8, {32, 32});
        growing.reserve(10);
        std::vector<float> before;
        for (int p = 0; p < 10; ++p) {
            for (float& x : row) x = normal(rng);
            growing.write(0, 1, p, row.data());
            for (int g = 0; g < 2; ++g) before.push_back(growing.dot(0, 1, p, g * 32, q.data(), 32));
        }
        growing.reserve(4000);
        QVERIFY(growing.groupStride(1) >= 4000 * 32);
        for (int p = 0, i = 0; p < 10; ++p)
            for (int g = 0; g < 2; ++g, ++i) QCOMPARE(growing.dot(0, 1, p, g * 32, q.data(), 32), before[i]);
    }

    // A quarter of float32's bytes plus a 4-byte scale per group: per position and layer, GQA 2 x kvHeads x
    // (headDim + 4) against 2 x kvHeads x headDim x 4, MLA latent + rope + 8 against (latent + rope) x 4. What
    // the engine reports, and what Settings shows.
    void bytesAreAQuarterPlusTheScales() {
        const std::uint64_t floatBytes = model::KvCache::bytesPerPosition(48, {512, 512}, {128, 128}, KvCacheType::Float32);
        const std::uint64_t int8Bytes = model::KvCache::bytesPerPosition(48, {512, 512}, {128, 128}, KvCacheType::Int8);
        QCOMPARE(floatBytes, std::uint64_t{48} * 2 * 512 * 4);  // Qwen3-30B-A3B: 4 key heads of 128
        QCOMPARE(int8Bytes, floatBytes / 4 + std::uint64_t{48} * 2 * 4 * 4);
        QVERIFY(static_cast<double>(int8Bytes) / floatBytes < 0.26);

        // tiny-qwen3moe: 3 layers, 2 key heads of 32; tiny-deepseekv2: 3 layers, latent 32 + rope 16.
        auto gqa = load("tiny-qwen3moe", KvCacheType::Int8);
        QCOMPARE(gqa->info().kvCache, std::string("int8"));
        QCOMPARE(gqa->info().kvBytesPerPositionFloat32, std::uint64_t{3} * 2 * 2 * 32 * 4);
        QCOMPARE(gqa->info().kvBytesPerPositionInt8, std::uint64_t{3} * 2 * 2 * (32 + 4));
        QCOMPARE(gqa->info().kvBytesPerPosition, gqa->info().kvBytesPerPositionInt8);
        auto mla = load("tiny-deepseekv2", KvCacheType::Int8);
        QCOMPARE(mla->info().kvBytesPerPosition, std::uint64_t{3} * (32 + 16 + 2 * 4));
        QCOMPARE(load("tiny-deepseekv2", KvCacheType::Float32)->info().kvBytesPerPosition, std::uint64_t{3} * (32 + 16) * 4);
        QCOMPARE(load("tiny-deepseekv2", KvCacheType::Float32)->info().kvCache, std::string("float32"));

        // A cache's own count, at any capacity.
        model::KvCache cache(48, {512, 512}, 10, KvCacheType::Int8, {128, 128});
        QCOMPARE(cache.bytesPerPosition(), int8Bytes);
    }

    // The AVX-512 and AVX2 kernels over int8 codes and scales against the plain softmax over the values the
    // codes stand for (in double): several chunks, a sliding window with sinks (gpt-oss), a prompt of
    // several tokens, groups of 1, 4 and 8; MLA with 40 heads (blocks of 16, 16, 8) and a rope part.
    void kernelsReadTheInt8Cache() {
        cpu::ThreadPool pool(3);
        std::mt19937 rng(21);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        struct Case { int heads, kvHeads, headDim, tokens, start, window; bool sinks; };
        for (const cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2})
        for (const Case c : {Case{32, 4, 128, 1, 1300, 0, false}, Case{8, 8, 64, 5, 700, 0, false},
                             Case{16, 4, 32, 3, 600, 300, true}, Case{8, 2, 16, 1, 0, 0, false}}) {
            if (!cpu::isaSupported(isa)) continue;
            const int positions = c.start + c.tokens, kvDim = c.kvHeads * c.headDim;
            const std::size_t qDim = static_cast<std::size_t>(c.heads) * c.headDim;
            std::vector<float> q(c.tokens * qDim), keys(static_cast<std::size_t>(positions) * kvDim),
                values(static_cast<std::size_t>(positions) * kvDim), out(c.tokens * qDim), sinks(c.heads);
            for (auto* v : {&q, &keys, &values, &sinks})
                for (float& x : *v) x = normal(rng);
            const Quantized k = quantize(keys, kvDim, c.headDim), v = quantize(values, kvDim, c.headDim);
            cpu::GqaAttentionArgs a;
            a.q = q.data();
            a.keyCodes = k.codes.data();
            a.keyScales = k.scales.data();
            a.valueCodes = v.codes.data();
            a.valueScales = v.scales.data();
            a.codesHead = static_cast<std::size_t>(positions) * c.headDim;
            a.scalesHead = static_cast<std::size_t>(positions);
            a.tokens = c.tokens;
            a.start = c.start;
            a.window = c.window;
            a.heads = c.heads;
            a.kvHeads = c.kvHeads;
            a.headDim = c.headDim;
            a.scale = 1.0f / std::sqrt(static_cast<float>(c.headDim));
            a.sinks = c.sinks ? sinks.data() : nullptr;
            a.out = out.data();
            if (isa == cpu::Isa::Avx512) cpu::gqaAttentionAvx512(a, pool);
            else cpu::gqaAttentionAvx2(a, pool);
            double worst = 0;
            for (int t = 0; t < c.tokens; ++t)
                for (int h = 0; h < c.heads; ++h) {
                    const int pos = c.start + t, first = c.window ? std::max(0, pos - c.window + 1) : 0;
                    const int g = h / (c.heads / c.kvHeads);
                    const auto score = [&](int j) {
                        double s = 0;
                        for (int d = 0; d < c.headDim; ++d)
                            s += double(q[t * qDim + h * c.headDim + d]) * k.values[static_cast<std::size_t>(j) * kvDim + g * c.headDim + d];
                        return s * a.scale;
                    };
                    const auto value = [&](int j, int d) { return double(v.values[static_cast<std::size_t>(j) * kvDim + g * c.headDim + d]); };
                    worst = std::max(worst, worstAgainstSoftmax(first, pos, c.headDim, score, value, &out[t * qDim + h * c.headDim],
                                                                c.sinks ? &sinks[h] : nullptr));
                }
            QVERIFY2(worst < 2e-5, qPrintable(QString("%1: heads %2/%3, dim %4, %5 tokens after %6: worst %7")
                                                  .arg(QString::fromUtf8(cpu::isaName(isa))).arg(c.heads).arg(c.kvHeads)
                                                  .arg(c.headDim).arg(c.tokens).arg(c.start).arg(worst)));
        }

        struct MlaCase { int heads, latent, rope, tokens, start; };
        for (const cpu::Isa isa : {cpu::Isa::Avx512, cpu::Isa::Avx2})
        for (const MlaCase c : {MlaCase{40, 64, 16, 3, 700}, MlaCase{16, 512, 64, 1, 1300}, MlaCase{4, 32, 0, 2, 300}}) {
            if (!cpu::isaSupported(isa)) continue;
            const int positions = c.start + c.tokens;
            const std::size_t H = static_cast<std::size_t>(c.heads), L = static_cast<std::size_t>(c.latent);
            const std::size_t R = static_cast<std::size_t>(c.rope);
            std::vector<float> qLatent(c.tokens * H * L), qRope(c.tokens * H * R + 1), latentRows(positions * L), ropeRows(positions * R),
                out(c.tokens * H * L);
            for (auto* v : {&qLatent, &qRope, &latentRows, &ropeRows})
                for (float& x : *v) x = normal(rng) * 0.3f;
            const Quantized lat = quantize(latentRows, c.latent, c.latent);
            const Quantized rope = c.rope ? quantize(ropeRows, c.rope, c.rope) : Quantized{{0}, std::vector<float>(positions, 0.0f), {}};
            cpu::MlaAttentionArgs a;
            a.qLatent = qLatent.data();
            a.qRope = qRope.data();
            a.qRopeHead = R;
            a.latentCodes = lat.codes.data();
            a.latentScales = lat.scales.data();
            a.ropeCodes = rope.codes.data();
            a.ropeScales = rope.scales.data();
            a.tokens = c.tokens;
            a.start = c.start;
            a.heads = c.heads;
            a.latent = c.latent;
            a.ropeDim = c.rope;
            a.scale = 1.0f / std::sqrt(static_cast<float>(c.latent));
            a.out = out.data();
            if (isa == cpu::Isa::Avx512) cpu::mlaAttentionAvx512(a, pool);
            else cpu::mlaAttentionAvx2(a, pool);
            double worst = 0;
            for (int t = 0; t < c.tokens; ++t)
                for (int h = 0; h < c.heads; ++h) {
                    const auto score = [&](int j) {
                        double s = 0;
                        for (std::size_t d = 0; d < L; ++d) s += double(qLatent[(t * H + h) * L + d]) * lat.values[j * L + d];
                        for (std::size_t d = 0; d < R; ++d) s += double(qRope[(t * H + h) * R + d]) * rope.values[j * R + d];
                        return s * a.scale;
                    };
                    const auto value = [&](int j, int d) { return double(lat.values[j * L + d]); };
                    worst = std::max(worst, worstAgainstSoftmax(0, c.start + t, c.latent, score, value, &out[(t * H + h) * L]));
                }
            QVERIFY2(worst < 2e-5, qPrintable(QString("%1: MLA %2 heads, latent %3 + rope %4: worst %5")
                                                  .arg(QString::fromUtf8(cpu::isaName(isa))).arg(c.heads).arg(c.latent)
                                                  .arg(c.rope).arg(worst)));
        }
    }

    // 384 teacher-forced tokens (seeded random ids) and 8 decode steps: every row of the int8 cache's logits
    // against the float32 cache's. Measured (2026-12-04, AVX-512): median relative L2 4.6e-4 (Kimi-K2 layout)
    // to 6.3e-3 (gpt-oss) and top-1 98.7-99.8% at 600 tokens (docs/BENCHMARKS.md); the bounds, median < 2e-2
    // and top-1 >= 95%, leave 3x and more for other CPUs' rounding while catching a misread cache (a wrong
    // scale or head gives errors of order 1 and top-1 near chance).
    void logitsStayCloseToTheFloatCache_data() {
        QTest::addColumn<QString>("fixture");
        for (const char* f : {"tiny-qwen3moe", "tiny-deepseekv2", "tiny-gpt-oss", "tiny-glm4moe", "tiny-mixtral"})
            QTest::newRow(f) << QString(f);
    }
    void logitsStayCloseToTheFloatCache() {
        QFETCH(QString, fixture);
        auto f32 = load(fixture, KvCacheType::Float32);
        auto int8 = load(fixture, KvCacheType::Int8);
        const std::size_t vocab = static_cast<std::size_t>(f32->info().vocabSize);
        const std::vector<int> prompt = randomIds(384, static_cast<int>(vocab), 5), steps = randomIds(8, static_cast<int>(vocab), 6);
        auto a = f32->newSession(), b = int8->newSession();
        std::vector<float> rowsA = a->append(prompt, Logits::All), rowsB = b->append(prompt, Logits::All);
        for (const int token : steps) {
            const std::vector<float>& x = a->append(std::span<const int>(&token, 1));
            rowsA.insert(rowsA.end(), x.begin(), x.end());
            const std::vector<float>& y = b->append(std::span<const int>(&token, 1));
            rowsB.insert(rowsB.end(), y.begin(), y.end());
        }
        const std::size_t rows = rowsA.size() / vocab;
        std::vector<double> errors;
        int agree = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            errors.push_back(relativeL2(&rowsB[r * vocab], &rowsA[r * vocab], vocab));
            agree += argmax(&rowsA[r * vocab], vocab) == argmax(&rowsB[r * vocab], vocab);
        }
        std::sort(errors.begin(), errors.end());
        const double median = errors[rows / 2], top1 = static_cast<double>(agree) / rows;
        qInfo("%s: %zu rows, median relative L2 %.2e, worst %.2e, top-1 %.1f%%", qPrintable(fixture), rows, median, errors.back(),
              100 * top1);
        QVERIFY2(median < 2e-2, qPrintable(QString("median %1").arg(median)));
        QVERIFY2(top1 >= 0.95, qPrintable(QString("top-1 %1").arg(top1)));
    }

    // The plain loops (TANDEM_CPU_ATTENTION=0, model/attention_*.cpp) read the int8 cache as the kernels do:
    // tandem-cli eval's logits of GQA with a window and sinks, and of MLA. Not bit for bit: the two sum in
    // other orders, and a later layer's key that lands near half a step then rounds to a neighbouring code
    // (a step is 1/127 of the head's largest value), so the rows drift apart by more than float32 rounding
    // (measured: median 1.5e-5 and 2.7e-5 relative L2, where float32 caches differ by 7e-7); a misread cache
    // (a scale of the wrong head or position) is off by 1e-2 and more.
    void plainLoopsReadTheInt8Cache_data() {
        QTest::addColumn<QString>("fixture");
        for (const char* f : {"tiny-qwen3moe", "tiny-deepseekv2", "tiny-gpt-oss"}) QTest::newRow(f) << QString(f);
    }
    void plainLoopsReadTheInt8Cache() {
        QFETCH(QString, fixture);
        if (!cpu::isaSupported(cpu::Isa::Avx2)) QSKIP("the kernels need AVX2");
        QTemporaryDir tmp;
        QFile ids(tmp.filePath("ids.txt"));
        QVERIFY(ids.open(QIODevice::WriteOnly));
        for (const int id : randomIds(300, 1024, 9)) ids.write(QByteArray::number(id) + ' ');
        ids.close();
        std::vector<float> logits[2];
        for (int plain = 0; plain < 2; ++plain) {
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.insert("TANDEM_CPU_ATTENTION", plain ? "0" : "1");
            const QString out = tmp.filePath(QString("logits%1.bin").arg(plain));
            QStringList args{"eval", "--model", fixturePath(fixture), "--ids-file", ids.fileName(), "--new-tokens", "4",
                             "--logits-out", out, "--device", "cpu", "--threads", "2", "--kv-cache", "int8"};
            if (fixture == "tiny-gpt-oss") args << "--experts" << "bf16";
            const CliRun r = runCli(args, env);
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
            logits[plain] = readFloats(out);
        }
        QCOMPARE(logits[0].size(), logits[1].size());
        const std::size_t vocab = 1024, rows = logits[0].size() / vocab;
        std::vector<double> errors;
        int agree = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            errors.push_back(relativeL2(&logits[1][r * vocab], &logits[0][r * vocab], vocab));
            agree += argmax(&logits[1][r * vocab], vocab) == argmax(&logits[0][r * vocab], vocab);
        }
        std::sort(errors.begin(), errors.end());
        QVERIFY2(errors[rows / 2] < 2e-4, qPrintable(QString("median %1").arg(errors[rows / 2])));
        QVERIFY2(agree >= static_cast<int>(rows) - 3, qPrintable(QString("top-1 agrees on %1 of %2 rows").arg(agree).arg(rows)));
    }

    // A decode batch (Transformer::forwardBatch) of int8 caches: each row as its session's own step.
    void decodeBatchReadsTheInt8Caches() {
        auto engine = load("tiny-gpt-oss", KvCacheType::Int8);
        const int vocab = engine->info().vocabSize;
        std::vector<std::unique_ptr<Session>> together, alone;
        std::vector<Session*> batch;
        for (int i = 0; i < 3; ++i) {
            const std::vector<int> prompt = randomIds(20 + 30 * i, vocab, 40 + i);
            together.push_back(engine->newSession());
            alone.push_back(engine->newSession());
            together.back()->append(prompt);
            alone.back()->append(prompt);
            batch.push_back(together.back().get());
        }
        for (int step = 0; step < 4; ++step) {
            const std::vector<int> tokens = randomIds(3, vocab, 90 + step);
            const auto rows = Session::decodeTogether(batch, tokens);
            for (int i = 0; i < 3; ++i) {
                const std::vector<float>& own = alone[i]->append(std::span<const int>(&tokens[i], 1));
                const double err = relativeL2(rows[i].data(), own.data(), own.size());
                QVERIFY2(err < 1e-5, qPrintable(QString("sequence %1 step %2: %3").arg(i).arg(step).arg(err)));
            }
        }
    }

    // The GPU path holds the cache that was asked for (its 8-bit cache since 2026-12-04): the backend is
    // asked for it and the engine counts its bytes.
    void aGpuIsAskedForTheInt8Cache() {
        const FlakyGpu gpu(1 << 30);
        auto engine = load("tiny-mixtral", KvCacheType::Int8, Device::Auto);
        QCOMPARE(engine->info().device, std::string("Stand-in GPU"));
        QCOMPARE(gpu.lastKvCache, KvCacheType::Int8);
        QCOMPARE(engine->info().kvCache, std::string("int8"));
        QCOMPARE(engine->info().kvBytesPerPosition, engine->info().kvBytesPerPositionInt8);
        QVERIFY(engine->info().kvBytesPerPositionInt8 < engine->info().kvBytesPerPositionFloat32 / 3);
        auto plain = load("tiny-mixtral", KvCacheType::Float32, Device::Auto);
        QCOMPARE(gpu.lastKvCache, KvCacheType::Float32);
        QCOMPARE(plain->info().kvCache, std::string("float32"));
    }

    // The GPU's 8-bit writes hold MLA latents of up to 1024 values and rope parts of up to 256: every model
    // we run fits (DeepSeek and Kimi: 512 and 64); a wider one is named, and the engine then asks the GPU for
    // float32 (ModelInfo::kvCacheNotice).
    void mlaRowsBeyondTheGpusInt8WritesAreNamed() {
        model::ModelConfig mla = model::loadModelConfig(test::fixturePath("tiny-deepseekv2").toStdString());
        QVERIFY(mla.attention == model::AttentionKind::Mla);
        QVERIFY(runtime::gpuInt8KvCacheLimit(mla).empty());
        mla.kvLoraRank = 512;
        mla.qkRopeHeadDim = 64;  // DeepSeek-V3's and Kimi-K2's
        QVERIFY(runtime::gpuInt8KvCacheLimit(mla).empty());
        mla.kvLoraRank = 2048;
        const std::string wide = runtime::gpuInt8KvCacheLimit(mla);
        QVERIFY2(wide.find("2048") != std::string::npos && wide.find("1024") != std::string::npos, wide.c_str());
        mla.kvLoraRank = 512;
        mla.qkRopeHeadDim = 512;
        QVERIFY(!runtime::gpuInt8KvCacheLimit(mla).empty());
        const model::ModelConfig gqa = model::loadModelConfig(test::fixturePath("tiny-mixtral").toStdString());
        QVERIFY(runtime::gpuInt8KvCacheLimit(gqa).empty());
        // The fixtures' MLA model on the stand-in GPU: asked for int8, nothing to say.
        const FlakyGpu gpu(1 << 30);
        auto engine = load("tiny-deepseekv2", KvCacheType::Int8, Device::Auto);
        QCOMPARE(gpu.lastKvCache, KvCacheType::Int8);
        QCOMPARE(engine->info().kvCache, std::string("int8"));
        QVERIFY(engine->info().kvCacheNotice.empty());
    }
};

QTEST_GUILESS_MAIN(KvCacheInt8Test)
#include "tst_kv_cache_int8.moc"
