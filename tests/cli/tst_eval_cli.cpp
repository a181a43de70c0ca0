// tandem-cli eval's teacher forcing (--forced-ids) and routing trace (--router-out), as
// scripts/check_golden.py uses them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include "test_support.h"

using namespace tandem::test;

namespace {

struct Result {
    int exitCode;
    QString out;
    QString err;
};

Result runCli(const QStringList& args) {
    QProcess p;
    p.start(cliPath(), args);
    p.closeWriteChannel();
    if (!p.waitForFinished(120000)) qFatal("tandem-cli did not finish");
    return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

std::vector<float> readFloats(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(path));
    const QByteArray bytes = f.readAll();
    std::vector<float> out(static_cast<std::size_t>(bytes.size()) / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
}

std::vector<int> idsOf(const QString& out) {
    std::vector<int> ids;
    for (const auto& s : out.split(' ', Qt::SkipEmptyParts)) ids.push_back(s.trimmed().toInt());
    return ids;
}

constexpr std::size_t kVocab = 1024;  // every tiny fixture's

}  // namespace

class EvalCliTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;

    QString file(const QString& name, const QByteArray& content) {
        const QString path = tmp_.filePath(name);
        writeFile(path, content);
        return path;
    }

    // eval of prompt `prompt` with `extra` options; the logits in `logits`, the printed ids returned.
    std::vector<int> eval(const QString& model, const QByteArray& prompt, const QStringList& extra, std::vector<float>& logits) {
        const QString out = tmp_.filePath("logits.bin");
        QFile::remove(out);
        const auto r = runCli(QStringList{"eval", "--model", model, "--ids-file", file("prompt.txt", prompt), "--logits-out", out,
                                          "--device", "cpu", "--threads", "1"} +
                              extra);
        if (r.exitCode != 0) qFatal("eval failed: %s", qPrintable(r.err));
        logits = readFloats(out);
        return idsOf(r.out);
    }

private slots:
    // Forcing the greedy choices themselves is the greedy run, bit for bit.
    void forcingTheGreedyIdsChangesNothing() {
        const QString model = fixturePath("tiny-qwen3moe");
        std::vector<float> greedy, forced;
        const auto ids = eval(model, "5 6 7 8", {"--new-tokens", "6"}, greedy);
        QCOMPARE(ids.size(), std::size_t(6));
        QByteArray list;
        for (const int id : ids) list += QByteArray::number(id) + ' ';
        const auto again = eval(model, "5 6 7 8", {"--forced-ids", file("forced.txt", list)}, forced);
        QCOMPARE(again, ids);  // --new-tokens defaults to the forced ids' count
        QCOMPARE(forced.size(), greedy.size());
        QVERIFY(std::equal(forced.begin(), forced.end(), greedy.begin()));
    }

    // Other ids: step i runs forced[i], so generated row i + 1 is the logits after prompt + forced[0..i],
    // which a prefill of that sequence computes too; the printed ids are each row's greedy choice.
    void forcedIdsAreTheHistoryOfEveryRow() {
        const QString model = fixturePath("tiny-deepseekv2");
        std::vector<float> greedy, forced;
        const auto greedyIds = eval(model, "5 6 7", {"--new-tokens", "4"}, greedy);
        // Ids the greedy run did not choose.
        const std::vector<int> teacher{(greedyIds[0] + 1) % 1024, (greedyIds[1] + 7) % 1024, 100, 200};
        const auto printed =
            eval(model, "5 6 7", {"--forced-ids", file("forced.txt", QByteArray::number(teacher[0]) + " " + QByteArray::number(teacher[1]) + " " +
                                                                         QByteArray::number(teacher[2]) + " " + QByteArray::number(teacher[3]))},
                 forced);
        QCOMPARE(forced.size(), (3 + 4) * kVocab);
        // The prompt's rows and the first generated row come before any forced id.
        QVERIFY(std::equal(forced.begin(), forced.begin() + 4 * kVocab, greedy.begin()));
        for (int i = 0; i < 4; ++i) {
            const float* row = forced.data() + (3 + i) * kVocab;
            QCOMPARE(printed[i], static_cast<int>(std::max_element(row, row + kVocab) - row));
        }
        QVERIFY(printed[1] != greedyIds[1] || printed[2] != greedyIds[2]);  // the history changed the rows
        // Generated row 3 = the last row of a prefill of 5 6 7 t0 t1 t2.
        std::vector<float> prefill;
        eval(model, "5 6 7 " + QByteArray::number(teacher[0]) + " " + QByteArray::number(teacher[1]) + " " +
                        QByteArray::number(teacher[2]),
             {"--new-tokens", "1"}, prefill);
        const double err = relativeL2(forced.data() + 6 * kVocab, prefill.data() + 6 * kVocab, kVocab);
        QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    }

    void forcedIdsAreChecked() {
        const QString model = fixturePath("tiny-qwen3moe");
        const QString out = tmp_.filePath("o.bin");
        const QString prompt = file("p.txt", "1 2 3");
        auto r = runCli({"eval", "--model", model, "--ids-file", prompt, "--forced-ids", file("f.txt", "4 5"), "--new-tokens", "3",
                         "--logits-out", out});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--new-tokens 3 needs 3 forced ids, but the --forced-ids file holds 2"), qPrintable(r.err));
        r = runCli({"eval", "--model", model, "--ids-file", prompt, "--forced-ids", file("f.txt", "4 99999"), "--logits-out", out});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("forced id 99999 is outside the model's vocabulary of 1024"), qPrintable(r.err));
        r = runCli({"eval", "--model", model, "--ids-file", prompt, "--forced-ids", tmp_.filePath("missing.txt"), "--logits-out", out});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("missing.txt"), qPrintable(r.err));
        QVERIFY(!QFile::exists(out));
    }

    // The routing trace: [positions][MoE layers][experts] choice scores; Qwen3's are softmax probabilities,
    // and the top-k of each is the routing the engine used (the logits do not depend on recording it).
    void routerOutHoldsEveryPositionsChoiceScores() {
        const QString model = fixturePath("tiny-qwen3moe");  // 3 MoE layers, 16 experts, top-4, softmax
        std::vector<float> plain, traced;
        eval(model, "5 6 7 8 9", {"--new-tokens", "4"}, plain);
        const QString trace = tmp_.filePath("router.bin");
        eval(model, "5 6 7 8 9", {"--new-tokens", "4", "--router-out", trace}, traced);
        QVERIFY(std::equal(plain.begin(), plain.end(), traced.begin()));
        const auto scores = readFloats(trace);
        constexpr std::size_t positions = 5 + 4 - 1, layers = 3, experts = 16;
        QCOMPARE(scores.size(), positions * layers * experts);
        for (std::size_t i = 0; i < positions * layers; ++i) {
            double sum = 0;
            for (std::size_t e = 0; e < experts; ++e) {
                QVERIFY(scores[i * experts + e] > 0);
                sum += scores[i * experts + e];
            }
            QVERIFY2(std::abs(sum - 1) < 1e-5, qPrintable(QString::number(sum)));
        }
        // DeepSeek-V2's first layer is dense: its MoE layers only.
        eval(fixturePath("tiny-deepseekv2"), "5 6 7", {"--new-tokens", "2", "--router-out", trace}, traced);
        QCOMPARE(readFloats(trace).size(), std::size_t((3 + 2 - 1) * 2 * 16));
    }

    // What scripts/check_golden.py checks against transformers, here engine against engine: int8 experts
    // against the float32 reference experts on tiny-mixtral (8 experts, top-2), both teacher-forced with
    // the golden's ids. Rows move by int8's ~7e-3, except where the router chose other experts: there a
    // row moves by ~0.2. Every row far above the others must sit at such a flip, and every flip on a
    // near-tie: the reference run's margin (2nd minus 3rd score) below the int8 run's error on those two
    // scores. A kernel error would move rows without a flip, or scores by more than int8 does.
    void farRowsAreNearTieFlips() {
        const QString model = fixturePath("tiny-mixtral");
        const Golden g = loadGolden("tiny-mixtral", "chat");
        QByteArray prompt, forced;
        for (const int id : g.promptIds) prompt += QByteArray::number(id) + ' ';
        for (const int id : g.genIds) forced += QByteArray::number(id) + ' ';
        const QString forcedFile = file("forced.txt", forced);
        std::vector<float> refLogits, intLogits;
        const QString refTrace = tmp_.filePath("ref.bin"), intTrace = tmp_.filePath("int8.bin");
        eval(model, prompt, {"--forced-ids", forcedFile, "--experts", "reference", "--router-out", refTrace}, refLogits);
        eval(model, prompt, {"--forced-ids", forcedFile, "--experts", "int8", "--router-out", intTrace}, intLogits);
        const auto refScores = readFloats(refTrace), intScores = readFloats(intTrace);
        constexpr std::size_t experts = 8, layers = 2, topK = 2;
        const std::size_t T = g.promptIds.size(), rows = T + g.genIds.size(), positions = rows - 1;
        QCOMPARE(refScores.size(), positions * layers * experts);
        QCOMPARE(intScores.size(), refScores.size());

        // The top-2 of each (position, layer), as sorted pairs, and the reference's margin.
        auto chosen = [&](const std::vector<float>& s, std::size_t at) {
            std::array<int, experts> order;
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[at + a] > s[at + b]; });
            return order;
        };
        std::vector<bool> flipAt(positions, false);
        int flips = 0;
        for (std::size_t p = 0; p < positions; ++p)
            for (std::size_t l = 0; l < layers; ++l) {
                const std::size_t at = (p * layers + l) * experts;
                const auto r = chosen(refScores, at), q = chosen(intScores, at);
                if (std::set<int>(r.begin(), r.begin() + topK) == std::set<int>(q.begin(), q.begin() + topK)) continue;
                ++flips;
                flipAt[p] = true;
                const int kth = r[topK - 1], next = r[topK];
                const double margin = refScores[at + kth] - refScores[at + next];
                const double error = std::abs(intScores[at + kth] - refScores[at + kth]) + std::abs(intScores[at + next] - refScores[at + next]);
                QVERIFY2(margin <= error, qPrintable(QString("position %1 layer %2: experts flipped on a margin of %3, above the scores' "
                                                             "error %4: not a near-tie").arg(p).arg(l).arg(margin).arg(error)));
            }
        std::vector<double> errors(rows);
        for (std::size_t r = 0; r < rows; ++r)
            errors[r] = relativeL2(intLogits.data() + r * kVocab, refLogits.data() + r * kVocab, kVocab);
        std::vector<double> sorted = errors;
        std::sort(sorted.begin(), sorted.end());
        const double median = sorted[rows / 2];
        int far = 0;
        for (std::size_t r = 0; r < rows; ++r) {
            if (errors[r] < 10 * median) continue;
            ++far;
            const std::size_t position = r < T ? r : T - 1 + (r - T);
            QVERIFY2(flipAt[position], qPrintable(QString("row %1 is %2 off (median %3) with the reference's experts at its position")
                                                      .arg(r).arg(errors[r]).arg(median)));
        }
        // Not vacuous: this prompt has flips that move their rows (positions 11 and 50 when written).
        QVERIFY2(far >= 1 && flips >= 1, qPrintable(QString("%1 far rows, %2 flips").arg(far).arg(flips)));
    }
};

QTEST_GUILESS_MAIN(EvalCliTest)
#include "tst_eval_cli.moc"
