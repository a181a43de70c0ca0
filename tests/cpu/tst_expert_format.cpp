// The packed expert layout: its geometry for real and awkward shapes, packing and reading back,
// packing from checkpoint matrices, and use straight from a mapped file.
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "cpu/expert_pack.h"
#include "cpu/half_float.h"
#include "cpu/moe/moe_layer.h"
#include "io/mapped_file.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem::cpu;

namespace {

struct Aligned {
    explicit Aligned(std::size_t n) : p(static_cast<std::byte*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))) {}
    ~Aligned() { std::free(p); }
    std::byte* p;
};

struct RandomExpert {
    RandomExpert(int hidden, int inter, unsigned seed) : hidden(hidden), inter(inter), gate(hidden * inter), up(gate.size()), down(gate.size()) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> n(0.0f, 0.02f);
        for (auto* m : {&gate, &up, &down})
            for (float& v : *m) v = n(rng);
    }
    ExpertRows rows() const {
        auto reader = [](const std::vector<float>& m, int cols) {
            return [&m, cols](std::int64_t r, float* o) { std::copy_n(m.data() + r * cols, cols, o); };
        };
        return {reader(gate, hidden), reader(up, hidden), reader(down, inter)};
    }
    int hidden, inter;
    std::vector<float> gate, up, down;
};

// One expert of gpt-oss's checkpoint in MXFP4: gate_up_proj_blocks [2I, H/32, 16] with rows
// interleaved (2i gate, 2i + 1 up), its scales [2I, H/32], down_proj_blocks [H, I/32, 16] and scales
// [H, I/32]; `experts` of them back to back as in the checkpoint. Random nibbles, and scales around
// 2^0 with the extremes 0, 1 and `largest` (E8M0's largest is 254, whose values from 2 up are past
// float32's range) sprinkled in.
struct Mxfp4Checkpoint {
    Mxfp4Checkpoint(int hidden, int inter, int experts, unsigned seed, int largest = 254)
        : hidden(hidden), inter(inter), gateUpBlocks(static_cast<std::size_t>(experts) * 2 * inter * hidden / 2),
          gateUpScales(static_cast<std::size_t>(experts) * 2 * inter * hidden / 32), downBlocks(static_cast<std::size_t>(experts) * hidden * inter / 2),
          downScales(static_cast<std::size_t>(experts) * hidden * inter / 32) {
        std::mt19937 rng(seed);
        for (auto* v : {&gateUpBlocks, &downBlocks})
            for (auto& b : *v) b = static_cast<std::uint8_t>(rng());
        for (auto* v : {&gateUpScales, &downScales})
            for (auto& e : *v) {
                const unsigned r = rng() % 100;
                e = static_cast<std::uint8_t>(r == 0 ? 0 : r == 1 ? 1 : r == 2 ? largest : 118 + rng() % 14);
            }
    }
    // The matrices of expert e, as the lead's converter passes them (expert_pack.h).
    Mxfp4Matrix gate(int e) const {
        const std::size_t rowBytes = hidden / 2, rowScales = hidden / 32;
        return {gateUpBlocks.data() + e * 2 * inter * rowBytes, 2 * rowBytes, gateUpScales.data() + e * 2 * inter * rowScales, 2 * rowScales,
                inter, hidden};
    }
    Mxfp4Matrix up(int e) const {
        Mxfp4Matrix m = gate(e);
        m.blocks += hidden / 2;
        m.scales += hidden / 32;
        return m;
    }
    Mxfp4Matrix down(int e) const {
        const std::size_t rowBytes = inter / 2, rowScales = inter / 32;
        return {downBlocks.data() + e * hidden * rowBytes, rowBytes, downScales.data() + e * hidden * rowScales, rowScales, hidden, inter};
    }
    // Row r of a matrix dequantized as transformers' convert_moe_packed_tensors does: element 2b of a
    // group the low nibble of byte b, 2b + 1 the high one, times 2^(e - 127).
    static std::vector<float> dequantRow(const Mxfp4Matrix& m, int r) {
        static constexpr float kFp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
        std::vector<float> out(m.cols);
        for (int k = 0; k < m.cols; ++k) {
            const std::uint8_t byte = m.blocks[r * m.blockRowStride + k / 2];
            const int e = m.scales[r * m.scaleRowStride + k / 32];
            out[k] = std::ldexp(kFp4[k % 2 ? byte >> 4 : byte & 0xf], e - 127);
        }
        return out;
    }
    int hidden, inter;
    std::vector<std::uint8_t> gateUpBlocks, gateUpScales, downBlocks, downScales;
};

}  // namespace

class TestExpertFormat : public QObject {
    Q_OBJECT

private slots:
    void geometry_data() {
        QTest::addColumn<int>("hidden");
        QTest::addColumn<int>("inter");
        QTest::newRow("fixture 96x64") << 96 << 64;
        QTest::newRow("deepseek-v2-lite") << 2048 << 1408;
        QTest::newRow("deepseek-v3") << 7168 << 2048;
        QTest::newRow("qwen3-30b-a3b") << 2048 << 768;
        QTest::newRow("odd 33x65") << 33 << 65;
        QTest::newRow("one") << 1 << 1;
    }

    void geometry() {
        QFETCH(int, hidden);
        QFETCH(int, inter);
        for (const ExpertType type : kAllExpertTypes) {
            const ExpertLayout l = ExpertLayout::make(type, hidden, inter);
            QVERIFY(l.hiddenPad >= hidden && l.hiddenPad % l.kBlock == 0 && l.hiddenPad - hidden < l.kBlock);
            QVERIFY(l.interPad >= inter && l.interPad % 64 == 0 && l.interPad - inter < 64);
            QCOMPARE(l.gateUpPanels * kPanelRows, l.interPad);
            QCOMPARE(l.downPanels, (hidden + 15) / 16);
            int cols = 0;
            for (int c = 0; c < l.chunks; ++c) {
                QCOMPARE(l.chunkOffset(c) % 64, std::size_t{0});
                QCOMPARE(l.chunkOffset(c + 1) - l.chunkOffset(c), l.downPanels * l.chunkPanelBytes(c));
                cols += l.chunkCols(c);
            }
            QCOMPARE(cols, l.interPad);
            QCOMPARE(l.gateUpPanelBytes % 64, std::size_t{0});
            QCOMPARE(l.downOffset, l.gateUpPanels * l.gateUpPanelBytes);
            QCOMPARE(l.expertBytes % kExpertAlignment, std::size_t{0});
            QVERIFY(l.dataBytes <= l.expertBytes);
        }
    }

    void bitsPerWeight() {
        // Without padding the layouts store exactly 16, 8 (+ one float per row) and 4.5 bits a weight.
        const double weights = 3.0 * 2048 * 1408;
        QCOMPARE(static_cast<double>(ExpertLayout::make(ExpertType::BF16, 2048, 1408).dataBytes), weights * 2);
        QCOMPARE(static_cast<double>(ExpertLayout::make(ExpertType::INT8, 2048, 1408).dataBytes), weights + 4.0 * (2 * 1408 + 2048));
        QCOMPARE(static_cast<double>(ExpertLayout::make(ExpertType::INT4, 2048, 1408).dataBytes), weights * 4.5 / 8);
        QCOMPARE(static_cast<double>(ExpertLayout::make(ExpertType::MXFP4, 2048, 1408).dataBytes), weights * 4.5 / 8);
        // gpt-oss (io/expert_layout.h's roofline): 13,996,800 bytes an expert.
        QCOMPARE(ExpertLayout::make(ExpertType::MXFP4, 2880, 2880).dataBytes, std::size_t{13996800});
        QCOMPARE(*parseExpertType("mxfp4"), ExpertType::MXFP4);
        QCOMPARE(std::string(expertTypeName(ExpertType::MXFP4)), std::string("mxfp4"));
    }

    void badDimensionsAreRejected() {
        QVERIFY_THROWS_EXCEPTION(tandem::Error, ExpertLayout::make(ExpertType::BF16, 0, 64));
        QVERIFY_THROWS_EXCEPTION(tandem::Error, ExpertLayout::make(ExpertType::INT4, 64, -1));
    }

    void packAndReadBack_data() {
        QTest::addColumn<int>("type");
        QTest::newRow("bf16") << int(ExpertType::BF16);
        QTest::newRow("int8") << int(ExpertType::INT8);
        QTest::newRow("int4") << int(ExpertType::INT4);
        QTest::newRow("mxfp4") << int(ExpertType::MXFP4);
    }

    void packAndReadBack() {
        QFETCH(int, type);
        const RandomExpert w(130, 200, 7);
        const ExpertLayout l = ExpertLayout::make(ExpertType(type), w.hidden, w.inter);
        Aligned a(l.expertBytes), b(l.expertBytes);
        std::memset(a.p, 0xab, l.expertBytes);
        packExpert(l, w.rows(), a.p);
        packExpert(l, w.rows(), b.p);
        QVERIFY2(std::memcmp(a.p, b.p, l.expertBytes) == 0, "packing is not deterministic (or leaves padding unwritten)");
        for (std::size_t i = l.dataBytes; i < l.expertBytes; ++i) QCOMPARE(int(a.p[i]), 0);

        // Each weight within the format's rounding of the original.
        std::vector<float> row(std::max(w.hidden, w.inter));
        auto check = [&](ExpertMatrix m, const std::vector<float>& orig, int rows, int cols) {
            for (int r = 0; r < rows; ++r) {
                unpackExpertRow(l, a.p, m, r, row.data());
                const float* o = orig.data() + static_cast<std::size_t>(r) * cols;
                float absMax = 0;
                for (int k = 0; k < cols; ++k) absMax = std::max(absMax, std::fabs(o[k]));
                for (int k = 0; k < cols; ++k) {
                    float bound;
                    if (l.type == ExpertType::BF16) {
                        bound = std::fabs(o[k]) / 256;
                    } else if (l.type == ExpertType::INT8) {
                        bound = absMax / 127 / 2 * 1.001f;
                    } else if (l.type == ExpertType::MXFP4) {
                        // Scale s: the smallest power of two with the group's largest magnitude <= 6 s;
                        // e2m1's steps are s/2 up to 2s, s up to 4s, 2s up to 6s: half a step off at most.
                        float g = 0;
                        for (int i = k / 32 * 32; i < std::min(cols, k / 32 * 32 + 32); ++i) g = std::max(g, std::fabs(o[i]));
                        const float scale = std::exp2(std::ceil(std::log2(g / 6)));
                        const float t = std::fabs(o[k]) / scale;
                        bound = (t <= 2 ? 0.25f : t <= 4 ? 0.5f : 1.0f) * scale * 1.0001f;
                    } else {
                        float g = 0;
                        for (int i = k / 32 * 32; i < std::min(cols, k / 32 * 32 + 32); ++i) g = std::max(g, std::fabs(o[i]));
                        bound = g / 7 / 2 * 1.01f + 1e-9f;
                    }
                    if (std::fabs(row[k] - o[k]) > bound)
                        QFAIL(qPrintable(QString("row %1 col %2: %3 packed as %4").arg(r).arg(k).arg(o[k]).arg(row[k])));
                }
            }
        };
        check(ExpertMatrix::Gate, w.gate, w.inter, w.hidden);
        check(ExpertMatrix::Up, w.up, w.inter, w.hidden);
        check(ExpertMatrix::Down, w.down, w.hidden, w.inter);
    }

    void packFromCheckpointMatrices() {
        // bf16 and FP8-with-block-scales views pack to the same bytes as their float rows do.
        const int hidden = 96, inter = 64;
        std::mt19937 rng(3);
        std::vector<std::uint16_t> bf16(hidden * inter);
        for (auto& v : bf16) v = floatToBf16(std::normal_distribution<float>(0, 0.02f)(rng));
        std::vector<std::uint8_t> fp8(hidden * inter);
        for (auto& v : fp8) v = static_cast<std::uint8_t>(rng() % 0x7e);  // finite e4m3 values
        std::vector<float> blockScales = {0.5f, 0.25f};  // [ceil(rows/128), ceil(cols/128)] per matrix
        auto matrix = [&](tandem::io::DType t, int rows, int cols, const void* data) {
            WeightMatrix m;
            m.dtype = t;
            m.rows = rows;
            m.cols = cols;
            m.data = static_cast<const std::byte*>(data);
            if (t == tandem::io::DType::F8_E4M3) {
                m.blockScales = blockScales.data();
                m.scaleCols = (cols + 127) / 128;
            }
            return m;
        };
        for (const auto dtype : {tandem::io::DType::BF16, tandem::io::DType::F8_E4M3}) {
            const void* data = dtype == tandem::io::DType::BF16 ? static_cast<const void*>(bf16.data()) : fp8.data();
            const WeightMatrix gate = matrix(dtype, inter, hidden, data), up = gate, down = matrix(dtype, hidden, inter, data);
            const ExpertLayout l = ExpertLayout::make(ExpertType::INT4, hidden, inter);
            Aligned a(l.expertBytes), b(l.expertBytes);
            packExpert(l, gate, up, down, a.p);
            packExpert(l,
                       {[&](std::int64_t r, float* o) { gate.dequantRow(r, o); }, [&](std::int64_t r, float* o) { up.dequantRow(r, o); },
                        [&](std::int64_t r, float* o) { down.dequantRow(r, o); }},
                       b.p);
            QVERIFY(std::memcmp(a.p, b.p, l.expertBytes) == 0);
            QVERIFY_THROWS_EXCEPTION(tandem::Error, packExpert(l, down, up, down, a.p));  // wrong shape
        }
    }

    // gpt-oss's MXFP4 experts packed straight from the checkpoint's blocks and scales: every weight
    // read back is the checkpoint's value exactly (as transformers dequantizes it), for the second of
    // two experts (the offsets) with awkward row counts (a part panel of gate/up, a narrow last chunk).
    void packMxfp4FromCheckpointBlocks() {
        const int hidden = 160, inter = 96;
        const Mxfp4Checkpoint ck(hidden, inter, 2, 5);
        const ExpertLayout l = ExpertLayout::make(ExpertType::MXFP4, hidden, inter);
        Aligned a(l.expertBytes), b(l.expertBytes);
        std::memset(a.p, 0xcd, l.expertBytes);
        packExpertMxfp4(l, ck.gate(1), ck.up(1), ck.down(1), a.p);
        for (std::size_t i = l.dataBytes; i < l.expertBytes; ++i) QCOMPARE(int(a.p[i]), 0);
        std::vector<float> row(std::max(hidden, inter));
        auto same = [&](const std::byte* packed, ExpertMatrix m, const Mxfp4Matrix& src) {
            for (int r = 0; r < src.rows; ++r) {
                unpackExpertRow(l, packed, m, r, row.data());
                const std::vector<float> want = Mxfp4Checkpoint::dequantRow(src, r);
                for (int k = 0; k < src.cols; ++k)
                    if (row[k] != want[k])  // exactly, -0 and 0 alike
                        QFAIL(qPrintable(QString("matrix %1 row %2 col %3: %4 read back as %5").arg(int(m)).arg(r).arg(k).arg(want[k]).arg(row[k])));
            }
        };
        same(a.p, ExpertMatrix::Gate, ck.gate(1));
        same(a.p, ExpertMatrix::Up, ck.up(1));
        same(a.p, ExpertMatrix::Down, ck.down(1));

        // The dequantized values as float rows pack back to the same values: MXFP4 values are exact
        // under the rounding packer (it may pick a smaller scale for a group, never a lossy one). Finite
        // values only: the largest scale 2^100.
        const Mxfp4Checkpoint finite(hidden, inter, 2, 5, 227);
        std::vector<std::vector<float>> mats(3);
        const Mxfp4Matrix src[3] = {finite.gate(1), finite.up(1), finite.down(1)};
        for (int i = 0; i < 3; ++i)
            for (int r = 0; r < src[i].rows; ++r) {
                const auto v = Mxfp4Checkpoint::dequantRow(src[i], r);
                mats[i].insert(mats[i].end(), v.begin(), v.end());
            }
        auto reader = [&](int i, int cols) { return [&, i, cols](std::int64_t r, float* o) { std::copy_n(mats[i].data() + r * cols, cols, o); }; };
        packExpert(l, {reader(0, hidden), reader(1, hidden), reader(2, inter)}, b.p);
        same(b.p, ExpertMatrix::Gate, src[0]);
        same(b.p, ExpertMatrix::Up, src[1]);
        same(b.p, ExpertMatrix::Down, src[2]);
    }

    void mxfp4PackingErrors() {
        const int hidden = 64, inter = 64;
        Mxfp4Checkpoint ck(hidden, inter, 1, 6);
        const ExpertLayout l = ExpertLayout::make(ExpertType::MXFP4, hidden, inter);
        Aligned a(l.expertBytes);
        auto expectError = [&](const ExpertLayout& layout, const Mxfp4Matrix& g, const Mxfp4Matrix& u, const Mxfp4Matrix& d, const char* part) {
            try {
                packExpertMxfp4(layout, g, u, d, a.p);
                QFAIL(qPrintable(QString("accepted: ") + part));
            } catch (const tandem::Error& e) {
                QVERIFY2(QString(e.what()).contains(part), e.what());
            }
        };
        expectError(ExpertLayout::make(ExpertType::INT4, hidden, inter), ck.gate(0), ck.up(0), ck.down(0), "mxfp4 expert layout");
        Mxfp4Matrix shortUp = ck.up(0);
        shortUp.rows = 32;
        expectError(l, ck.gate(0), shortUp, ck.down(0), "up_proj is 32x64, expected 64x64");
        Mxfp4Matrix narrow = ck.gate(0);
        narrow.cols = 48;
        expectError(ExpertLayout::make(ExpertType::MXFP4, 48, inter), narrow, narrow, ck.down(0), "groups of 32");
        ck.downScales[5] = 255;
        expectError(l, ck.gate(0), ck.up(0), ck.down(0), "0xff (NaN)");
    }

    void nanIsRejected() {
        RandomExpert w(64, 64, 1);
        w.up[77] = NAN;
        const ExpertLayout l = ExpertLayout::make(ExpertType::BF16, 64, 64);
        Aligned a(l.expertBytes);
        try {
            packExpert(l, w.rows(), a.p);
            QFAIL("a NaN weight was packed");
        } catch (const tandem::Error& e) {
            QVERIFY2(QString(e.what()).contains("up weight row 1"), e.what());
        }
    }

    void runsStraightFromAMappedFile() {
        // Offsets only: packed bytes written to a file and mapped give the same layer output.
        const int experts = 3, hidden = 96, inter = 64, tokens = 4, topK = 2;
        const ExpertLayout l = ExpertLayout::make(ExpertType::INT8, hidden, inter);
        Aligned bytes(l.expertBytes * experts);
        for (int e = 0; e < experts; ++e) packExpert(l, RandomExpert(hidden, inter, 10 + e).rows(), bytes.p + e * l.expertBytes);
        QTemporaryDir dir;
        const QString path = dir.filePath("layer.bin");
        QVERIFY(tandem::test::writeFile(path, QByteArray(reinterpret_cast<const char*>(bytes.p), static_cast<qsizetype>(l.expertBytes * experts))));
        const tandem::io::MappedFile mapped(path.toStdString());

        ExpertPool pool({.threads = 2});
        const PackedMoeLayer inMemory(l, experts, bytes.p, pool.topology());
        const PackedMoeLayer fromFile(l, experts, mapped.bytes().data(), pool.topology());
        std::vector<float> x(tokens * hidden), a(x.size(), 0.0f), b(x.size(), 0.0f);
        for (int i = 0; i < tokens * hidden; ++i) x[i] = std::sin(0.1f * i);
        const std::vector<int> ids = {0, 1, 2, 0, 1, 2, 2, 1};
        const std::vector<float> weights(tokens * topK, 0.5f);
        MoeRunner runner(pool);
        runner.run(inMemory, {x.data(), std::size_t(hidden), tokens, ids.data(), weights.data(), topK, a.data(), std::size_t(hidden)});
        runner.run(fromFile, {x.data(), std::size_t(hidden), tokens, ids.data(), weights.data(), topK, b.data(), std::size_t(hidden)});
        QVERIFY(a == b);
        QVERIFY(std::any_of(a.begin(), a.end(), [](float v) { return v != 0.0f; }));
    }
};

QTEST_GUILESS_MAIN(TestExpertFormat)
#include "tst_expert_format.moc"
