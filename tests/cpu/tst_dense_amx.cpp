// The AMX int8 dense kernel (cpu/dense/dense_int8_amx.h) against a scalar reference in int64, exactly:
// with emulated tiles (dense_amx_emulated.cpp) on any CPU with AVX-512 (the packing and the epilogue are
// AVX-512 code run for real), and the real kernel where the CPU has AMX. Whole and partial row ranges,
// row and token counts that are not multiples of 16 or 32, several L2 slices, ldy wider than the rows,
// weights of -128 and 127. Every buffer ends at a page that cannot be read, so a read (or write) past
// the weights, activations, scales or output crashes the test.
#include <QTest>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "cpu/cpu_features.h"
#include "cpu/dense/dense_avx512.h"
#include "cpu/dense/dense_int8_amx.h"

namespace tandem::cpu::amx_emulated {  // tests/cpu/dense_amx_emulated.cpp
void packInt8ForAmx(const Int8Rows& x, std::size_t cols, std::size_t tokens, std::int8_t* packed);
void denseInt8Amx(const std::int8_t* w, const float* rowScales, std::size_t cols, std::size_t r0, std::size_t r1,
                  const Int8Rows& x, std::size_t tokens, float* y, std::size_t ldy);
}  // namespace tandem::cpu::amx_emulated

using namespace tandem::cpu;

namespace {

// `bytes` bytes that end where an inaccessible page begins.
class Guarded {
public:
    explicit Guarded(std::size_t bytes) {
        const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        span_ = (bytes + page - 1) / page * page + page;
        void* p = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) qFatal("mmap failed");
        base_ = static_cast<char*>(p);
        if (mprotect(base_ + span_ - page, page, PROT_NONE) != 0) qFatal("mprotect failed");
        data_ = base_ + span_ - page - bytes;
    }
    ~Guarded() { munmap(base_, span_); }
    Guarded(const Guarded&) = delete;
    Guarded& operator=(const Guarded&) = delete;
    template <class T>
    T* as() {
        return reinterpret_cast<T*>(data_);
    }

private:
    char* base_ = nullptr;
    char* data_ = nullptr;
    std::size_t span_ = 0;
};

using Kernel = void (*)(const std::int8_t*, const float*, std::size_t, std::size_t, std::size_t, const Int8Rows&, std::size_t,
                        float*, std::size_t);

constexpr float kUntouched = -12345.0f;

// One product of a random rows x cols matrix by `tokens` random tokens, over rows [r0, r1) into y
// `ldy` floats a token, with the activations `ld` bytes a token; compares every written float with the
// reference and checks that nothing else of y changed. With `vnni`, also against denseInt8Avx512.
void checkProduct(Kernel kernel, std::size_t cols, std::size_t rows, std::size_t tokens, std::size_t r0, std::size_t r1,
                  std::size_t ldy, std::size_t ld, bool vnni, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> wDist(-128, 127), qDist(-127, 127);
    std::uniform_real_distribution<float> sDist(0.001f, 0.05f);

    Guarded wBuf(rows * cols);
    std::int8_t* w = wBuf.as<std::int8_t>();
    for (std::size_t i = 0; i < rows * cols; ++i) w[i] = static_cast<std::int8_t>(wDist(rng));
    // The extremes: a row of -128 and one of 127 (met by tokens of -127 and 127 below), and both at the
    // matrix's first and last byte.
    std::memset(w + (rows / 2) * cols, 0x80, cols);
    std::memset(w + (rows / 3) * cols, 0x7f, cols);
    w[0] = -128;
    w[rows * cols - 1] = 127;

    Guarded qBuf((tokens - 1) * ld + cols);
    std::int8_t* q = qBuf.as<std::int8_t>();
    std::vector<std::int32_t> sums(tokens, 0);
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t c = 0; c < cols; ++c) {
            const int v = t == 1 ? -127 : t == 2 ? 127 : qDist(rng);
            q[t * ld + c] = static_cast<std::int8_t>(v);
            sums[t] += v;
        }
    for (std::size_t t = 0; t + 1 < tokens; ++t)  // the gaps between tokens, as activationToInt8 leaves them
        std::memset(q + t * ld + cols, 0, ld - cols);

    Guarded rsBuf(rows * sizeof(float)), xsBuf(tokens * sizeof(float));
    float* rowScales = rsBuf.as<float>();
    float* scales = xsBuf.as<float>();
    for (std::size_t r = 0; r < rows; ++r) rowScales[r] = sDist(rng);
    for (std::size_t t = 0; t < tokens; ++t) scales[t] = sDist(rng);
    const Int8Rows x{q, ld, scales, sums.data()};

    Guarded yBuf(tokens * ldy * sizeof(float));
    float* y = yBuf.as<float>();
    std::fill(y, y + tokens * ldy, kUntouched);
    kernel(w, rowScales, cols, r0, r1, x, tokens, y, ldy);

    std::vector<float> yVnni;
    if (vnni) {
        yVnni.assign(tokens * ldy, kUntouched);
        denseInt8Avx512(w, rowScales, cols, r0, r1, x, tokens, yVnni.data(), ldy);
    }
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t r = 0; r < ldy; ++r) {
            const float got = y[t * ldy + r];
            if (r < r0 || r >= r1) {
                if (got != kUntouched) QFAIL(qPrintable(QString("y[%1, %2] written outside rows [%3, %4)").arg(t).arg(r).arg(r0).arg(r1)));
                continue;
            }
            std::int64_t sum = 0;
            for (std::size_t c = 0; c < cols; ++c) sum += std::int64_t{w[r * cols + c]} * q[t * ld + c];
            const float want = static_cast<float>(sum) * rowScales[r] * scales[t];
            if (std::memcmp(&got, &want, sizeof got) != 0)
                QFAIL(qPrintable(QString("token %1 row %2: %3, want %4 (sum %5)").arg(t).arg(r).arg(got, 0, 'g', 9).arg(want, 0, 'g', 9).arg(sum)));
            if (vnni && std::memcmp(&got, &yVnni[t * ldy + r], sizeof got) != 0)
                QFAIL(qPrintable(QString("token %1 row %2: %3, the VNNI kernel %4").arg(t).arg(r).arg(got, 0, 'g', 9).arg(yVnni[t * ldy + r], 0, 'g', 9)));
        }
}

}  // namespace

class TestDenseAmx : public QObject {
    Q_OBJECT

private slots:
    void servesOnlyWholeBlocksAndEnoughTokens() {
        QVERIFY(denseInt8AmxServes(2048, 16));
        QVERIFY(!denseInt8AmxServes(2048, 15));
        QVERIFY(!denseInt8AmxServes(2048 + 32, 512));
        QVERIFY(!denseInt8AmxServes(0, 512));
        QCOMPARE(int8AmxPackedBytes(128, 17), std::size_t{2 * 2 * 1024});
    }

    // The B tiles' layout as dense_int8_amx.h documents it: tile (g, k) row j holds each token's bytes of
    // columns 64k + 4j .. 64k + 4j + 3, tokens past the last zero.
    void packsVnniOrder() {
        if (!isaSupported(Isa::Avx512)) QSKIP("needs AVX-512");
        const std::size_t cols = 192, tokens = 21, ld = 256;
        std::vector<std::int8_t> q(tokens * ld);
        for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<std::int8_t>(i * 37 + 11);
        const Int8Rows x{q.data(), ld, nullptr, nullptr};
        std::vector<std::int8_t> storage(int8AmxPackedBytes(cols, tokens) + 64);
        auto* packed = reinterpret_cast<std::int8_t*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) / 64 * 64);
        amx_emulated::packInt8ForAmx(x, cols, tokens, packed);
        for (std::size_t g = 0; g < 2; ++g)
            for (std::size_t k = 0; k < cols / 64; ++k)
                for (std::size_t j = 0; j < 16; ++j)
                    for (std::size_t n = 0; n < 16; ++n)
                        for (std::size_t i = 0; i < 4; ++i) {
                            const std::size_t t = g * 16 + n;
                            const std::int8_t want = t < tokens ? q[t * ld + 64 * k + 4 * j + i] : 0;
                            QCOMPARE(packed[(g * (cols / 64) + k) * 1024 + 64 * j + 4 * n + i], want);
                        }
    }

    void matchesReference_data() {
        QTest::addColumn<bool>("real");
        if (isaSupported(Isa::Avx512)) QTest::newRow("amx emulated") << false;
        if (isaSupported(Isa::Amx)) QTest::newRow("amx") << true;
    }

    void matchesReference() {
        QFETCH(bool, real);
        if (!isaSupported(Isa::Avx512)) QSKIP("needs AVX-512 (the emulation runs the AVX-512 packing and epilogue)");
        const Kernel kernel = real ? &denseInt8Amx : &amx_emulated::denseInt8Amx;
        std::uint32_t seed = 1;
        for (const std::size_t cols : {64, 128, 2048 + 64})
            for (const std::size_t rows : {16, 37, 300})
                for (const std::size_t tokens : {16, 17, 40, 100}) {
                    // Every row, y as wide as the rows and the activations as wide as the columns.
                    checkProduct(kernel, cols, rows, tokens, 0, rows, rows, cols, true, seed++);
                    if (QTest::currentTestFailed()) return;
                    // A sub-range (as one thread's share: 6, 18 and 162 rows), y wider than the matrix and
                    // activations with a gap after each token.
                    const std::size_t r0 = 3 + rows / 4, r1 = rows - rows / 5;
                    checkProduct(kernel, cols, rows, tokens, r0, r1, rows + 9, cols + 64, true, seed++);
                    if (QTest::currentTestFailed()) return;
                }
    }
};

QTEST_GUILESS_MAIN(TestDenseAmx)
#include "tst_dense_amx.moc"
