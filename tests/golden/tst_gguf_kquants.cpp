// The K-quants and IQ4_XS end to end. Their blocks hold 256 values, longer than the fixtures' rows, so
// this test makes a small qwen3_moe model whose rows are all 256 long (hidden 256, experts of 256, 2
// layers, 8 experts top-2, tiny-qwen3moe's tokenizer, random bf16 weights from a fixed seed), writes it
// as a Hugging Face folder and as F32, Q8_0, Q4_K, Q5_K, Q6_K and IQ4_XS GGUFs, converts each into a
// store with bf16 experts and runs one prompt with its greedy continuation through each. The reference
// is the folder loaded as it is. F32 must match it within 1e-3; the quantized types report their
// top-1 agreement with it (the table in docs/BENCHMARKS.md) above a floor.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "gguf_fixture.h"
#include "gguf_quantize.h"
#include "convert/convert_model.h"
#include "tandem/engine.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;

namespace {

constexpr int kHidden = 256, kInter = 256, kLayers = 2, kExperts = 8, kTopK = 2, kHeads = 4, kKvHeads = 2,
              kHeadDim = 64, kGenerated = 32;

std::size_t argmax(const float* row, std::size_t n) { return static_cast<std::size_t>(std::max_element(row, row + n) - row); }

// Normal values of standard deviation `std`, stored as bf16 (round to nearest even).
RawTensor bf16Tensor(const std::string& name, std::vector<std::int64_t> shape, float std, std::mt19937& rng) {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    std::normal_distribution<float> normal(0.0f, std);
    QByteArray data(static_cast<qsizetype>(n * 2), '\0');
    for (std::int64_t i = 0; i < n; ++i) {
        const float v = std == 0 ? 1.0f : normal(rng);  // std 0: a norm's ones
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const auto b = static_cast<std::uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
        data[static_cast<qsizetype>(2 * i)] = static_cast<char>(b & 0xFF);
        data[static_cast<qsizetype>(2 * i + 1)] = static_cast<char>(b >> 8);
    }
    return {name, "BF16", std::move(shape), data};
}

// The model folder: tiny-qwen3moe's tokenizer and config with this test's dimensions, and weights
// scaled so that activations keep unit size and the logits are not flat (std 1 / sqrt(fan-in)).
bool writeModel(const QString& dir, int vocab) {
    if (!QDir().mkpath(dir)) return false;
    const QString fixture = fixturePath("tiny-qwen3moe");
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
        if (!QFile::copy(fixture + "/" + f, dir + "/" + f)) return false;
    QJsonObject config = QJsonDocument::fromJson(readFile(fixture + "/config.json")).object();
    config["hidden_size"] = kHidden;
    config["intermediate_size"] = kInter;
    config["moe_intermediate_size"] = kInter;
    config["num_hidden_layers"] = kLayers;
    config["num_experts"] = kExperts;
    config["num_experts_per_tok"] = kTopK;
    config["num_attention_heads"] = kHeads;
    config["num_key_value_heads"] = kKvHeads;
    config["head_dim"] = kHeadDim;
    if (!writeFile(dir + "/config.json", QJsonDocument(config).toJson())) return false;

    std::mt19937 rng(7);
    const float w = 1.0f / std::sqrt(static_cast<float>(kHidden));
    std::vector<RawTensor> t;
    t.push_back(bf16Tensor("model.embed_tokens.weight", {vocab, kHidden}, 1.0f, rng));
    t.push_back(bf16Tensor("model.norm.weight", {kHidden}, 0, rng));
    t.push_back(bf16Tensor("lm_head.weight", {vocab, kHidden}, w, rng));
    for (int l = 0; l < kLayers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        t.push_back(bf16Tensor(p + "input_layernorm.weight", {kHidden}, 0, rng));
        t.push_back(bf16Tensor(p + "post_attention_layernorm.weight", {kHidden}, 0, rng));
        t.push_back(bf16Tensor(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}, w, rng));
        t.push_back(bf16Tensor(p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}, w, rng));
        t.push_back(bf16Tensor(p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}, w, rng));
        t.push_back(bf16Tensor(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}, w, rng));
        t.push_back(bf16Tensor(p + "self_attn.q_norm.weight", {kHeadDim}, 0, rng));
        t.push_back(bf16Tensor(p + "self_attn.k_norm.weight", {kHeadDim}, 0, rng));
        t.push_back(bf16Tensor(p + "mlp.gate.weight", {kExperts, kHidden}, w, rng));
        for (int e = 0; e < kExperts; ++e) {
            const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
            t.push_back(bf16Tensor(x + "gate_proj.weight", {kInter, kHidden}, w, rng));
            t.push_back(bf16Tensor(x + "up_proj.weight", {kInter, kHidden}, w, rng));
            t.push_back(bf16Tensor(x + "down_proj.weight", {kHidden, kInter}, w * 2, rng));
        }
    }
    return writeFile(dir + "/model.safetensors", makeSafetensors(t));
}

std::unique_ptr<Engine> loadCpu(const QString& path) {
    EngineOptions o;
    o.threads = 2;
    o.device = Device::Cpu;
    return Engine::load(path.toStdString(), o);
}

}  // namespace

class GgufKQuantsTest : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    QString modelDir_;
    int vocab_ = 0;
    std::vector<int> tokens_;      // the prompt and the reference's greedy continuation but its last token
    std::size_t promptLength_ = 0;
    std::vector<float> reference_; // logits of every row of tokens_

private slots:
    void initTestCase() {
        vocab_ = QJsonDocument::fromJson(readFile(fixturePath("tiny-qwen3moe") + "/config.json")).object()["vocab_size"].toInt();
        QVERIFY(vocab_ > 0 && vocab_ % 256 == 0);
        modelDir_ = tmp_.filePath("model");
        QVERIFY(writeModel(modelDir_, vocab_));

        auto engine = loadCpu(modelDir_);
        tokens_ = loadGolden("tiny-qwen3moe", "chat").promptIds;
        promptLength_ = tokens_.size();
        auto session = engine->newSession();
        std::vector<float> last = session->append(tokens_, Logits::Last);
        for (int i = 0; i + 1 < kGenerated; ++i) {
            const int next = static_cast<int>(argmax(last.data(), last.size()));
            tokens_.push_back(next);
            last = session->append(std::vector<int>{next}, Logits::Last);
        }
        reference_ = engine->newSession()->append(tokens_, Logits::All);
        QCOMPARE(reference_.size(), tokens_.size() * static_cast<std::size_t>(vocab_));
        // The greedy continuation is not one token repeated: the model says something.
        QVERIFY(std::set<int>(tokens_.begin() + static_cast<std::ptrdiff_t>(promptLength_), tokens_.end()).size() > 3);
    }

    void quantizedModels_data() {
        QTest::addColumn<std::uint32_t>("type");
        QTest::addColumn<double>("floor");    // of top-1 agreement, prompt and greedy rows each
        QTest::addColumn<double>("ceiling");  // of the mean relative L2 error over the rows
        // The model is random, so a routing flip or a near-tie moves a row a lot; the bounds sit well
        // clear of what the test quantizers (round to nearest, no error search) reach here, and far from
        // what a wrong block layout gives (agreement near 1/vocab, errors near 1).
        QTest::newRow("F32") << std::uint32_t{kF32} << 1.0 << 1e-3;
        QTest::newRow("Q8_0") << std::uint32_t{kQ8_0} << 0.85 << 0.05;
        QTest::newRow("Q6_K") << std::uint32_t{kQ6_K} << 0.8 << 0.12;
        QTest::newRow("Q5_K") << std::uint32_t{kQ5_K} << 0.55 << 0.3;
        QTest::newRow("Q4_K") << std::uint32_t{kQ4_K} << 0.3 << 0.5;
        QTest::newRow("IQ4_XS") << std::uint32_t{kIQ4_XS} << 0.3 << 0.5;
    }
    void quantizedModels() {
        QFETCH(std::uint32_t, type);
        QFETCH(double, floor);
        QFETCH(double, ceiling);
        QTemporaryDir tmp;
        const QString gguf = tmp.filePath("model.gguf");
        QVERIFY(writeFile(gguf, ggufFromFixture(modelDir_, {type, true, true}).bytes()));
        const QString store = tmp.filePath("store");
        const auto result = convert::convertModel({gguf.toStdString(), store.toStdString(), io::ExpertType::BF16, 2}, {});
        QCOMPARE(result.packedLayers, kLayers);

        const std::vector<float> logits = loadCpu(store)->newSession()->append(tokens_, Logits::All);
        QCOMPARE(logits.size(), reference_.size());
        const auto V = static_cast<std::size_t>(vocab_);
        double worstPrompt = 0, worstGen = 0, topPrompt = 0, topGen = 0, meanError = 0;
        for (std::size_t r = 0; r < tokens_.size(); ++r) {
            double& worst = r < promptLength_ ? worstPrompt : worstGen;
            double& top = r < promptLength_ ? topPrompt : topGen;
            const double error = relativeL2(&logits[r * V], &reference_[r * V], V);
            worst = std::max(worst, error);
            meanError += error / static_cast<double>(tokens_.size());
            top += argmax(&logits[r * V], V) == argmax(&reference_[r * V], V);
        }
        topPrompt /= static_cast<double>(promptLength_);
        topGen /= static_cast<double>(tokens_.size() - promptLength_);
        qInfo("GGUF qwen3moe-256 %-6s worst rel-L2 prompt %.2e greedy %.2e, mean %.2e, top-1 prompt %5.1f%%, greedy %5.1f%%",
              ggmlTypeName(type), worstPrompt, worstGen, meanError, 100 * topPrompt, 100 * topGen);
        if (type == kF32)
            QVERIFY2(worstPrompt <= 1e-3 && worstGen <= 1e-3,
                     qPrintable(QString("relative error %1 / %2").arg(worstPrompt).arg(worstGen)));
        QVERIFY2(meanError <= ceiling, qPrintable(QString("mean relative error %1").arg(meanError)));
        QVERIFY2(topPrompt >= floor && topGen >= floor,
                 qPrintable(QString("top-1 agreement %1 / %2").arg(topPrompt).arg(topGen)));
    }
};

QTEST_GUILESS_MAIN(GgufKQuantsTest)
#include "tst_gguf_kquants.moc"
