// The reference CPU path: thread pool, matmul over every weight type, row-wise ops.
#include <QTest>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

#include "cpu/cpu_features.h"
#include "cpu/dense/dense_avx512.h"
#include "cpu/dense/gqa_attention.h"
#include "cpu/kernels/activation_quant.h"
#include "cpu/dense/matmul.h"
#include "cpu/dense/packed_matrix.h"
#include "cpu/dense/quantize_dense.h"
#include "cpu/dense/ops.h"
#include "cpu/pool/thread_pool.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::cpu;

namespace {

// The largest difference between out[0, dim) and the softmax over positions [first, last] of score(j)
// weighting value(j, d), all in double.
template <class Score, class Value>
double worstAgainstDirectSoftmax(int first, int last, int dim, Score score, Value value, const float* out,
                                 const float* sink = nullptr) {
    std::vector<double> w;
    double m = sink ? *sink : -1e300;
    for (int j = first; j <= last; ++j) {
        w.push_back(score(j));
        m = std::max(m, w.back());
    }
    double l = sink ? std::exp(*sink - m) : 0;  // a sink joins the sum with no value
    for (double& x : w) l += (x = std::exp(x - m));
    double worst = 0;
    for (int d = 0; d < dim; ++d) {
        double want = 0;
        for (int j = first; j <= last; ++j) want += w[j - first] / l * value(j, d);
        worst = std::max(worst, std::abs(want - out[d]));
    }
    return worst;
}

// Each int8 kernel this CPU runs against the exact integer sums, for `tokens` tokens of rows of `cols` columns.
void int8DenseSumsExactly(int cols, int tokens) {
    const int rows = 23, padded = (cols + 63) / 64 * 64;
    std::mt19937 rng(5);
    std::vector<std::int8_t> w(rows * cols);
    for (auto& v : w) v = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
    std::vector<float> rowScales(rows), x(tokens * cols), scales(tokens);
    for (int r = 0; r < rows; ++r) rowScales[r] = 0.01f * static_cast<float>(r + 1);
    std::uniform_real_distribution<float> u(-2, 2);
    for (auto& v : x) v = u(rng);
    std::vector<std::int8_t> q(tokens * padded);
    std::vector<std::int32_t> sums(tokens), groups(padded / 32);
    for (int t = 0; t < tokens; ++t) {
        activationToInt8Scalar(x.data() + t * cols, cols, padded, q.data() + t * padded, &scales[t], groups.data());
        sums[t] = 0;
        for (const auto g : groups) sums[t] += g;
    }
    const Int8Rows xq{q.data(), static_cast<std::size_t>(padded), scales.data(), sums.data()};
    for (const Isa isa : {Isa::Avx512, Isa::Avx2}) {
        if (!isaSupported(isa)) continue;
        std::vector<float> y(tokens * rows, -1.0f);
        if (isa == Isa::Avx512) denseInt8Avx512(w.data(), rowScales.data(), cols, 0, rows, xq, tokens, y.data(), rows);
        else denseInt8Avx2(w.data(), rowScales.data(), cols, 0, rows, xq, tokens, y.data(), rows);
        for (int r = 0; r < rows; ++r)
            for (int t = 0; t < tokens; ++t) {
                std::int64_t sum = 0;
                for (int c = 0; c < cols; ++c) sum += std::int64_t{w[r * cols + c]} * q[t * padded + c];
                const float want = static_cast<float>(sum) * rowScales[r] * scales[t];
                QVERIFY2(y[t * rows + r] == want, qPrintable(QString("%1, %2 columns, %3 tokens: row %4 token %5: %6 against %7")
                                                                 .arg(QString::fromUtf8(isaName(isa))).arg(cols).arg(tokens)
                                                                 .arg(r).arg(t).arg(y[t * rows + r]).arg(want)));
            }
    }
}

}  // namespace

class ReferenceKernelsTest : public QObject {
    Q_OBJECT
private slots:
    void parallelForCoversEveryIndexOnce() {
        ThreadPool pool(3);
        QCOMPARE(pool.size(), 3);
        for (const std::size_t n : {1u, 7u, 100u, 10007u}) {
            std::vector<std::atomic<int>> hits(n);
            pool.parallelFor(n, 3, [&](std::size_t b, std::size_t e) {
                for (std::size_t i = b; i < e; ++i) hits[i]++;
            });
            for (std::size_t i = 0; i < n; ++i) QCOMPARE(hits[i].load(), 1);
        }
    }

    void parallelForRethrows() {
        ThreadPool pool(2);
        QVERIFY_THROWS_EXCEPTION(Error, pool.parallelFor(1000, 1, [](std::size_t b, std::size_t) {
            if (b >= 500) throw Error("boom");
        }));
        std::atomic<int> after{0};
        pool.parallelFor(10, 1, [&](std::size_t b, std::size_t e) { after += static_cast<int>(e - b); });
        QCOMPARE(after.load(), 10);  // the pool still works
    }

    void matmulEveryType() {
        // A 37x45 weight (odd sizes) in each type, against a double-precision product of the same values;
        // 9 tokens make blocks of 4 and a remainder in the blocked paths.
        const int rows = 37, cols = 45, tokens = 9;
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1, 1);
        std::vector<float> x(tokens * cols);
        for (auto& v : x) v = u(rng);

        std::vector<std::uint16_t> bf16(rows * cols);
        std::vector<float> f32(rows * cols);
        std::vector<std::uint8_t> f8(rows * cols);
        std::vector<std::int8_t> i8(rows * cols);
        std::vector<float> rowScales(rows);
        for (int i = 0; i < rows * cols; ++i) {
            bf16[i] = static_cast<std::uint16_t>(rng() & 0x3fff) | 0x3c00;  // values in [2^-7, 2)
            f32[i] = u(rng);
            f8[i] = static_cast<std::uint8_t>(rng() % 0x7e);
            i8[i] = static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127);
        }
        for (int r = 0; r < rows; ++r) rowScales[r] = 0.001f * static_cast<float>(r + 1);
        const float scales[2] = {0.5f, 3.0f};  // one column block of 32 per row block of 32, then the rest

        ThreadPool pool(2);
        for (const auto type : {io::DType::F32, io::DType::BF16, io::DType::F8_E4M3, io::DType::I8}) {
            WeightMatrix w;
            w.dtype = type;
            w.rows = rows;
            w.cols = cols;
            w.data = type == io::DType::F32 ? reinterpret_cast<const std::byte*>(f32.data())
                     : type == io::DType::BF16 ? reinterpret_cast<const std::byte*>(bf16.data())
                     : type == io::DType::I8   ? reinterpret_cast<const std::byte*>(i8.data())
                                               : reinterpret_cast<const std::byte*>(f8.data());
            if (type == io::DType::I8) w.rowScales = rowScales.data();
            if (type == io::DType::F8_E4M3) {
                w.blockRows = 32;
                w.blockCols = 64;
                w.blockScales = scales;
                w.scaleCols = 1;
            }
            std::vector<float> y(tokens * rows);
            matmul(w, x.data(), cols, tokens, y.data(), rows, pool);
            for (int r = 0; r < rows; ++r) {
                for (int t = 0; t < tokens; ++t) {
                    double expected = 0, magnitude = 0;
                    for (int c = 0; c < cols; ++c) {
                        const int i = r * cols + c;
                        const double wv = type == io::DType::F32    ? f32[i]
                                          : type == io::DType::BF16 ? io::bf16ToFloat(bf16[i])
                                          : type == io::DType::I8   ? static_cast<double>(i8[i]) * rowScales[r]
                                                                    : io::f8e4m3ToFloat(f8[i]) * scales[r / 32];
                        expected += wv * x[t * cols + c];
                        magnitude += std::abs(wv * x[t * cols + c]);
                    }
                    // Int8 weights meet int8 activations (one scale per token: half a step of 1/127 of the
                    // largest), so the bound is on the products' magnitudes; the other types float32 rounding.
                    const double bound = type == io::DType::I8 ? 1e-2 * magnitude : 1e-4 * (1 + std::abs(expected));
                    QVERIFY2(std::abs(y[t * rows + r] - expected) < bound,
                             qPrintable(QString("type %1 row %2 token %3").arg(int(type)).arg(r).arg(t)));
                }
            }
            // A slice of rows (how MLA reads one head of kv_b) gives the same rows of the product.
            const WeightMatrix slice = w.rowSlice(5, 19);
            std::vector<float> ys(tokens * 19);
            matmul(slice, x.data(), cols, tokens, ys.data(), 19, pool);
            for (int r = 0; r < 19; ++r)
                for (int t = 0; t < tokens; ++t) QCOMPARE(ys[t * 19 + r], y[t * rows + r + 5]);
        }
    }

    // Dense weights quantized at load (quantize_dense.h): each value within half a step of its row's scale,
    // the row's largest magnitude exactly 127 steps, an all-zero row scale 0; read back through dequantRow.
    // The AVX-512 and AVX2 attention (chunks of 256 positions combined per head, each key row read once per group)
    // against the plain softmax over every position: long contexts (several chunks), a sliding window, a
    // prompt of several tokens, head groups of 1, 4 and 8. Prompts of 16 tokens and more take the tiled
    // prompt kernel (gqa_prompt_kernel.h): from position 0 and after a cache, tiles and row counts with
    // remainders, a window narrower than a key block (rows that see none of a block), head sizes of 3 and 6
    // vectors, sinks.
    void gqaAttentionMatchesTheDirectSoftmax() {
        QVERIFY(gqaAttentionFits(32, 4, 128));
        QVERIFY(!gqaAttentionFits(32, 4, 72));   // head size no multiple of 16
        QVERIFY(!gqaAttentionFits(64, 2, 128));  // 32 heads a group
        // Each instruction set's kernel this CPU runs (the plain loop, model/attention_gqa.cpp, is the
        // fixtures' to check).
        ThreadPool pool(3);
        std::mt19937 rng(11);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        // `every`: the reference checks every every-th token and head (the last case's partials pass the
        // kernel's 32 MB, so its tokens run in two batches).
        struct Case { int heads, kvHeads, headDim, tokens, start, window, every; bool sinks = false; };
        for (const Isa isa : {Isa::Avx512, Isa::Avx2})
        for (const Case c : {Case{32, 4, 128, 1, 1300, 0, 1}, Case{8, 8, 64, 5, 700, 0, 1}, Case{16, 4, 32, 3, 600, 300, 1},
                             Case{8, 2, 16, 1, 0, 0, 1}, Case{32, 4, 128, 64, 8000, 0, 9}, Case{8, 2, 64, 100, 0, 0, 1},
                             Case{16, 4, 32, 90, 200, 50, 1, true}, Case{6, 6, 48, 43, 30, 0, 1}, Case{12, 4, 96, 37, 0, 0, 1, true}}) {
            if (!isaSupported(isa)) continue;
            const int positions = c.start + c.tokens;
            const std::size_t qDim = static_cast<std::size_t>(c.heads) * c.headDim;
            const std::size_t kvDim = static_cast<std::size_t>(c.kvHeads) * c.headDim;
            std::vector<float> q(c.tokens * qDim), keys(positions * kvDim), values(positions * kvDim), out(c.tokens * qDim),
                sinks(c.heads);
            for (auto* v : {&q, &keys, &values, &sinks})
                for (float& x : *v) x = normal(rng);
            GqaAttentionArgs a;
            a.sinks = c.sinks ? sinks.data() : nullptr;
            a.q = q.data();
            a.keys = keys.data();
            a.values = values.data();
            a.tokens = c.tokens;
            a.start = c.start;
            a.window = c.window;
            a.heads = c.heads;
            a.kvHeads = c.kvHeads;
            a.headDim = c.headDim;
            a.scale = 1.0f / std::sqrt(static_cast<float>(c.headDim));
            a.out = out.data();
            if (isa == Isa::Avx512) gqaAttentionAvx512(a, pool);
            else gqaAttentionAvx2(a, pool);
            double worst = 0;
            for (int t = 0; t < c.tokens; t += c.every)
                for (int h = 0; h < c.heads; h += c.every) {
                    const int pos = c.start + t, first = c.window ? std::max(0, pos - c.window + 1) : 0;
                    const int g = h / (c.heads / c.kvHeads);
                    const auto score = [&](int j) {
                        double s = 0;
                        for (int d = 0; d < c.headDim; ++d)
                            s += double(q[t * qDim + h * c.headDim + d]) * keys[j * kvDim + g * c.headDim + d];
                        return s * a.scale;
                    };
                    const auto value = [&](int j, int d) { return double(values[j * kvDim + g * c.headDim + d]); };
                    worst = std::max(worst, worstAgainstDirectSoftmax(first, pos, c.headDim, score, value,
                                                                      &out[t * qDim + h * c.headDim], a.sinks ? &sinks[h] : nullptr));
                }
            QVERIFY2(worst < 2e-5, qPrintable(QString("%1: heads %2/%3, dim %4, %5 tokens after %6: worst %7")
                                                  .arg(QString::fromUtf8(isaName(isa))).arg(c.heads).arg(c.kvHeads)
                                                  .arg(c.headDim).arg(c.tokens).arg(c.start).arg(worst)));
        }
    }

    void mlaAttentionMatchesTheDirectSoftmax() {
        QVERIFY(mlaAttentionFits(512, 64));
        QVERIFY(!mlaAttentionFits(500, 64));
        ThreadPool pool(3);
        std::mt19937 rng(12);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        // 40 heads: blocks of 16, 16 and 8; the rope queries inside wider rows (as the caller's [nope | rope]).
        // The last two are prompts (the tiled kernel): 40 heads a tile of one token, 16 heads of latent 512 four.
        struct Case { int heads, latent, rope, tokens, start; };
        for (const Isa isa : {Isa::Avx512, Isa::Avx2})
        for (const Case c : {Case{40, 64, 16, 3, 700}, Case{16, 512, 64, 1, 1300}, Case{4, 32, 16, 5, 0}, Case{4, 32, 0, 2, 300},
                             Case{40, 64, 16, 30, 100}, Case{16, 512, 64, 70, 0}}) {
            if (!isaSupported(isa)) continue;
            const int positions = c.start + c.tokens;
            const std::size_t H = static_cast<std::size_t>(c.heads), L = static_cast<std::size_t>(c.latent);
            const std::size_t R = static_cast<std::size_t>(c.rope), qRopeHead = R + 24;
            std::vector<float> qLatent(c.tokens * H * L), qRope(c.tokens * H * qRopeHead), latentRows(positions * L),
                ropeRows(positions * R + 1), out(c.tokens * H * L);
            for (auto* v : {&qLatent, &qRope, &latentRows, &ropeRows})
                for (float& x : *v) x = normal(rng) * 0.3f;
            MlaAttentionArgs a;
            a.qLatent = qLatent.data();
            a.qRope = qRope.data() + 24;
            a.qRopeHead = qRopeHead;
            a.latentRows = latentRows.data();
            a.ropeRows = ropeRows.data();
            a.tokens = c.tokens;
            a.start = c.start;
            a.heads = c.heads;
            a.latent = c.latent;
            a.ropeDim = c.rope;
            a.scale = 1.0f / std::sqrt(static_cast<float>(c.latent));
            a.out = out.data();
            if (isa == Isa::Avx512) mlaAttentionAvx512(a, pool);
            else mlaAttentionAvx2(a, pool);
            double worst = 0;
            for (int t = 0; t < c.tokens; ++t)
                for (int h = 0; h < c.heads; ++h) {
                    const auto score = [&](int j) {
                        double s = 0;
                        for (std::size_t d = 0; d < L; ++d) s += double(qLatent[(t * H + h) * L + d]) * latentRows[j * L + d];
                        for (std::size_t d = 0; d < R; ++d) s += double(a.qRope[(t * H + h) * qRopeHead + d]) * ropeRows[j * R + d];
                        return s * a.scale;
                    };
                    const auto value = [&](int j, int d) { return double(latentRows[j * L + d]); };
                    worst = std::max(worst, worstAgainstDirectSoftmax(0, c.start + t, c.latent, score, value, &out[(t * H + h) * L]));
                }
            QVERIFY2(worst < 2e-5, qPrintable(QString("%1: %2 heads, latent %3 + rope %4, %5 tokens after %6: worst %7")
                                                  .arg(QString::fromUtf8(isaName(isa))).arg(c.heads).arg(c.latent)
                                                  .arg(c.rope).arg(c.tokens).arg(c.start).arg(worst)));
        }
    }

    // Int8 weights x int8 activations on each instruction set's kernel this CPU runs: the integer sums
    // exact (a weight of -128 included, which the AVX2 kernel's sign trick must take), odd sizes for the
    // rows' tails and token blocks.
    void int8DenseKernelsSumExactly() {
        // 7 tokens (blocks of 4 and the rest) and one (decode's row-by-row kernels), rows of 77 and 300 columns.
        for (const auto& [cols, tokens] : {std::pair{77, 7}, std::pair{77, 1}, std::pair{300, 1}, std::pair{300, 7}})
        {
            int8DenseSumsExactly(cols, tokens);
            if (QTest::currentTestFailed()) return;
        }
    }

    void int8RowsRoundTrip() {
        const int rows = 5, cols = 70;
        std::vector<std::uint16_t> bf16(rows * cols, 0);
        std::mt19937 rng(3);
        std::normal_distribution<float> n(0, 0.02f);
        for (int i = cols; i < rows * cols; ++i) bf16[i] = io::floatToBf16(n(rng));  // row 0 stays zero
        WeightMatrix w;
        w.dtype = io::DType::BF16;
        w.rows = rows;
        w.cols = cols;
        w.data = reinterpret_cast<const std::byte*>(bf16.data());
        ThreadPool pool(2);
        std::vector<std::int8_t> values;
        std::vector<float> scales;
        const WeightMatrix q = quantizeRowsInt8(w.rowSlice(0, rows), values, scales, pool);
        QCOMPARE(q.dtype, io::DType::I8);
        QCOMPARE(scales[0], 0.0f);
        std::vector<float> back(cols);
        for (int r = 0; r < rows; ++r) {
            q.dequantRow(r, back.data());
            float largest = 0;
            for (int c = 0; c < cols; ++c) {
                const float v = io::bf16ToFloat(bf16[r * cols + c]);
                largest = std::max(largest, std::abs(v));
                QVERIFY(std::abs(back[c] - v) <= scales[r] * 0.5f + 1e-9f);
            }
            QCOMPARE(scales[r], largest / 127.0f);
        }
    }

    // --dense int4: a matrix packed for the expert kernels multiplies as its own dequantized rows times the
    // activations the kernels quantize (int8, a scale per token), over odd shapes (rows not a whole panel,
    // columns not a whole block or chunk) and token counts on both sides of the GEMV/GEMM switch. The
    // int8 type too, which runs the same way. A slice of a packed matrix takes the general path.
    void packedMatrixMultipliesAsItsRows() {
        ThreadPool pool(2);
        std::mt19937 rng(11);
        std::normal_distribution<float> n(0, 0.05f);
        for (const ExpertType type : {ExpertType::INT4, ExpertType::INT8})
            for (const auto& [rows, cols] : {std::pair{37, 200}, std::pair{64, 2048}, std::pair{300, 96}}) {
                std::vector<float> values(static_cast<std::size_t>(rows) * cols);
                for (float& v : values) v = n(rng);
                WeightMatrix w;
                w.rows = rows;
                w.cols = cols;
                w.data = reinterpret_cast<const std::byte*>(values.data());
                const PackedMatrix packed(type, w, pool);
                WeightMatrix p = w;
                p.packed = &packed;
                std::vector<float> row(cols);
                for (int r = 0; r < rows; r += 7) {  // dequantized rows are close to the weights
                    p.dequantRow(r, row.data());
                    for (int c = 0; c < cols; ++c)
                        QVERIFY(std::abs(row[c] - values[static_cast<std::size_t>(r) * cols + c]) <= (type == ExpertType::INT4 ? 0.05f : 0.003f));
                }
                for (const std::size_t tokens : {std::size_t{1}, std::size_t{3}, std::size_t{20}}) {
                    const std::size_t ldx = cols + 5, ldy = rows + 3;
                    std::vector<float> x(tokens * ldx), y(tokens * ldy, -7.0f);
                    for (float& v : x) v = n(rng) * 20;
                    matmul(p, x.data(), ldx, tokens, y.data(), ldy, pool);
                    for (std::size_t t = 0; t < tokens; ++t) {
                        std::vector<std::int8_t> q((cols + 63) / 64 * 64);
                        std::vector<std::int32_t> sums(q.size() / 32);
                        float scale = 0;
                        activationToInt8Scalar(x.data() + t * ldx, cols, static_cast<int>(q.size()), q.data(), &scale, sums.data());
                        for (int r = 0; r < rows; ++r) {
                            p.dequantRow(r, row.data());
                            double want = 0, size = 0;
                            for (int c = 0; c < cols; ++c) {
                                want += static_cast<double>(row[c]) * q[c] * scale;
                                size += std::abs(static_cast<double>(row[c]) * q[c] * scale);
                            }
                            const float got = y[t * ldy + r];
                            QVERIFY2(std::abs(got - want) <= 1e-5 * size + 1e-7,
                                     qPrintable(QString("%1 %2x%3, %4 tokens, token %5 row %6: %7 against %8")
                                                    .arg(QString::fromUtf8(io::expertTypeName(type).data())).arg(rows).arg(cols)
                                                    .arg(tokens).arg(t).arg(r).arg(got).arg(want)));
                        }
                        QCOMPARE(y[t * ldy + rows], -7.0f);  // past the rows: untouched
                    }
                }
                // A slice reads its own rows, through dequantRow.
                const WeightMatrix slice = p.rowSlice(5, 9);
                std::vector<float> x(cols, 0.5f), y(9), want(9);
                matmul(slice, x.data(), cols, 1, y.data(), 9, pool);
                for (int r = 0; r < 9; ++r) {
                    p.dequantRow(5 + r, row.data());
                    want[r] = 0;
                    for (int c = 0; c < cols; ++c) want[r] += row[c] * 0.5f;
                    QVERIFY(std::abs(y[r] - want[r]) <= 1e-4f);
                }
            }
    }

    void rowSliceReadsTheRightRows() {
        std::vector<float> data(6 * 4);
        for (int i = 0; i < 24; ++i) data[i] = static_cast<float>(i);
        WeightMatrix w;
        w.rows = 6;
        w.cols = 4;
        w.data = reinterpret_cast<const std::byte*>(data.data());
        const WeightMatrix slice = w.rowSlice(2, 3).rowSlice(1, 2);  // rows 3 and 4
        float row[4];
        slice.dequantRow(1, row);
        QCOMPARE(row[0], 16.0f);
    }

    void ops() {
        const float a[5] = {1, 2, 3, 4, 5};
        QCOMPARE(dot(a, a, 5), 55.0f);
        float s[3] = {1, 2, 3};
        softmax(s, 3);
        QVERIFY(std::abs(s[0] + s[1] + s[2] - 1.0f) < 1e-6f);
        QVERIFY(std::abs(s[2] / s[1] - std::exp(1.0f)) < 1e-5f);
        const float w[2] = {1, 2};
        float x[2] = {3, 4}, out[2];
        rmsNorm(x, w, 0.0f, out, 2);
        const float inv = 1.0f / std::sqrt(12.5f);
        QVERIFY(std::abs(out[0] - 3 * inv) < 1e-6f && std::abs(out[1] - 8 * inv) < 1e-6f);
        float g[2] = {0, 2};
        const float up[2] = {5, 3};
        siluMul(g, up, 2);
        QCOMPARE(g[0], 0.0f);
        QVERIFY(std::abs(g[1] - 2 / (1 + std::exp(-2.0f)) * 3) < 1e-6f);
    }
};

QTEST_APPLESS_MAIN(ReferenceKernelsTest)
#include "tst_reference_kernels.moc"
