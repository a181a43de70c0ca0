// config.json of the four families, and the errors of missing, malformed and unsupported configs.
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "model/config.h"
#include "model/family.h"
#include "model/synthetic.h"
#include "tandem/error.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::model;
using namespace tandem::test;

namespace {

ModelConfig fixtureConfig(const char* name) { return loadModelConfig(fixturePath(name).toStdString()); }

const char* kMinimalQwen = R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8,
    "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16, "num_experts": 4,
    "moe_intermediate_size": 4, "num_experts_per_tok": 2})";

}  // namespace

class ConfigTest : public QObject {
    Q_OBJECT

    static void expectError(const std::string& json, const QStringList& fragments) {
        try {
            parseModelConfig(json, "", "/m/config.json");
            QFAIL("accepted a bad config");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("/m/config.json"), e.what());
            for (const auto& f : fragments) QVERIFY2(QString(e.what()).contains(f), e.what());
        }
    }

    static std::string patched(const std::string& key, const std::string& value) {
        std::string json = kMinimalQwen;
        json.insert(json.size() - 1, ", \"" + key + "\": " + value);
        return json;
    }

private slots:
    void qwen3() {
        const auto c = fixtureConfig("tiny-qwen3moe");
        QCOMPARE(QString::fromUtf8(c.family->name), QString("qwen3_moe"));
        QCOMPARE(c.attention, AttentionKind::Gqa);
        QVERIFY(c.qkNorm);
        QCOMPARE(c.numKvHeads, 2);
        QCOMPARE(c.headDim, 32);
        QCOMPARE(c.numExperts, 16);
        QCOMPARE(c.router.topK, 4);
        QVERIFY(c.router.normalize);
        QCOMPARE(c.router.scoring, ExpertScoring::Softmax);
        QVERIFY(c.isMoeLayer(0));
        QVERIFY(!c.ropeInterleaved);
        QVERIFY(!c.yarn.has_value());
        QVERIFY(c.generation.doSample);
        QCOMPARE(c.generation.temperature, 0.6f);
    }

    void qwen3DenseLayers() {
        auto c = parseModelConfig(patched("mlp_only_layers", "[0]"), "", "config.json");
        QVERIFY(!c.isMoeLayer(0));
        QVERIFY(c.isMoeLayer(1));
        c = parseModelConfig(patched("decoder_sparse_step", "2"), "", "config.json");
        QVERIFY(!c.isMoeLayer(0));
        QVERIFY(c.isMoeLayer(1));
    }

    void mixtral() {
        const auto c = fixtureConfig("tiny-mixtral");
        QCOMPARE(QString::fromUtf8(c.family->name), QString("mixtral"));
        QCOMPARE(c.numExperts, 8);
        QCOMPARE(c.moeIntermediateSize, 96);
        QVERIFY(c.router.normalize);
        QVERIFY(!c.slidingWindow.has_value());
        QVERIFY(c.isMoeLayer(0) && c.isMoeLayer(1));
    }

    // GLM-4.5: GQA with biases and a rotary width of half the head, DeepSeek-V3's router and shared expert,
    // the MTP layer counted apart; the synthetic GLM-4.5-Air shape reads the same way.
    void glm4Moe() {
        const auto c = fixtureConfig("tiny-glm4moe");
        QCOMPARE(QString::fromUtf8(c.family->name), QString("glm4_moe"));
        QCOMPARE(c.attention, AttentionKind::Gqa);
        QVERIFY(c.attentionBias);
        QVERIFY(!c.qkNorm);
        QCOMPARE(c.headDim, 32);
        QCOMPARE(c.ropeDim(), 16);
        QCOMPARE(c.qkHeadDim(), 32);
        QVERIFY(!c.ropeInterleaved);
        QCOMPARE(c.router.scoring, ExpertScoring::Sigmoid);
        QVERIFY(c.router.hasCorrectionBias);
        QCOMPARE(c.router.scale, 2.5f);
        QCOMPARE(c.numSharedExperts, 1);
        QCOMPARE(c.numNextnPredictLayers, 1);
        QVERIFY(!c.isMoeLayer(0));
        QVERIFY(c.isMoeLayer(1) && c.isMoeLayer(2));
        expectError(R"({"model_type": "glm4_moe", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 2,
            "num_attention_heads": 2, "head_dim": 4, "partial_rotary_factor": 0.1, "intermediate_size": 16,
            "n_routed_experts": 4, "moe_intermediate_size": 4, "num_experts_per_tok": 2})", {"partial_rotary_factor"});
        expectError(R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 2,
            "num_attention_heads": 2, "intermediate_size": 16, "num_experts": 4, "attention_bias": true,
            "moe_intermediate_size": 4, "num_experts_per_tok": 2})", {"attention_bias", "qwen3_moe"});
        const auto air = syntheticConfig("glm-4.5-air");
        QCOMPARE(air.ropeDim(), 64);
        QVERIFY(air.attentionBias);
        QCOMPARE(air.moeLayerCount(), 45);
    }

    void deepseekV2() {
        const auto c = fixtureConfig("tiny-deepseekv2");
        QCOMPARE(QString::fromUtf8(c.family->name), QString("deepseek_v2"));
        QCOMPARE(c.attention, AttentionKind::Mla);
        QCOMPARE(c.qLoraRank, 0);
        QCOMPARE(c.kvLoraRank, 32);
        QCOMPARE(c.qkHeadDim(), 48);
        QCOMPARE(c.ropeDim(), 16);
        QVERIFY(c.ropeInterleaved);
        QVERIFY(c.yarn.has_value());
        QCOMPARE(c.yarn->factor, 40.0);
        QCOMPARE(c.yarn->mscaleAllDim, 0.707);
        QCOMPARE(c.numSharedExperts, 2);
        QCOMPARE(c.router.selection, ExpertSelection::TopK);
        QVERIFY(!c.router.normalize);
        QVERIFY(!c.isMoeLayer(0));  // first_k_dense_replace = 1
        QVERIFY(c.isMoeLayer(1));
    }

    void deepseekV2GroupLimited() {
        const auto c = parseModelConfig(R"({"model_type": "deepseek_v2", "vocab_size": 10, "hidden_size": 8,
            "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16, "n_routed_experts": 8,
            "moe_intermediate_size": 4, "num_experts_per_tok": 2, "topk_method": "group_limited_greedy",
            "n_group": 4, "topk_group": 2, "routed_scaling_factor": 16.0, "kv_lora_rank": 4,
            "qk_nope_head_dim": 4, "qk_rope_head_dim": 2, "v_head_dim": 4})", "", "config.json");
        QCOMPARE(c.router.selection, ExpertSelection::GroupLimitedByMax);
        QCOMPARE(c.router.scale, 16.0f);
        QCOMPARE(c.router.numGroups, 4);
    }

    void deepseekV3() {
        const auto c = fixtureConfig("tiny-deepseekv3-fp8");
        QCOMPARE(QString::fromUtf8(c.family->name), QString("deepseek_v3"));
        QCOMPARE(c.qLoraRank, 64);
        QCOMPARE(c.router.scoring, ExpertScoring::Sigmoid);
        QCOMPARE(c.router.selection, ExpertSelection::GroupLimitedByTop2);
        QVERIFY(c.router.hasCorrectionBias);
        QVERIFY(c.router.normalize);
        QCOMPARE(c.router.scale, 2.5f);
        QCOMPARE(c.router.numGroups, 4);
        QCOMPARE(c.router.topKGroups, 2);
        QCOMPARE(c.numNextnPredictLayers, 1);
        QCOMPARE(c.fp8BlockRows, 128);
        QCOMPARE(c.fp8BlockCols, 128);
    }

    void eosFromGenerationConfig() {
        const auto c = parseModelConfig(patched("eos_token_id", "3"), R"({"eos_token_id": [1, 2], "do_sample": false})",
                                        "/m/config.json");
        QCOMPARE(c.eosTokenIds, (std::vector<int>{1, 2}));
        QVERIFY(!c.generation.doSample);
        const auto only = parseModelConfig(patched("eos_token_id", "3"), "", "/m/config.json");
        QCOMPARE(only.eosTokenIds, std::vector<int>{3});
    }

    void missingConfigFile() {
        QTemporaryDir tmp;
        try {
            loadModelConfig(tmp.path().toStdString());
            QFAIL("no error for a folder without config.json");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("has no config.json"), e.what());
        }
    }

    void malformedJson() { expectError("{\"model_type\": \"qwen3_moe\",", {"not valid JSON"}); }
    void notAnObject() { expectError("[1, 2]", {"expected a JSON object"}); }
    void unknownArchitecture() { expectError(R"({"model_type": "llama"})", {"'llama' is not supported", "qwen3_moe"}); }
    void missingField() {
        expectError(R"({"model_type": "mixtral", "vocab_size": 10, "hidden_size": 8})", {"missing 'num_hidden_layers'"});
    }
    void wrongType() { expectError(patched("rms_norm_eps", "\"small\""), {"'rms_norm_eps' has the wrong type"}); }
    void wrongTypeOverridesDefault() { expectError(patched("hidden_size", "8.5"), {"'hidden_size'"}); }
    void headsNotDivisible() { expectError(patched("num_key_value_heads", "3"), {"not a multiple"}); }
    void tooManyActiveExperts() { expectError(patched("num_experts_per_tok", "9"), {"num_experts_per_tok"}); }
    void unsupportedRopeScaling() {
        expectError(patched("rope_scaling", R"({"type": "dynamic", "factor": 2.0})"), {"'dynamic' is not supported"});
    }
    void unsupportedQuantization() {
        expectError(patched("quantization_config", R"({"quant_method": "gptq"})"), {"'gptq' is not supported"});
    }
    void attentionBias() { expectError(patched("attention_bias", "true"), {"attention_bias"}); }
    void eosOutsideVocabulary() { expectError(patched("eos_token_id", "[1, 99]"), {"99", "outside the vocabulary"}); }
};

QTEST_GUILESS_MAIN(ConfigTest)
#include "tst_config.moc"
