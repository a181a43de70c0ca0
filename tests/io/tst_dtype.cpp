// Conversions of the checkpoint element types to float32.
#include <QTest>
#include <cmath>

#include "io/dtype.h"

using namespace tandem::io;

class DTypeTest : public QObject {
    Q_OBJECT
private slots:
    void names() {
        QCOMPARE(dtypeFromName("BF16"), std::optional(DType::BF16));
        QCOMPARE(dtypeFromName("F8_E4M3"), std::optional(DType::F8_E4M3));
        QVERIFY(!dtypeFromName("F8_E5M2").has_value());
        QCOMPARE(dtypeSize(DType::F8_E4M3), std::size_t(1));
        QCOMPARE(dtypeSize(DType::BF16), std::size_t(2));
        QCOMPARE(dtypeName(DType::F16), std::string_view("F16"));
    }
    void bf16() {
        QCOMPARE(bf16ToFloat(0x3f80), 1.0f);
        QCOMPARE(bf16ToFloat(0xc000), -2.0f);
        QCOMPARE(bf16ToFloat(0x3fc0), 1.5f);
    }
    void f16() {
        QCOMPARE(f16ToFloat(0x3c00), 1.0f);
        QCOMPARE(f16ToFloat(0xc000), -2.0f);
        QCOMPARE(f16ToFloat(0x7bff), 65504.0f);
        QCOMPARE(f16ToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
        QVERIFY(std::isinf(f16ToFloat(0x7c00)));
        QVERIFY(std::isnan(f16ToFloat(0x7e00)));
    }
    void f8e4m3() {
        QCOMPARE(f8e4m3ToFloat(0x38), 1.0f);     // exponent 7 = bias
        QCOMPARE(f8e4m3ToFloat(0xb8), -1.0f);
        QCOMPARE(f8e4m3ToFloat(0x7e), 448.0f);   // largest finite
        QCOMPARE(f8e4m3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal: 1/8 * 2^-6
        QCOMPARE(f8e4m3ToFloat(0x00), 0.0f);
        QVERIFY(std::isnan(f8e4m3ToFloat(0x7f)));
        QVERIFY(std::isnan(f8e4m3ToFloat(0xff)));
        QVERIFY(!std::isinf(f8e4m3ToFloat(0x78)));  // e4m3fn has no infinity: 0x78 is 256
        QCOMPARE(f8e4m3ToFloat(0x78), 256.0f);
    }
};

QTEST_APPLESS_MAIN(DTypeTest)
#include "tst_dtype.moc"
