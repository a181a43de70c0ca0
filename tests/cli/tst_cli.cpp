// tandem-cli as a user meets it: usage, errors with exit codes, and no partial output files.
#include <algorithm>
#include <cmath>
#include <csignal>

#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
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

Result runCli(const QStringList& args, const QByteArray& input = {}) {
    QProcess p;
    p.start(cliPath(), args);
    p.write(input);
    p.closeWriteChannel();
    if (!p.waitForFinished(120000)) qFatal("tandem-cli did not finish");
    return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class CliTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;

    QString idsFile(const QByteArray& content) {
        const QString path = tmp_.filePath("ids.txt");
        writeFile(path, content);
        return path;
    }

private slots:
    void help() {
        const auto r = runCli({"--help"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("eval") && r.out.contains("generate"));
    }

    void unknownCommand() {
        const auto r = runCli({"frobnicate"});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.contains("unknown command 'frobnicate'"));
        QVERIFY(r.err.contains("usage"));
    }

    void unknownOption() {
        const auto r = runCli({"eval", "--modle", "x"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("unknown option '--modle'"), qPrintable(r.err));
    }

    void missingRequiredOption() {
        const auto r = runCli({"eval", "--ids-file", idsFile("1 2"), "--new-tokens", "2", "--logits-out", tmp_.filePath("o")});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("missing required option --model"), qPrintable(r.err));
    }

    void badIds() {
        const auto r = runCli({"eval", "--model", fixturePath("tiny-qwen3moe"), "--ids-file", idsFile("1 2 x3"),
                               "--new-tokens", "2", "--logits-out", tmp_.filePath("o")});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("'x3' is not a token id"), qPrintable(r.err));
    }

    void idOutsideVocabularyLeavesNoFile() {
        const QString out = tmp_.filePath("logits.bin");
        const auto r = runCli({"eval", "--model", fixturePath("tiny-qwen3moe"), "--ids-file", idsFile("1 2 99999"),
                               "--new-tokens", "2", "--logits-out", out});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("99999") && r.err.contains("vocabulary"), qPrintable(r.err));
        QVERIFY(!QFile::exists(out));
        QVERIFY(!QFile::exists(out + ".partial"));
    }

    void missingModel() {
        const auto r = runCli({"generate", "--model", "/nonexistent/model", "--ids", "1 2"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("/nonexistent/model") && r.err.contains("does not exist"), qPrintable(r.err));
    }

    void evalWritesRowsAndIds() {
        const QString out = tmp_.filePath("logits.bin");
        const auto r = runCli({"eval", "--model", fixturePath("tiny-deepseekv2"), "--ids-file", idsFile("5 6 7"),
                               "--new-tokens", "4", "--logits-out", out, "--threads", "1"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.out.trimmed().split(' ').size(), 4);
        QCOMPARE(QFile(out).size(), qint64((3 + 4) * 1024 * 4));
    }

    void optionsTakeAnEqualsSignToo() {
        // "--name=value" is the same as "--name value", for every command.
        const QStringList spaced{"generate", "--model", fixturePath("tiny-qwen3moe"), "--ids", "1 2 3", "--new-tokens", "4",
                                 "--temperature", "0", "--threads", "1"};
        const QStringList joined{"generate", "--model=" + fixturePath("tiny-qwen3moe"), "--ids=1 2 3", "--new-tokens=4",
                                 "--temperature=0", "--threads=1"};
        const auto a = runCli(spaced), b = runCli(joined);
        QCOMPARE(a.exitCode, 0);
        QCOMPARE(b.exitCode, 0);
        QCOMPARE(b.out, a.out);
        QVERIFY(!a.out.trimmed().isEmpty());
        // A value may itself hold '=' (only the first one splits), and a flag takes none.
        const auto rendered = runCli({"render-chat", "--model=" + fixturePath("tiny-qwen3moe"), "--var=enable_thinking=false"},
                                     R"([{"role":"user","content":"Hi"}])");
        QCOMPARE(rendered.exitCode, 0);
        QVERIFY2(rendered.out.contains("<think>"), qPrintable(rendered.out));  // Qwen3's empty think block when off
        const auto flag = runCli({"render-chat", "--model", fixturePath("tiny-qwen3moe"), "--no-generation-prompt=yes"});
        QCOMPARE(flag.exitCode, 1);
        QVERIFY2(flag.err.contains("--no-generation-prompt takes no value"), qPrintable(flag.err));
        const auto empty = runCli({"generate", "--model=", "--ids", "1"});
        QCOMPARE(empty.exitCode, 1);
    }

    void pipedChatEndsEachAnswerWithANewline() {
        const auto r = runCli({"chat", "--model", fixturePath("tiny-qwen3moe"), "--max-tokens", "3", "--temperature", "0",
                               "--threads", "1"},
                              "hello\nwhat does river mean?\n");
        QCOMPARE(r.exitCode, 0);
        // "> answer\n> answer\n> ": each prompt after an answer starts a line of its own.
        QVERIFY2(r.out.startsWith("> "), qPrintable(r.out));
        QVERIFY2(r.out.endsWith("\n> "), qPrintable(r.out));
        QVERIFY2(r.out.count("\n> ") >= 2, qPrintable(r.out));
    }

    void countsAndNumbersOutOfRangeAreRefused() {
        const QString model = fixturePath("tiny-mixtral");
        // More new tokens than a context can hold: said so, not "context length is 1" from an overflow.
        const auto huge = runCli({"eval", "--model", model, "--ids-file", idsFile("5 6 7"), "--new-tokens", "2147483647",
                                  "--logits-out", tmp_.filePath("huge.bin")});
        QCOMPARE(huge.exitCode, 1);
        QVERIFY2(huge.err.contains("2147483649 positions, but this model holds at most"), qPrintable(huge.err));
        QVERIFY(!QFile::exists(tmp_.filePath("huge.bin")));
        const auto negative = runCli({"generate", "--model", model, "--ids", "1 2", "--new-tokens", "-1"});
        QCOMPARE(negative.exitCode, 1);
        QVERIFY2(negative.err.contains("--new-tokens must not be negative"), qPrintable(negative.err));
        for (const char* bad : {"nan", "inf", "-inf"}) {
            const auto r = runCli({"generate", "--model", model, "--ids", "1 2", "--temperature", bad});
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.contains(QStringLiteral("--temperature expects a number, not '%1'").arg(bad)), qPrintable(r.err));
        }
    }

    // --gpu-memory (the routed experts' VRAM budget): a size, auto, or 0; anything else is refused before
    // the model loads. Without a GPU the CPU path runs whatever the budget.
    void gpuMemoryTakesASize() {
        const QString model = fixturePath("tiny-qwen3moe");
        const auto bad = runCli({"generate", "--model", model, "--ids", "1 2", "--gpu-memory", "lots"});
        QCOMPARE(bad.exitCode, 1);
        QVERIFY2(bad.err.contains("--gpu-memory takes a size such as 16G, 800M or 12.5GiB (or 0), not 'lots'"),
                 qPrintable(bad.err));
        for (const char* size : {"8G", "auto", "0", "1.5GiB"}) {
            const auto r = runCli({"generate", "--model", model, "--ids", "1 2", "--new-tokens", "2", "--device", "cpu",
                                   QStringLiteral("--gpu-memory=%1").arg(size)});
            QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        }
    }

    void threadsTheSystemRefusesAreAnError() {
        // Under a 4 GB address-space limit a few hundred 8 MB thread stacks fit, not 2000: a clear error,
        // not std::terminate from a half-started pool. (prlimit is util-linux's, which every Debian has.)
        QProcess p;
        p.start("prlimit", {"--as=4000000000", "--", cliPath(), "generate", "--model", fixturePath("tiny-mixtral"), "--ids",
                            "1 2", "--new-tokens", "2", "--threads", "2000"});
        QVERIFY(p.waitForFinished(120000));
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 1);
        QVERIFY2(err.contains("cannot start 2000 threads for the CPU experts") && err.contains("choose fewer threads"),
                 qPrintable(err));
    }

    void deeplyNestedJsonIsRefused() {
        // Content nested 20,000 arrays deep (or a --var so nested) crashed render-chat's recursion.
        const QString model = fixturePath("tiny-qwen3moe");
        const QByteArray deep = QByteArray("[").repeated(20000) + QByteArray("]").repeated(20000);
        const auto messages = runCli({"render-chat", "--model", model}, R"([{"role":"user","content":)" + deep + "}]");
        QCOMPARE(messages.exitCode, 1);
        QVERIFY2(messages.err.contains("standard input nests JSON more than"), qPrintable(messages.err));
        const auto var = runCli({"render-chat", "--model", model, "--var=tools=" + QString::fromLatin1(deep)},
                                R"([{"role":"user","content":"Hi"}])");
        QCOMPARE(var.exitCode, 1);
        QVERIFY2(var.err.contains("--var tools nests JSON more than"), qPrintable(var.err));
    }

    void ctrlCInEvalLeavesNoPartialFile() {
        const QString out = tmp_.filePath("interrupted.bin");
        QProcess p;
        p.start(cliPath(), {"eval", "--model", fixturePath("tiny-mixtral"), "--ids-file", idsFile("5 6 7"), "--new-tokens",
                            "30000", "--logits-out", out, "--threads", "1"});
        // 30,000 steps take far longer than it takes to see the partial file grow.
        QVERIFY(QTest::qWaitFor([&] { return QFileInfo(out + ".partial").size() > 0; }, 60000));
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitCode(), 128 + SIGINT);
        QVERIFY(!QFile::exists(out + ".partial"));
        QVERIFY(!QFile::exists(out));
    }

    void ctrlCInChatStopsTheAnswerNotTheChat() {
        QProcess p;
        p.start(cliPath(), {"chat", "--model", fixturePath("tiny-mixtral"), "--temperature", "0", "--max-tokens", "30000",
                            "--context", "32768", "--threads", "1"});
        QVERIFY(p.waitForStarted());
        // tiny-mixtral's greedy answer to this runs past 2,000 tokens without an end of turn.
        p.write("hello\n");
        QByteArray out;
        QVERIFY(QTest::qWaitFor([&] { out += p.readAllStandardOutput(); return out.size() > 40; }, 60000));
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        // The answer stops, the prompt comes back, and the chat takes the next message.
        QVERIFY(QTest::qWaitFor([&] { out += p.readAllStandardOutput(); return out.endsWith("\n> "); }, 60000));
        QCOMPARE(p.state(), QProcess::Running);
        p.write("/quit\n");
        QVERIFY(p.waitForFinished(60000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 0);
        const QString err = QString::fromUtf8(p.readAllStandardError());
        QVERIFY2(err.contains("(stopped)"), qPrintable(err));
    }

    void zeroNewTokens() {
        const QString out = tmp_.filePath("prefill.bin");
        const auto r = runCli({"eval", "--model", fixturePath("tiny-mixtral"), "--ids-file", idsFile("5 6 7"),
                               "--new-tokens", "0", "--logits-out", out});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.out, QString("\n"));
        QCOMPARE(QFile(out).size(), qint64(3 * 1024 * 4));
    }

    void generateReportsSpeed() {
        const auto r = runCli({"generate", "--model", fixturePath("tiny-qwen3moe"), "--ids", "1 2 3", "--new-tokens", "5",
                               "--temperature", "0.8", "--seed", "3"});
        QCOMPARE(r.exitCode, 0);
        QCOMPARE(r.out.trimmed().split(' ').size(), 5);
        QVERIFY2(r.err.contains("tok/s"), qPrintable(r.err));
        // The same seed gives the same tokens.
        const auto again = runCli({"generate", "--model", fixturePath("tiny-qwen3moe"), "--ids", "1 2 3", "--new-tokens",
                                   "5", "--temperature", "0.8", "--seed", "3"});
        QCOMPARE(again.out, r.out);
    }

    // --prompts-file answers each line in a fresh session: the same ids as one --ids run per prompt.
    void generateFromPromptsFile() {
        const QStringList common = {"--model", fixturePath("tiny-qwen3moe"), "--new-tokens", "4", "--temperature", "0"};
        const auto first = runCli(QStringList{"generate", "--ids", "1 2 3"} + common);
        const auto second = runCli(QStringList{"generate", "--ids", "7 8"} + common);
        const auto both = runCli(QStringList{"generate", "--prompts-file", idsFile("1 2 3\n\n7 8\n")} + common);
        QCOMPARE(both.exitCode, 0);
        QCOMPARE(both.out, first.out + second.out);

        const auto empty = runCli(QStringList{"generate", "--prompts-file", idsFile("\n")} + common);
        QVERIFY(empty.exitCode != 0);
        QVERIFY2(empty.err.contains("no prompts"), qPrintable(empty.err));
    }

    // bench --synthetic: one JSON line per deferral and run (after the prompt, then from an empty context:
    // a one-token prompt), each with its own bandwidth probes around the run and a ceiling from the higher
    // of the two.
    void benchReportsEachDeferralWithItsCeiling() {
        const auto r = runCli({"bench", "--synthetic", "tiny", "--experts", "int4", "--prompt", "8", "--gen", "4", "--defer",
                               "0,1", "--device", "cpu", "--threads", "2", "--json"});
        QCOMPARE(r.exitCode, 0);
        QList<QJsonObject> rows;
        for (const QString& line : r.out.split('\n'))
            if (line.startsWith('{')) rows.append(QJsonDocument::fromJson(line.toUtf8()).object());
        QCOMPARE(rows.size(), 4);
        for (int i = 0; i < 4; ++i) {
            const QJsonObject& j = rows[i];
            QCOMPARE(j["deferral"].toInt(), i % 2);
            QCOMPARE(j["prompt_tokens"].toInt(), i < 2 ? 8 : 1);
            QCOMPARE(j["steps"].toInt(), 3);  // the first new token comes from the prefill
            const double before = j["bandwidth_before_gbps"].toDouble(), after = j["bandwidth_after_gbps"].toDouble();
            QVERIFY(before > 0 && after > 0);
            QCOMPARE(j["bandwidth_gbps"].toDouble(), std::max(before, after));
            const double ceiling = j["bandwidth_gbps"].toDouble() * 1e9 / j["routed_bytes_per_token"].toDouble();
            QVERIFY2(std::abs(j["ceiling_tokens_per_second"].toDouble() / ceiling - 1) < 1e-3, qPrintable(r.out));
            QVERIFY(j["decode_tokens_per_second"].toDouble() > 0);
            // The CPU experts' own read rate: routed bytes per token over their time per step.
            const double cpuMs = j["cpu_experts_ms"].toDouble();
            QVERIFY(cpuMs > 0);
            const double gbps = j["routed_bytes_per_token"].toDouble() / (cpuMs * 1e-3) / 1e9;
            QVERIFY2(std::abs(j["cpu_experts_gbps"].toDouble() / gbps - 1) < 1e-2, qPrintable(r.out));
        }
    }

    // bench --streams: sessions decoded together, one JSON row per stream count, each with the distinct
    // experts its steps read (counted from the routing on the CPU path) and the roofline they give.
    void benchStreamsReportsEachCountBesideItsRoofline() {
        const auto r = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--streams", "1,3", "--prompt", "8", "--gen",
                               "4", "--device", "cpu", "--threads", "2", "--json"});
        QCOMPARE(r.exitCode, 0);
        QList<QJsonObject> rows;
        for (const QString& line : r.out.split('\n'))
            if (line.startsWith('{')) rows.append(QJsonDocument::fromJson(line.toUtf8()).object());
        QCOMPARE(rows.size(), 2);
        for (int i = 0; i < 2; ++i) {
            const QJsonObject& j = rows[i];
            const int S = i == 0 ? 1 : 3;
            QCOMPARE(j["streams"].toInt(), S);
            QCOMPARE(j["steps"].toInt(), 4);
            QCOMPARE(j["distinct_source"].toString(), QString("counted"));
            const int E = j["experts_per_layer"].toInt(), k = j["experts_per_token"].toInt();
            QCOMPARE(E, 16);
            QCOMPARE(k, 4);
            const double distinct = j["distinct_experts_per_layer"].toDouble();
            if (S == 1) QCOMPARE(distinct, 4.0);  // one sequence reads its own k
            QVERIFY2(distinct >= k && distinct <= std::min(S * k, E), qPrintable(r.out));
            QVERIFY(std::abs(j["uniform_distinct_experts"].toDouble() - E * (1 - std::pow(1.0 - double(k) / E, S))) < 1e-3);
            const double stepBytes = j["routed_bytes_per_token"].toDouble() * distinct / k;
            const double roofline = S * j["bandwidth_gbps"].toDouble() * 1e9 / stepBytes;
            QVERIFY2(std::abs(j["roofline_tokens_per_second"].toDouble() / roofline - 1) < 1e-3, qPrintable(r.out));
            QVERIFY(j["decode_tokens_per_second"].toDouble() > 0);
        }
        QVERIFY2(r.out.contains("counted from the routing"), qPrintable(r.out));
        // --defer 0,1: every stream count at each deferral, in turn.
        const auto deferred = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--streams", "1,2", "--defer", "0,1",
                                      "--prompt", "8", "--gen", "2", "--device", "cpu", "--threads", "2", "--json"});
        QCOMPARE(deferred.exitCode, 0);
        QList<QPair<int, int>> runs;  // (deferral, streams)
        for (const QString& line : deferred.out.split('\n'))
            if (line.startsWith('{')) {
                const QJsonObject j = QJsonDocument::fromJson(line.toUtf8()).object();
                runs.append({j["deferral"].toInt(), j["streams"].toInt()});
            }
        QCOMPARE(runs, (QList<QPair<int, int>>{{0, 1}, {0, 2}, {1, 1}, {1, 2}}));
        const auto zero = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--streams", "0"});
        QVERIFY(zero.exitCode != 0);
        QVERIFY2(zero.err.contains("--streams counts must be at least 1"), qPrintable(zero.err));
    }

    // bench --model: a model folder or store, several prompt sizes, and the llama-bench-like table.
    void benchTakesAModelAndPrintsATable() {
        const auto r = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--prompt", "8,16", "--gen", "3", "--device",
                               "cpu", "--threads", "2"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains("| model | experts | device | threads | routed experts on | deferral | test | t/s |"),
                 qPrintable(r.out));
        // Decode after each prompt ("tg3 @ d8", llama-bench's depth) and from an empty context ("tg3").
        for (const char* test : {"| pp8 |", "| pp16 |", "| tg3 @ d8 |", "| tg3 @ d16 |", "| tg3 |"})
            QVERIFY2(r.out.contains(QString("| tiny-qwen3moe | bf16 | CPU | 2 | CPU | 0 ") + test), qPrintable(r.out));
        // Each prompt size is run once untimed first (llama-bench's warm-up), unless --no-warmup.
        QVERIFY2(r.err.contains("warm-up: prefill 8 tokens") && r.err.contains("warm-up: prefill 16 tokens"), qPrintable(r.err));
        const auto cold = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--prompt", "8", "--gen", "2", "--device",
                                  "cpu", "--threads", "2", "--no-warmup"});
        QCOMPARE(cold.exitCode, 0);
        QVERIFY2(!cold.err.contains("warm-up") && cold.out.contains("| pp8 |"), qPrintable(cold.err + cold.out));
        // --depth: decode after that much context, with no prefill row of its own.
        const auto deep = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--prompt", "8", "--gen", "2", "--depth",
                                  "24", "--device", "cpu", "--threads", "2", "--no-warmup"});
        QCOMPARE(deep.exitCode, 0);
        QVERIFY2(deep.out.contains("| tg2 @ d24 |") && !deep.out.contains("| pp24 |"), qPrintable(deep.out));
        const auto shallow = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--depth", "0"});
        QVERIFY(shallow.exitCode != 0);
        QVERIFY2(shallow.err.contains("--depth sizes must be at least 1"), qPrintable(shallow.err));
        const auto neither = runCli({"bench", "--prompt", "8"});
        QVERIFY(neither.exitCode != 0);
        QVERIFY2(neither.err.contains("either --model DIR|STORE or --synthetic SHAPE"), qPrintable(neither.err));
        const auto both = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--synthetic", "tiny"});
        QVERIFY(both.exitCode != 0);
        const auto tooLong = runCli({"bench", "--model", fixturePath("tiny-qwen3moe"), "--prompt", "100000", "--device", "cpu"});
        QVERIFY(tooLong.exitCode != 0);
        QVERIFY2(tooLong.err.contains("positions, but this model holds at most"), qPrintable(tooLong.err));
    }
};

QTEST_GUILESS_MAIN(CliTest)
#include "tst_cli.moc"
