// Rotary embeddings: plain and YaRN frequencies, attention factors, softmax scales and both layouts.
#include <QTest>
#include <cmath>

#include "model/rope.h"
#include "test_support.h"

using namespace tandem::model;

namespace {

ModelConfig ropeConfig(int dim, bool interleaved) {
    ModelConfig c;
    c.attention = AttentionKind::Gqa;
    c.headDim = dim;
    c.ropeTheta = 10000.0;
    c.ropeInterleaved = interleaved;
    c.maxPositionEmbeddings = 4096;
    return c;
}

}  // namespace

class RopeTest : public QObject {
    Q_OBJECT
private slots:
    void plainFrequencies() {
        const Rope rope(ropeConfig(8, false));
        QCOMPARE(rope.inverseFrequencies().size(), std::size_t(4));
        for (int i = 0; i < 4; ++i)
            QVERIFY(std::abs(rope.inverseFrequencies()[i] - std::pow(10000.0, -2.0 * i / 8)) < 1e-7);
        QCOMPARE(rope.attentionFactor(), 1.0f);
    }

    void yarnFrequenciesOfDeepseekFixture() {
        // DeepSeek-V2 fixture: rope dim 16, factor 40, original context 4096, beta 32/1.
        // Correction range: low = floor(2.62) = 2, high = ceil(5.63) = 6.
        const auto c = loadModelConfig(tandem::test::fixturePath("tiny-deepseekv2").toStdString());
        const Rope rope(c);
        const auto& f = rope.inverseFrequencies();
        QCOMPARE(f.size(), std::size_t(8));
        for (int i = 0; i < 8; ++i) {
            const double extrapolation = std::pow(10000.0, -2.0 * i / 16);
            const double ramp = std::clamp((i - 2.0) / 4.0, 0.0, 1.0);
            const double expected = extrapolation / 40.0 * ramp + extrapolation * (1.0 - ramp);
            QVERIFY2(std::abs(f[i] - expected) < 1e-6 * expected, qPrintable(QString("frequency %1").arg(i)));
        }
        QCOMPARE(rope.attentionFactor(), 1.0f);  // mscale == mscale_all_dim
    }

    void yarnAttentionFactorWithoutMscale() {  // Qwen3-style YaRN: 0.1 ln(factor) + 1
        auto c = ropeConfig(8, false);
        c.yarn = YarnScaling{};
        c.yarn->factor = 4.0;
        c.yarn->mscaleAllDim = 0.0;
        QVERIFY(std::abs(Rope(c).attentionFactor() - (0.1 * std::log(4.0) + 1.0)) < 1e-6);
    }

    void softmaxScales() {
        const auto v2 = loadModelConfig(tandem::test::fixturePath("tiny-deepseekv2").toStdString());
        const double m = 0.1 * 0.707 * std::log(40.0) + 1.0;
        QVERIFY(std::abs(attentionSoftmaxScale(v2) - m * m / std::sqrt(48.0)) < 1e-6);
        const auto qwen = loadModelConfig(tandem::test::fixturePath("tiny-qwen3moe").toStdString());
        QVERIFY(std::abs(attentionSoftmaxScale(qwen) - 1.0 / std::sqrt(32.0)) < 1e-7);
    }

    void layouts() {
        // Position 1 rotates frequency 0 by one radian: halves pair x[0] with x[2], interleaved pairs x[0] with x[1].
        for (const bool interleaved : {false, true}) {
            const Rope rope(ropeConfig(4, interleaved));
            float cos[2], sin[2];
            rope.angles(1, cos, sin);
            float x[4] = {1, 0, 0, 0};
            rope.rotate(x, cos, sin);
            const int partner = interleaved ? 1 : 2;
            QVERIFY(std::abs(x[0] - std::cos(1.0f)) < 1e-6f);
            QVERIFY(std::abs(x[partner] - std::sin(1.0f)) < 1e-6f);
            QCOMPARE(x[interleaved ? 2 : 1], 0.0f);
            QCOMPARE(x[3], 0.0f);
        }
    }

    void positionZeroIsIdentity() {
        const Rope rope(ropeConfig(8, true));
        float cos[4], sin[4];
        rope.angles(0, cos, sin);
        float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        rope.rotate(x, cos, sin);
        for (int i = 0; i < 8; ++i) QCOMPARE(x[i], static_cast<float>(i + 1));
    }
};

QTEST_GUILESS_MAIN(RopeTest)
#include "tst_rope.moc"
