// Every fixture, both prompts: `tandem-cli eval` against the transformers float32 reference.
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <cstring>

#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem::test;

class GoldenTest : public QObject {
    Q_OBJECT

private:
    // A fixture whose experts are MXFP4 (gpt-oss): the automatic choice packs them as MXFP4, whose kernels
    // take int8 activations, so the exact paths here are bf16 (MXFP4 values are exact in bf16) and the
    // reference; mxfp4ExpertsStayNearTheReference checks the MXFP4 kernels.
    static bool mxfp4Fixture(const QString& fixture) {
        return readFile(fixturePath(fixture) + "/config.json").contains("\"mxfp4\"");
    }
    // A fixture whose experts are compressed-tensors int4 (Kimi-K2-Thinking): the automatic choice packs them
    // as INT4, exactly, on the same int8-activation kernels; bf16 cannot hold their q x scale exactly (1.6e-3
    // off), so the exact path here is the reference alone.
    static bool int4Fixture(const QString& fixture) {
        return readFile(fixturePath(fixture) + "/config.json").contains("\"compressed-tensors\"");
    }

    // Every fixture and prompt, with each way of running the routed experts on the CPU.
    static void addFixtureRows() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("prompt");
        QTest::addColumn<QString>("experts");
        for (const QString& f : fixtureNames())
            for (const char* p : {"chat", "long"})
                for (const char* e : {mxfp4Fixture(f) ? "bf16" : "auto", "reference"})
                    QTest::newRow(qPrintable(f + "/" + p + "/" + e)) << f << QString(p) << QString(e);
    }

private slots:
    void evalMatchesReference_data() { addFixtureRows(); }
    void evalMatchesReference() {
        QFETCH(QString, fixture);
        QFETCH(QString, prompt);
        QFETCH(QString, experts);
        if (experts == "auto" && int4Fixture(fixture))
            QSKIP("int4 experts run on int8-activation kernels: mxfp4ExpertsStayNearTheReference checks them");
        const Golden g = loadGolden(fixture, prompt);
        const std::size_t V = static_cast<std::size_t>(g.vocab);
        const int newTokens = static_cast<int>(g.genIds.size());

        QTemporaryDir tmp;
        QVERIFY(tmp.isValid());
        QByteArray ids;
        for (const int id : g.promptIds) ids += QByteArray::number(id) + ' ';
        QVERIFY(writeFile(tmp.filePath("ids.txt"), ids));

        QProcess cli;
        cli.start(cliPath(), {"eval", "--model", fixturePath(fixture), "--ids-file", tmp.filePath("ids.txt"), "--new-tokens",
                              QString::number(newTokens), "--logits-out", tmp.filePath("logits.bin"), "--threads", "2",
                              "--device", "cpu", "--experts", experts});
        QVERIFY(cli.waitForFinished(300000));
        QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());

        const QByteArray raw = readFile(tmp.filePath("logits.bin"));
        const std::size_t rows = g.promptIds.size() + static_cast<std::size_t>(newTokens);
        QCOMPARE(static_cast<std::size_t>(raw.size()), rows * V * sizeof(float));
        std::vector<float> logits(rows * V);
        std::memcpy(logits.data(), raw.constData(), static_cast<std::size_t>(raw.size()));

        double worst = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            const bool prefill = r < g.promptIds.size();
            const float* ref = prefill ? &g.prefillLogits[r * V] : &g.genLogits[(r - g.promptIds.size()) * V];
            const double err = relativeL2(&logits[r * V], ref, V);
            worst = std::max(worst, err);
            QVERIFY2(err <= 1e-3, qPrintable(QString("%1 row %2: relative L2 error %3 > 1e-3")
                                                 .arg(prefill ? "prefill" : "decode")
                                                 .arg(prefill ? r : r - g.promptIds.size())
                                                 .arg(err)));
        }

        const QList<QByteArray> words = cli.readAllStandardOutput().trimmed().split(' ');
        QCOMPARE(words.size(), newTokens);
        for (int i = 0; i < newTokens; ++i) {
            const int got = words[i].toInt();
            if (got == g.genIds[i]) continue;
            // A disagreement is acceptable only where the reference itself barely prefers its token.
            const double margin = topMargin(&g.genLogits[static_cast<std::size_t>(i) * V], V);
            QVERIFY2(margin < 1e-3, qPrintable(QString("step %1: generated %2, reference %3 (reference top-1 margin %4)")
                                                   .arg(i).arg(got).arg(g.genIds[i]).arg(margin)));
            qWarning("step %d: generated %d, reference %d, where the reference top-1 margin is only %g; "
                     "later steps are not compared",
                     i, got, g.genIds[i], margin);
            break;
        }
        qInfo("%s/%s (%s experts): worst relative L2 error %.3g over %zu rows", qPrintable(fixture), qPrintable(prompt),
              qPrintable(experts), worst, rows);
    }

    // Decoding through the KV cache equals running the whole sequence at once.
    void cachedDecodeEqualsPrefill_data() { addFixtureRows(); }
    void cachedDecodeEqualsPrefill() {
        QFETCH(QString, fixture);
        QFETCH(QString, prompt);
        QFETCH(QString, experts);
        const Golden g = loadGolden(fixture, prompt);
        const std::size_t V = static_cast<std::size_t>(g.vocab);
        tandem::EngineOptions options;
        options.threads = 2;
        options.device = tandem::Device::Cpu;
        options.experts = experts == "reference" ? tandem::ExpertPrecision::Reference
                          : experts == "bf16"    ? tandem::ExpertPrecision::BF16
                                                 : tandem::ExpertPrecision::Auto;
        auto engine = tandem::Engine::load(fixturePath(fixture).toStdString(), options);

        std::vector<int> all = g.promptIds;
        all.insert(all.end(), g.genIds.begin(), g.genIds.end() - 1);
        auto whole = engine->newSession();
        const std::vector<float> full = whole->append(all, tandem::Logits::All);

        auto stepwise = engine->newSession();
        stepwise->append(g.promptIds);
        for (std::size_t i = 0; i + 1 < g.genIds.size(); ++i) {
            const auto& row = stepwise->append(std::span<const int>(&g.genIds[i], 1));
            const std::size_t r = g.promptIds.size() + i;
            const double err = relativeL2(row.data(), &full[r * V], V);
            QVERIFY2(err <= 1e-5, qPrintable(QString("decode step %1 differs from prefill by %2").arg(i).arg(err)));
        }
        QCOMPARE(stepwise->position(), static_cast<int>(all.size()));
    }

    // gpt-oss's experts packed as MXFP4 (exactly the checkpoint's values) on the int8-activation kernels:
    // each token's activations are rounded to int8 per row, as llama.cpp's MXFP4 x Q8_0 products do,
    // which moves a row's logits by ~1% and, in a random tiny model, flips a few near-tie routing choices.
    // Measured on tiny-gpt-oss (2026-12-04): median row error 6.6e-3 / 7.8e-3, 3 / 13 routing flips. The same
    // for compressed-tensors int4 experts packed as INT4 (tiny-kimi-k2-int4: median 6.9e-3 on `long`).
    void mxfp4ExpertsStayNearTheReference_data() {
        QTest::addColumn<QString>("fixture");
        QTest::addColumn<QString>("prompt");
        for (const QString& f : fixtureNames())
            if (mxfp4Fixture(f) || int4Fixture(f))
                for (const char* p : {"chat", "long"}) QTest::newRow(qPrintable(f + "/" + p)) << f << QString(p);
    }
    void mxfp4ExpertsStayNearTheReference() {
        QFETCH(QString, fixture);
        QFETCH(QString, prompt);
        const Golden g = loadGolden(fixture, prompt);
        const std::size_t V = static_cast<std::size_t>(g.vocab);
        tandem::EngineOptions options;
        options.threads = 2;
        options.device = tandem::Device::Cpu;
        auto engine = tandem::Engine::load(fixturePath(fixture).toStdString(), options);
        QVERIFY2(engine->info().experts.rfind(int4Fixture(fixture) ? "int4" : "mxfp4", 0) == 0, engine->info().experts.c_str());
        std::vector<int> all = g.promptIds;
        all.insert(all.end(), g.genIds.begin(), g.genIds.end() - 1);
        const std::vector<float> logits = engine->newSession()->append(all, tandem::Logits::All);
        std::vector<double> errors;
        std::size_t sameTop = 0;
        for (std::size_t r = 0; r < all.size(); ++r) {
            const bool prefill = r < g.promptIds.size();
            const float* ref = prefill ? &g.prefillLogits[r * V] : &g.genLogits[(r + 1 - g.promptIds.size()) * V];
            errors.push_back(relativeL2(&logits[r * V], ref, V));
            sameTop += std::max_element(&logits[r * V], &logits[r * V] + V) - &logits[r * V] == std::max_element(ref, ref + V) - ref;
        }
        std::sort(errors.begin(), errors.end());
        const double median = errors[errors.size() / 2];
        const double agree = static_cast<double>(sameTop) / static_cast<double>(all.size());
        qInfo("%s/%s: %s experts, median row error %.3g, top-1 agreement %.1f%%", qPrintable(fixture), qPrintable(prompt),
              engine->info().experts.c_str(), median, 100 * agree);
        QVERIFY2(median <= 2e-2, qPrintable(QString("median relative L2 error %1 > 2e-2").arg(median)));
        QVERIFY2(agree >= 0.9, qPrintable(QString("top-1 agreement %1 < 90%").arg(agree)));
    }
};

QTEST_GUILESS_MAIN(GoldenTest)
#include "tst_golden.moc"
